package client

import (
	"bytes"
	"context"
	"fmt"
	neturl "net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/event"
)

// MaxFrameBytes bounds one relay frame the client accepts.
const MaxFrameBytes = 8 << 20

// Conn is an authenticated WebSocket connection to a relay. All methods are
// safe for concurrent use: many EVENTs, REQs and COUNTs may be in flight at
// once, and one reader goroutine routes each answer to its caller.
type Conn struct {
	ws     *websocket.Conn
	relay  string // the AUTH relay tag: the dialled URL, its host replaced by DialHost's host
	pubkey string

	mu   sync.Mutex
	oks  map[string]chan okResult // event id → waiter
	subs map[string]*sub          // sub id → subscription

	nextSub atomic.Uint64
	wmu     chan struct{} // holds a token while a frame is being written
	done    chan struct{} // closed when the reader stops
	err     error         // why the reader stopped; read after done
	closing atomic.Bool
}

type okResult struct {
	ok  bool
	msg string
}

// sub is one REQ or COUNT in flight. The reader goroutine calls deliver and
// finishes it; the owner waits on eose, result or finished.
type sub struct {
	deliver func(event.Event) // EVENT; nil for COUNT
	// frames, when set, counts this REQ's EVENT frames instead of
	// decoding them (QueryCount).
	frames  *atomic.Int64
	eose    chan struct{} // closed on EOSE
	result  chan int64    // COUNT answer, buffered 1
	closed  chan struct{} // closed on CLOSED or when the connection ends
	msg     string        // CLOSED message; read after closed
	eoseOne sync.Once
	endOne  sync.Once
}

func newSub(deliver func(event.Event)) *sub {
	return &sub{deliver: deliver, eose: make(chan struct{}), result: make(chan int64, 1), closed: make(chan struct{})}
}

func (s *sub) end(msg string) {
	s.endOne.Do(func() {
		s.msg = msg
		close(s.closed)
	})
}

// Dial connects to url, waits for the relay's ["AUTH",challenge], answers it
// with a kind 22242 event signed with sk (tags challenge and relay=url) and
// waits for its OK. ctx bounds the handshake only; the connection lives until
// Close. A refused AUTH is a *RefusedError carrying the OK message. It is
// DialHost with no host.
func Dial(ctx context.Context, url string, sk []byte) (*Conn, error) {
	return DialHost(ctx, url, "", sk)
}

// DialHost is Dial to a community whose host is not the dialled address, as
// when several communities share one relay on 127.0.0.1:PORT: the TCP
// connection goes to url, the WebSocket handshake carries Host: host, and the
// AUTH event's relay tag is url with its host (and port) replaced by host,
// scheme and path kept (ws://127.0.0.1:4000/ with host "a.soak.test" signs
// relay=ws://a.soak.test/), because the relay checks that tag against the
// tenant host the handshake resolved to. host is used verbatim, so it carries
// its own port when the community has one ("a.soak.test:4000"); the url's
// port is not added. host "" is exactly Dial: the Host header and relay tag
// come from url. A url that does not parse is an error before any dial.
func DialHost(ctx context.Context, url, host string, sk []byte) (*Conn, error) {
	op, relay := "dial "+url, url
	var opts *websocket.DialOptions
	if host != "" {
		op += " as " + host
		u, err := neturl.Parse(url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		u.Host = host
		relay = u.String()
		opts = &websocket.DialOptions{Host: host}
	}
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	ws.SetReadLimit(MaxFrameBytes)
	c := &Conn{ws: ws, relay: relay, pubkey: event.PubKey(sk), oks: map[string]chan okResult{}, subs: map[string]*sub{},
		wmu: make(chan struct{}, 1), done: make(chan struct{})}
	if err := c.authenticate(ctx, sk); err != nil {
		ws.CloseNow()
		return nil, err
	}
	go c.read()
	return c, nil
}

// authenticate runs NIP-42 before the reader starts, reading frames inline.
func (c *Conn) authenticate(ctx context.Context, sk []byte) error {
	challenge := ""
	for challenge == "" {
		m, err := c.readFrame(ctx)
		if err != nil {
			return fmt.Errorf("wait for auth challenge: %w", err)
		}
		if m.Type == typeAuth {
			challenge = m.Message
		}
	}
	ev := event.Event{
		CreatedAt: time.Now().Unix(),
		Kind:      event.KindAuth,
		Tags:      event.Tags{{"relay", c.relay}, {"challenge", challenge}},
	}
	if err := ev.Sign(sk); err != nil {
		return fmt.Errorf("sign auth: %w", err)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, eventFrame(typeAuth, &ev)); err != nil {
		return fmt.Errorf("send auth: %w", err)
	}
	for {
		m, err := c.readFrame(ctx)
		if err != nil {
			return fmt.Errorf("wait for auth answer: %w", err)
		}
		if m.Type != typeOK || m.EventID != ev.ID {
			continue
		}
		if !m.OK {
			return &RefusedError{Op: "auth", Message: m.Message}
		}
		return nil
	}
}

func (c *Conn) readFrame(ctx context.Context) (relayMessage, error) {
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			return relayMessage{}, err
		}
		if c.countedFrame(b) {
			continue
		}
		m, err := parseRelay(b)
		if err != nil {
			continue // a frame we do not understand is not fatal
		}
		return m, nil
	}
}

