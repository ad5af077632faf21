package wsapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wire"
)

type authState int

const (
	authPending authState = iota
	authDone
	authFailed
)

// closeReq asks the writer to end the connection.
type closeReq struct {
	code   websocket.StatusCode
	reason string
	// notice is written first, ahead of the queue.
	notice []byte
	// flush writes the queued messages before the close frame.
	flush bool
}

// conn is one WebSocket. The read loop runs on a goroutine of its own,
// started by ServeHTTP, which then returns (docs/ARCHITECTURE.md
// "WebSocket writes"). writeLoop is the only goroutine writing data frames,
// and it runs only while the queue holds messages or a close is asked for:
// an idle connection holds one stack, the read loop's (ping and pong
// control frames are written by the library between data frames, so they
// never wait behind the queue); the heartbeat timer pings.
type conn struct {
	srv *Server
	ws  *websocket.Conn
	// cork is the socket under ws (cork.go); the writer drains the queue
	// with it corked.
	cork      *corkWriter
	tenant    tenant.Tenant
	challenge string
	log       *slog.Logger
	// id names the connection in logs and, as "ws <id>", its share of
	// concurrent reads.
	id string

	ctx    context.Context
	cancel context.CancelFunc

	send       sendQueue
	ctrl       chan closeReq
	closing    atomic.Bool
	writerDone chan struct{}
	background sync.WaitGroup // handlers
	hb         heartbeat

	// counted is set by the writer once the challenge is written; read
	// after writerDone. Writers follow one another through send.mu.
	counted bool
	// quietUntil is when the read loop may read again after a frame was
	// refused for the WebSocket quota (quota.go), zero when it may now.
	// Only the read loop touches it.
	quietUntil time.Time

	mu     sync.Mutex
	state  authState
	pubkey string
	subs   map[string]*subscription
	// negs are the open NIP-77 sessions by id (neg.go).
	negs map[string]*negSession
	// indexKeys and filterBytes are what the registered subscriptions hold
	// against ConnMaxIndexKeys and ConnMaxFilterBytes (budget.go).
	indexKeys   int
	filterBytes int
	strikes     int
	authTimer   *time.Timer
}

func newConn(s *Server, ws *websocket.Conn, t tenant.Tenant) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		srv:        s,
		ws:         ws,
		tenant:     t,
		challenge:  auth.NewChallenge(),
		ctx:        ctx,
		cancel:     cancel,
		send:       sendQueue{max: s.set.SendBuffer, maxBytes: s.set.Bytes.SendBufferBytes},
		ctrl:       make(chan closeReq, 1),
		writerDone: make(chan struct{}),
		subs:       make(map[string]*subscription),
		negs:       make(map[string]*negSession),
	}
	c.id = newConnID()
	c.log = s.log.With(slog.String("community", t.Host), slog.String("conn_id", c.id))
	return c
}

func newConnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// serve runs the connection until it closes, then tears it down.
func (c *conn) serve() {
	if _, start := c.send.push(wire.AuthChallenge(c.challenge)); start { // the first frame
		go c.writeLoop()
	}
	c.startHeartbeat()
	c.log.Debug("websocket connected")

	c.readLoop()

	c.closeWith(websocket.StatusNormalClosure, "", nil, false)
	<-c.writerDone
	c.cancel()
	c.stopHeartbeat()
	c.background.Wait()

	c.mu.Lock()
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
	for _, sub := range c.subs {
		c.dropLocked(sub)
	}
	for _, s := range c.negs {
		c.dropNegLocked(s)
	}
	c.mu.Unlock()
	c.srv.m.WSConnectionsActive.Dec()
	c.log.Debug("websocket closed")
}

