package wsapi

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Corked writes (docs/ARCHITECTURE.md "WebSocket writes"). The WebSocket
// library flushes its buffer to the socket after every message, so a REQ
// answered with fifty events cost fifty write(2) calls, each waking the
// reader. The connection's writer drains its queue with the socket corked:
// each message's frame is appended to a buffer, and the buffer goes to the
// socket in one write when the drain ends (or past corkBytes).

// corkBytes is how much a drain gathers before it writes.
const corkBytes = 64 << 10

// frameBufferBytes is the WebSocket library's write buffer per connection,
// which it keeps for the connection's life. A frame's header and payload go
// through it to the corkWriter, which gathers the frames of a drain; a
// payload larger than what is left goes past it in two writes instead of
// one. A kilobyte holds a usual message whole and costs an idle connection
// 3 KiB less than bufio's default 4 KiB (P6, docs/PERFORMANCE.md "Idle
// connections: what net/http kept").
const frameBufferBytes = 1024

// corkPool holds the drain buffers: an idle connection keeps none.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkBytes+4096); return &b }}

// corkWriter is the writer under the WebSocket library's buffer: the
// hijacked connection, written at once unless corked.
type corkWriter struct {
	conn net.Conn
	// writes counts the socket writes (buzz_ws_socket_writes_total).
	writes prometheus.Counter

	mu     sync.Mutex
	corked bool
	buf    *[]byte // from corkPool while corked and holding data
}

// Write appends p while corked, or writes it to the connection.
func (w *corkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.corked {
		w.writes.Inc()
		return w.conn.Write(p)
	}
	if w.buf == nil {
		w.buf = corkPool.Get().(*[]byte)
	}
	*w.buf = append(*w.buf, p...)
	return len(p), nil
}

// cork holds what is written until uncork.
func (w *corkWriter) cork() {
	w.mu.Lock()
	w.corked = true
	w.mu.Unlock()
}

// buffered is the bytes held since cork.
func (w *corkWriter) buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return 0
	}
	return len(*w.buf)
}

// uncork writes what was held in one write, which must end by deadline,
// and writes at once again.
func (w *corkWriter) uncork(deadline time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.corked = false
	if w.buf == nil {
		return nil
	}
	b := w.buf
	w.buf = nil
	defer func() {
		*b = (*b)[:0]
		corkPool.Put(b)
	}()
	if err := w.conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	w.writes.Inc()
	_, err := w.conn.Write(*b)
	if err == nil {
		err = w.conn.SetWriteDeadline(time.Time{})
	}
	return err
}

// readBufferBytes is the read buffer the WebSocket library keeps for the
// connection's life, in place of net/http's 4 KiB one. A frame larger
// than it is read past it, straight into the message, so it bounds only
// how many small frames one read(2) can take in (P6, docs/PERFORMANCE.md
// "Idle connections: what net/http kept").
const readBufferBytes = 1024

// corkingResponse hands the WebSocket library a hijacked connection whose
// buffer writes to a corkWriter.
type corkingResponse struct {
	http.ResponseWriter
	cork *corkWriter
}

// Hijack hijacks the connection and keeps it for the corkWriter. The
// buffers it returns are the connection's own, smaller than net/http's;
// what net/http had already read past the request (frames a client sent
// with its upgrade) is read first, from the connection itself, since the
// library starts its reader over on the connection.
func (r *corkingResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	r.cork.conn = conn
	c := &corkedConn{Conn: conn, cork: r.cork}
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Peek(n)
		c.early = bytes.Clone(early)
	}
	return c, bufio.NewReadWriter(bufio.NewReaderSize(c, readBufferBytes), bufio.NewWriterSize(r.cork, frameBufferBytes)), nil
}

// closeFlushTimeout bounds the write of what Close finds held.
const closeFlushTimeout = time.Second

// corkedConn is the hijacked connection as the WebSocket library closes
// it. The library answers a client's close frame from its reader and
// closes the connection at once: during a drain that answer is held by
// the corkWriter, and the client would see the connection end without
// it. Close therefore writes what is held first, unless a write is in
// progress: the library also closes the connection to abort a write that
// ran out of time, and that must not wait.
type corkedConn struct {
	net.Conn
	cork  *corkWriter
	early []byte // read past the request by net/http; only the reader reads it
}

// Read reads what net/http had read past the request, then the connection.
func (c *corkedConn) Read(p []byte) (int, error) {
	if len(c.early) == 0 {
		return c.Conn.Read(p)
	}
	n := copy(p, c.early)
	if c.early = c.early[n:]; len(c.early) == 0 {
		c.early = nil
	}
	return n, nil
}

func (c *corkedConn) Close() error {
	c.cork.flushHeld()
	return c.Conn.Close()
}

// flushHeld writes what is held, within closeFlushTimeout, when no write
// is in progress; later writes go on as before.
func (w *corkWriter) flushHeld() {
	if !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if w.buf == nil {
		return
	}
	b := w.buf
	w.buf = nil
	defer func() {
		*b = (*b)[:0]
		corkPool.Put(b)
	}()
	if w.conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout)) == nil {
		w.writes.Inc()
		_, _ = w.conn.Write(*b)
	}
}
