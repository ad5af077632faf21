package wsapi

import (
	"bufio"
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

// corkingResponse hands the WebSocket library a hijacked connection whose
// buffer writes to a corkWriter.
type corkingResponse struct {
	http.ResponseWriter
	cork *corkWriter
}

// Hijack hijacks the connection and keeps it for the corkWriter.
func (r *corkingResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	r.cork.conn = conn
	return corkedConn{Conn: conn, cork: r.cork}, bufio.NewReadWriter(brw.Reader, bufio.NewWriter(r.cork)), nil
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
	cork *corkWriter
}

func (c corkedConn) Close() error {
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