// readLoop reads frames until the connection fails or asks to close.
func (c *conn) readLoop() {
	limit := c.srv.set.MaxFrameBytes
	c.ws.SetReadLimit(-1) // enforced here, so the NOTICE goes out before 1009
	for {
		typ, r, err := c.ws.Reader(c.ctx)
		if err != nil {
			return
		}
		b, err := io.ReadAll(io.LimitReader(r, 2*int64(limit)+1))
		if err != nil {
			return
		}
		if len(b) > 2*limit {
			c.reply(wire.Notice(wire.FrameTooLarge(len(b), limit)))
			c.closeWith(websocket.StatusMessageTooBig, "frame too large", nil, true)
			return
		}
		if typ == websocket.MessageBinary && !utf8.Valid(b) {
			continue
		}
		if len(b) > limit {
			msg := wire.FrameTooLarge(len(b), limit)
			c.reply(wire.Notice(msg))
			if id := wire.PeekEventID(b); id != "" {
				c.reply(wire.OK(id, false, msg))
			}
			continue
		}
		if c.closing.Load() || c.srv.shuttingDown() {
			continue // frames after a close request or during shutdown start no work
		}
		c.dispatch(b)
		if !c.quiet() {
			return
		}
	}
}

// quiet waits, after a frame refused for the WebSocket quota, until the
// quota's window has reopened, so the frames the client sends meanwhile
// wait in the socket (docs/OPERATIONS.md "Per-user quotas"). It reports
// false when the connection ended meanwhile.
func (c *conn) quiet() bool {
	if c.quietUntil.IsZero() {
		return true
	}
	d := time.Until(c.quietUntil)
	c.quietUntil = time.Time{}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutting
}

// dispatch parses one frame and routes it. AUTH, CLOSE and NEG-CLOSE run
// here, in arrival order; EVENT, REQ, COUNT, NEG-OPEN and NEG-MSG start a
// handler goroutine.
func (c *conn) dispatch(b []byte) {
	msg, err := wire.ParseClient(b)
	if err != nil {
		var pe *wire.ParseError
		if errors.As(err, &pe) {
			c.reply(wire.Notice(pe.Notice()))
		}
		return
	}
	switch msg.Type {
	case wire.TypeAuth:
		c.handleAuth(msg.Event)
	case wire.TypeClose:
		c.handleClose(msg.SubID)
	case wire.TypeEvent:
		c.handleEvent(msg.Event)
	case wire.TypeReq:
		c.handleReq(msg.SubID, msg.Filters)
	case wire.TypeCount:
		c.handleCount(msg.SubID, msg.Filters)
	case wire.TypeNegOpen:
		c.handleNegOpen(msg.SubID, msg.Filters, msg.NegMessage)
	case wire.TypeNegMsg:
		c.handleNegMsg(msg.SubID, msg.NegMessage)
	case wire.TypeNegClose:
		c.handleNegClose(msg.SubID)
	}
}

// goHandler runs fn holding a permit the caller already acquired.
func (c *conn) goHandler(fn func()) {
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		defer c.srv.releasePermit()
		fn()
	}()
}

// identity returns the authenticated pubkey.
func (c *conn) identity() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pubkey, c.state == authDone
}

// reply queues a message that is never dropped.
func (c *conn) reply(msg []byte) {
	c.mu.Lock()
	c.enqueueLocked(msg, false)
	c.mu.Unlock()
}

// enqueueLocked places msg on the send queue without blocking. On a full
// queue an ephemeral event is dropped with a strike; anything else, or
// SlowClientGraceLimit consecutive strikes, closes the connection.
// c.mu must be held.
func (c *conn) enqueueLocked(msg []byte, ephemeral bool) bool {
	if c.closing.Load() {
		return false
	}
	if ok, start := c.send.push(msg); ok {
		c.strikes = 0
		if start {
			go c.writeLoop()
		}
		return true
	}
	if ephemeral {
		c.strikes++
		if c.strikes < c.srv.set.SlowClientGraceLimit {
			return false
		}
	}
	if c.closeWith(websocket.StatusPolicyViolation, "slow client", nil, false) {
		c.srv.m.WSBackpressureDisconnects.Inc()
		c.log.Info("slow client closed", slog.Int("strikes", c.strikes))
	}
	return false
}