// countedFrame reports whether b is an EVENT frame of a QueryCount
// subscription, which it counts without decoding the event.
func (c *Conn) countedFrame(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte(`["EVENT","`))
	if !ok {
		return false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return false
	}
	s := c.sub(string(rest[:end]))
	if s == nil || s.frames == nil {
		return false
	}
	s.frames.Add(1)
	return true
}

// PubKey returns the hex pubkey the connection authenticated as.
func (c *Conn) PubKey() string { return c.pubkey }

// read is the connection's one reader: it routes every frame until the
// socket ends, then fails every waiter.
func (c *Conn) read() {
	var err error
	for {
		var m relayMessage
		m, err = c.readFrame(context.Background())
		if err != nil {
			break
		}
		c.dispatch(m)
	}
	if c.closing.Load() {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.mu.Lock()
	c.err = err
	subs := c.subs
	c.subs = map[string]*sub{}
	c.mu.Unlock()
	for _, s := range subs {
		s.end("")
	}
	close(c.done)
}

func (c *Conn) dispatch(m relayMessage) {
	switch m.Type {
	case typeOK:
		c.mu.Lock()
		ch := c.oks[m.EventID]
		delete(c.oks, m.EventID)
		c.mu.Unlock()
		if ch != nil {
			ch <- okResult{ok: m.OK, msg: m.Message}
		}
	case typeEvent:
		if s := c.sub(m.SubID); s != nil && s.deliver != nil {
			s.deliver(m.Event)
		}
	case typeEOSE:
		if s := c.sub(m.SubID); s != nil {
			s.eoseOne.Do(func() { close(s.eose) })
		}
	case typeCount:
		if s := c.sub(m.SubID); s != nil {
			select {
			case s.result <- m.Count:
			default:
			}
		}
	case typeClosed:
		c.mu.Lock()
		s := c.subs[m.SubID]
		// An empty CLOSED acknowledges a CLOSE we sent for an earlier use of this id.
		if s != nil && m.Message != "" {
			delete(c.subs, m.SubID)
		} else {
			s = nil
		}
		c.mu.Unlock()
		if s != nil {
			s.end(m.Message)
		}
	}
}

func (c *Conn) sub(id string) *sub {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[id]
}

// register adds s under id; id "" picks a fresh one.
func (c *Conn) register(id string, s *sub) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return "", c.err
	default:
	}
	if id == "" {
		id = "q" + strconv.FormatUint(c.nextSub.Add(1), 10)
	}
	if _, dup := c.subs[id]; dup {
		return "", fmt.Errorf("subscription %q already open", id)
	}
	c.subs[id] = s
	return id, nil
}

// closeTimeout bounds the best-effort CLOSE sent when a subscription ends.
const closeTimeout = 5 * time.Second

// unregister removes id and, when it was still open, tells the relay. It
// outlives the caller's ctx (a cancelled query still sends its CLOSE) but
// not closeTimeout.
func (c *Conn) unregister(ctx context.Context, id string, s *sub) {
	c.mu.Lock()
	open := c.subs[id] == s
	if open {
		delete(c.subs, id)
	}
	c.mu.Unlock()
	if open {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = c.write(ctx, closeFrame(id)) // best effort: the relay drops the sub with the socket anyway
	}
}

// writeTimeout bounds writing one frame once it has begun.
const writeTimeout = 10 * time.Second

// write sends one frame. ctx bounds the wait for the connection's turn to
// write; once the frame has begun it is written to the end (within
// writeTimeout) even if ctx ends meanwhile. The websocket library closes the
// whole connection when the context of a write in progress ends, so handing
// it ctx would turn one caller giving up (a cancelled query, a benchmark
// phase that ends) into a lost connection for every other call on the Conn.
// A write that does not finish within writeTimeout still closes the
// connection: the relay has stopped reading.
func (c *Conn) write(ctx context.Context, b []byte) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	case c.wmu <- struct{}{}:
	}
	defer func() { <-c.wmu }()
	select {
	case <-c.done:
		return c.err
	default:
	}
	if err := ctx.Err(); err != nil { // the turn may have been picked over a done ctx
		return err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := c.ws.Write(wctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// Close closes the connection and waits for the reader to stop. Every call
// still waiting fails with ErrClosed. Calling it twice is harmless. A failed
// close handshake is not reported: the socket is gone either way.
func (c *Conn) Close() error {
	if c.closing.CompareAndSwap(false, true) {
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}
	<-c.done
	return nil
}