// sendQueue is a connection's outbound queue of at most max messages and,
// when maxBytes is above 0, at most maxBytes bytes (BUZZ_SEND_BUFFER_BYTES;
// a message larger than that still goes into an empty queue). It holds
// memory only while it holds messages, and a writer goroutine only while
// there is something to write, so an idle connection costs no buffer and
// no second stack (target P6 of docs/PERFORMANCE.md). A push that finds
// no writer tells its caller to start one; the writer ends when it finds
// the queue empty. Like a channel whose receiver is waiting, a message
// pushed with no writer running is handed to the writer it starts rather
// than counted against max or maxBytes: the writer takes one message out
// of the queue before it writes it.
type sendQueue struct {
	mu       sync.Mutex
	items    [][]byte
	head     int
	max      int
	maxBytes int
	bytes    int // the bytes of the counted messages
	// writing is set while a writer runs, and for good once a writer has
	// closed the connection, so that none starts again.
	writing bool
	kicked  bool // a close was asked for while the writer ran
	handed  bool // items[head] was pushed with no writer running: not counted
}

// push queues msg unless the queue is full, in messages or in bytes; it
// never blocks. start reports that no writer was running: the caller starts
// one (go c.writeLoop()).
func (q *sendQueue) push(msg []byte) (ok, start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	queued := len(q.items) - q.head
	if q.handed {
		queued--
	}
	full := queued >= q.max || (q.maxBytes > 0 && q.bytes > 0 && q.bytes+len(msg) > q.maxBytes)
	if full && q.writing {
		return false, false
	}
	if !q.writing {
		q.writing, q.handed, start = true, true, true
	} else {
		q.bytes += len(msg)
	}
	if q.head > 0 && q.head >= len(q.items)/2 { // drop the written half before growing
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, msg)
	return true, start
}

// pop returns the oldest queued message, if any.
func (q *sendQueue) pop() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return nil, false
	}
	msg := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if !q.handed {
		q.bytes -= len(msg)
	}
	q.handed = false
	if q.head == len(q.items) {
		q.items, q.head = nil, 0 // empty: give the backing array back
	}
	return msg, true
}

// park ends the writer if the queue is empty and no close was asked for
// since it last looked; it reports whether the writer must return.
func (q *sendQueue) park() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head < len(q.items) || q.kicked {
		q.kicked = false
		return false
	}
	q.writing = false
	return true
}

// kick makes sure a writer will look at the close request just sent: it
// reports true when none runs, and the caller starts one.
func (q *sendQueue) kick() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writing {
		q.kicked = true
		return false
	}
	q.writing = true
	return true
}

// end keeps any writer from starting again: the connection is closed.
func (q *sendQueue) end() {
	q.mu.Lock()
	q.writing = true
	q.mu.Unlock()
}

// closeWith asks the writer to close the connection. Only the first request
// counts; it reports whether this one was it. It never blocks.
func (c *conn) closeWith(code websocket.StatusCode, reason string, notice []byte, flush bool) bool {
	if !c.closing.CompareAndSwap(false, true) {
		return false
	}
	c.requestClose(closeReq{code: code, reason: reason, notice: notice, flush: flush})
	return true
}

// requestClose hands req to the writer, starting one if none runs. The
// caller has claimed c.closing, so this runs once a connection.
func (c *conn) requestClose(req closeReq) {
	c.ctrl <- req
	if c.send.kick() {
		go c.writeLoop()
	}
}

// writeLoop is the only writer of data frames while it runs, and only one
// runs at a time (sendQueue). It returns when the queue is empty, ending
// for good once it has closed the connection. Close requests are drained
// before queued messages.
func (c *conn) writeLoop() {
	for {
		select {
		case req := <-c.ctrl:
			c.finish(req)
			c.writerEnded()
			return
		default:
		}
		msg, ok := c.send.pop()
		if !ok {
			if c.send.park() {
				return
			}
			continue
		}
		if err := c.drain(msg); err != nil {
			c.closing.Store(true)
			_ = c.ws.CloseNow()
			c.writerEnded()
			return
		}
		if !c.counted {
			c.counted = true
			c.challengeWritten()
		}
	}
}

// writerEnded records that the connection is closed on the writer's side.
func (c *conn) writerEnded() {
	c.send.end()
	close(c.writerDone)
}

// drain writes msg and what else the queue holds with the socket corked
// (cork.go): one write(2) per corkBytes instead of one per message. The
// messages go into memory, so they need no deadline of their own; the
// socket write has writeTimeout.
func (c *conn) drain(msg []byte) error {
	if c.cork == nil || c.cork.conn == nil {
		return c.write(msg)
	}
	c.cork.cork()
	for {
		if err := c.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
			_ = c.cork.uncork(time.Now().Add(writeTimeout))
			return err
		}
		c.srv.m.WSMessagesSent.Inc()
		if c.cork.buffered() >= corkBytes {
			break
		}
		var ok bool
		if msg, ok = c.send.pop(); !ok {
			break
		}
	}
	return c.cork.uncork(time.Now().Add(writeTimeout))
}

func (c *conn) write(msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	c.srv.m.WSMessagesSent.Inc()
	return c.ws.Write(ctx, websocket.MessageText, msg)
}

func (c *conn) finish(req closeReq) {
	if req.flush {
		for {
			msg, ok := c.send.pop()
			if !ok || c.write(msg) != nil {
				break
			}
		}
	}
	if req.notice != nil {
		_ = c.write(req.notice)
	}
	_ = c.ws.Close(req.code, req.reason)
}

// challengeWritten counts the connection and starts the AUTH deadline.
func (c *conn) challengeWritten() {
	c.srv.m.WSConnectionsActive.Inc()
	c.mu.Lock()
	if c.state != authDone {
		c.authTimer = time.AfterFunc(c.srv.set.AuthTimeout, c.authTimeout)
	}
	c.mu.Unlock()
}

func (c *conn) authTimeout() {
	if _, ok := c.identity(); ok {
		return
	}
	// Claim the close first and count before the close frame is queued,
	// so a client that sees the close also sees the counters.
	if c.closing.CompareAndSwap(false, true) {
		c.srv.m.WSAuthTimeouts.Inc()
		c.srv.m.AuthFailures.WithLabelValues("timeout").Inc()
		c.requestClose(closeReq{code: websocket.StatusPolicyViolation, reason: "auth timeout"})
		c.log.Debug("auth timeout")
	}
}

// heartbeat pings every HeartbeatInterval; missedPongLimit consecutive
// pings without a pong within the interval close the connection. It is a
// timer, not a goroutine: between pings a connection holds no stack for it
// (target P6 of docs/PERFORMANCE.md), and a goroutine exists only while a ping waits for its pong.
type heartbeat struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	running sync.WaitGroup // the ping in flight
	missed  int            // read and written by one beat at a time
}

func (c *conn) startHeartbeat() {
	c.hb.mu.Lock()
	defer c.hb.mu.Unlock()
	c.hb.timer = time.AfterFunc(c.srv.set.HeartbeatInterval, c.beat)
}

// stopHeartbeat stops the timer and waits for a ping in flight, which
// c.cancel has already cut short.
func (c *conn) stopHeartbeat() {
	c.hb.mu.Lock()
	c.hb.stopped = true
	if c.hb.timer != nil {
		c.hb.timer.Stop()
	}
	c.hb.mu.Unlock()
	c.hb.running.Wait()
}

// beat sends one ping and arms the next; it runs on the timer's goroutine.
func (c *conn) beat() {
	c.hb.mu.Lock()
	if c.hb.stopped {
		c.hb.mu.Unlock()
		return
	}
	c.hb.running.Add(1)
	c.hb.mu.Unlock()
	defer c.hb.running.Done()
	next, again := c.ping()
	if !again {
		return
	}
	c.hb.mu.Lock()
	if !c.hb.stopped {
		c.hb.timer.Reset(next)
	}
	c.hb.mu.Unlock()
}

// ping sends one ping and returns when the next is due, or false when the
// heartbeat ends.
func (c *conn) ping() (next time.Duration, again bool) {
	interval := c.srv.set.HeartbeatInterval
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, interval)
	err := c.ws.Ping(ctx)
	cancel()
	switch {
	case err == nil:
		c.hb.missed = 0
		return interval - time.Since(start), true
	case c.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		c.hb.missed++
		if c.hb.missed >= missedPongLimit {
			c.log.Debug("heartbeat missed", slog.Int("pings", c.hb.missed))
			c.closeWith(websocket.StatusPolicyViolation, "heartbeat timeout", nil, false)
			return 0, false
		}
		return 0, true
	default:
		return 0, false
	}
}
