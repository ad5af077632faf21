package wsapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/wire"
)

func TestFrames(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("TooLargeKeepsConnection", func(t *testing.T) {
		t.Parallel()
		const limit = 4096
		b := db.setup(t, func(c *Config) { c.Settings.MaxFrameBytes = limit })
		c := b.dial(t)
		c.auth(t)
		ev := c.key.Signed(t, 1, eventtest.Content(strings.Repeat("x", limit+1024)))
		frame := []byte(`["EVENT",` + string(ev.AppendJSON(nil)) + `]`)
		c.sendRaw(t, frame)
		msg := wire.FrameTooLarge(len(frame), limit)
		c.expect(t, "NOTICE", msg)
		c.expect(t, "OK", ev.ID, false, msg)
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{1}})
		c.expect(t, "EOSE", "s")
	})

	t.Run("TwiceTheLimitCloses1009", func(t *testing.T) {
		t.Parallel()
		const limit = 4096
		b := db.setup(t, func(c *Config) { c.Settings.MaxFrameBytes = limit })
		c := b.dial(t)
		c.sendRaw(t, []byte(`["REQ","s",{"#t":["`+strings.Repeat("y", 2*limit)+`"]}]`))
		c.expect(t, "NOTICE", wire.FrameTooLarge(2*limit+1, limit))
		err := c.closed(t)
		require.Equal(t, websocket.StatusMessageTooBig, websocket.CloseStatus(err))
	})

	t.Run("ParseErrorsAndBinary", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.sendRaw(t, []byte(`{"not":"an array"}`))
		c.expect(t, "NOTICE", "invalid message: Invalid message format: expected JSON array")
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, c.ws.Write(ctx, websocket.MessageBinary, []byte{0xff, 0xfe}))
		require.NoError(t, c.ws.Write(ctx, websocket.MessageBinary, []byte(`["CLOSE","bin"]`)))
		c.expect(t, "CLOSED", "bin", "") // the invalid UTF-8 frame was ignored
	})
}

func TestSlowClient(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("StoredEventClosesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.SendBuffer = 16 })
		fast := b.dial(t)
		fast.auth(t)
		fast.send(t, "REQ", "f", map[string]any{"kinds": []int{1}})
		fast.expect(t, "EOSE", "f")

		// The slow client reads synchronously up to EOSE, then stops.
		slow := b.dialWith(t, dialOpts{paused: true})
		readOne := func() []json.RawMessage {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_, raw, err := slow.ws.Read(ctx)
			require.NoError(t, err)
			var f []json.RawMessage
			require.NoError(t, json.Unmarshal(raw, &f))
			return f
		}
		slow.challenge = str(t, readOne()[1])
		authEv := slow.authEvent(t, "ws://"+b.hostA)
		slow.send(t, "AUTH", authEv)
		require.Equal(t, "OK", str(t, readOne()[0]))
		slow.send(t, "REQ", "s", map[string]any{"kinds": []int{1}})
		require.Equal(t, "EOSE", str(t, readOne()[0]))

		author := eventtest.NewKey()
		content := strings.Repeat("z", 64<<10)
		ev := author.Signed(t, 1, eventtest.Content(content)) // live delivery does not de-duplicate
		for sent := 0; sent < 5000 && testutil.ToFloat64(b.metrics.WSBackpressureDisconnects) == 0; sent++ {
			b.srv.Broadcast(ingest.Delivery{CommunityID: b.communityA, Event: &ev, JSON: ev.AppendJSON(nil)})
			require.Equal(t, ev.ID, eventID(t, fast.expect(t, "EVENT", "f")), "the fast subscriber gets every event")
		}
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.WSBackpressureDisconnects))
		slow.start()
		err := slow.closed(t)
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
		require.Contains(t, err.Error(), "slow client")
		eventually(t, func() bool { return b.srv.Connections() == 1 }, "slow client torn down")
	})

	t.Run("EphemeralStrikes", func(t *testing.T) {
		t.Parallel()
		srv := New(Config{Settings: settings(func(s *config.Config) { s.SendBuffer = 1 })})
		c := &conn{srv: srv, send: sendQueue{max: 1, writing: true}, ctrl: make(chan closeReq, 1), log: srv.log}
		c.mu.Lock()
		defer c.mu.Unlock()
		require.True(t, c.enqueueLocked([]byte("typing"), true))
		for range config.DefaultSlowClientGraceLimit - 1 {
			require.False(t, c.enqueueLocked([]byte("typing"), true))
			require.False(t, c.closing.Load())
		}
		_, popped := c.send.pop() // the busy writer takes one
		require.True(t, popped)
		require.True(t, c.enqueueLocked([]byte("typing"), true), "a successful enqueue resets the strikes")
		for range config.DefaultSlowClientGraceLimit - 1 {
			require.False(t, c.enqueueLocked([]byte("typing"), true))
		}
		require.False(t, c.closing.Load())
		require.False(t, c.enqueueLocked([]byte("typing"), true))
		require.True(t, c.closing.Load(), "the 15th consecutive drop closes")
		req := <-c.ctrl
		require.Equal(t, websocket.StatusPolicyViolation, req.code)
		require.Equal(t, "slow client", req.reason)
	})

	t.Run("StoredOnFullQueue", func(t *testing.T) {
		t.Parallel()
		srv := New(Config{Settings: settings(func(s *config.Config) { s.SendBuffer = 1 })})
		c := &conn{srv: srv, send: sendQueue{max: 1, writing: true}, ctrl: make(chan closeReq, 1), log: srv.log}
		c.mu.Lock()
		defer c.mu.Unlock()
		require.True(t, c.enqueueLocked([]byte("a"), false))
		require.False(t, c.enqueueLocked([]byte("b"), false))
		require.True(t, c.closing.Load())
	})

	t.Run("TypingOnlySubscriberClosed", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.SendBuffer = 4 })
		slow := b.dialWith(t, dialOpts{paused: true})
		readOne := func() []json.RawMessage {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_, raw, err := slow.ws.Read(ctx)
			require.NoError(t, err)
			var f []json.RawMessage
			require.NoError(t, json.Unmarshal(raw, &f))
			return f
		}
		slow.challenge = str(t, readOne()[1])
		authEv := slow.authEvent(t, "ws://"+b.hostA)
		slow.send(t, "AUTH", authEv)
		require.Equal(t, "OK", str(t, readOne()[0]))
		slow.send(t, "REQ", "s", map[string]any{"kinds": []int{event.KindTyping}})
		require.Equal(t, "EOSE", str(t, readOne()[0]))
		author := eventtest.NewKey()
		content := strings.Repeat("t", 64<<10)
		ev := author.Signed(t, event.KindTyping, eventtest.Content(content))
		for i := 0; i < 5000 && testutil.ToFloat64(b.metrics.WSBackpressureDisconnects) == 0; i++ {
			b.srv.Broadcast(ingest.Delivery{CommunityID: b.communityA, Event: &ev, JSON: ev.AppendJSON(nil)})
		}
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.WSBackpressureDisconnects))
		slow.start()
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(slow.closed(t)))
	})
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	const interval = 30 * time.Millisecond
	b := newTestDB(t).setup(t, func(c *Config) {
		c.Settings.HeartbeatInterval = interval
		c.Settings.AuthTimeout = time.Minute
	})

	start := time.Now()
	deaf := b.dialWith(t, dialOpts{onPing: func(context.Context, []byte) bool { return false }})
	var pings atomic.Int64
	alive := b.dialWith(t, dialOpts{onPing: func(context.Context, []byte) bool { pings.Add(1); return true }})

	err := deaf.closed(t)
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
	require.GreaterOrEqual(t, time.Since(start), 3*interval)

	eventually(t, func() bool { return pings.Load() >= 8 }, "the answering client keeps being pinged")
	alive.send(t, "CLOSE", "still-here")
	alive.expect(t, "CLOSED", "still-here", "")
}

// TestUpgradeHandlerReturns: the upgrade's handler returns once the
// connection runs on a goroutine of its own, so that net/http lets go of
// what it kept for the request (target P6 of docs/PERFORMANCE.md), and the
// connection goes on being served until it closes.
func TestUpgradeHandlerReturns(t *testing.T) {
	t.Parallel()
	b := newTestDB(t).setup(t, nil)
	returned := make(chan struct{}, 1)
	wrapped := *b
	wrapped.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.srv.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	t.Cleanup(wrapped.ts.Close)

	c := wrapped.dial(t)
	c.auth(t) // authenticated, so no deadline closes it
	select {
	case <-returned:
	case <-time.After(waitFor):
		t.Fatal("the upgrade's handler did not return while its connection was open")
	}
	require.Equal(t, 1, b.srv.Connections())
	c.send(t, "CLOSE", "after-return")
	c.expect(t, "CLOSED", "after-return", "")
	require.NoError(t, c.ws.Close(websocket.StatusNormalClosure, ""))
	eventually(t, func() bool { return b.srv.Connections() == 0 }, "the closed connection is untracked")
}

// The send queue keeps order, refuses beyond its bound, and gives its
// memory back once empty (target P6 of docs/PERFORMANCE.md: an idle connection holds no buffer).
func TestSendQueue(t *testing.T) {
	t.Parallel()
	q := sendQueue{max: 3, writing: true} // a writer is busy
	require.Nil(t, q.items, "a new queue holds no buffer")
	for i := range 3 {
		ok, start := q.push([]byte{byte(i)})
		require.True(t, ok)
		require.False(t, start, "a writer runs")
	}
	ok, _ := q.push([]byte{9})
	require.False(t, ok, "full at max")
	for round := range 100 { // a writer that keeps up with one message in hand
		msg, ok := q.pop()
		require.True(t, ok)
		require.Equal(t, []byte{byte(round)}, msg, "first in, first out")
		ok, _ = q.push([]byte{byte(round + 3)})
		require.True(t, ok)
		require.LessOrEqual(t, len(q.items), 6, "the written part is dropped before the queue grows")
	}
	for i := range 3 {
		msg, ok := q.pop()
		require.True(t, ok)
		require.Equal(t, []byte{byte(100 + i)}, msg)
	}
	_, ok = q.pop()
	require.False(t, ok)
	require.Nil(t, q.items, "empty again: the backing array is released")
	require.True(t, q.park(), "the writer ends on an empty queue")

	// No writer runs: as with a channel whose receiver waits, the first
	// message is handed to the writer its push starts, and max more fit
	// behind it.
	for i := range 4 {
		ok, start := q.push([]byte{byte(i)})
		require.True(t, ok, "message %d", i)
		require.Equal(t, i == 0, start, "only the first push starts a writer")
	}
	ok, _ = q.push([]byte{9})
	require.False(t, ok, "full: one in the writer's hands, max queued")
	msg, ok := q.pop()
	require.True(t, ok)
	require.Equal(t, []byte{0}, msg)
	ok, _ = q.push([]byte{9})
	require.False(t, ok, "max queued while the writer writes")
	q.pop()
	ok, _ = q.push([]byte{4})
	require.True(t, ok)
	require.False(t, q.park(), "the writer goes on while the queue holds messages")
}

// TestSendQueueWriter: a close asked for while the writer runs keeps it
// from ending unseen, one asked for with no writer starts one, and once
// the writer has closed the connection nothing starts another.
func TestSendQueueWriter(t *testing.T) {
	t.Parallel()
	var q sendQueue
	ok, start := q.push([]byte("a"))
	require.True(t, ok)
	require.True(t, start)
	require.False(t, q.kick(), "a writer runs: it is told, none is started")
	q.pop()
	require.False(t, q.park(), "the writer looks again before it ends")
	require.True(t, q.park())
	require.True(t, q.kick(), "no writer runs: one is to be started")
	q.end()
	require.False(t, q.kick())
	_, start = q.push([]byte("b"))
	require.False(t, start, "no writer after the connection closed")
	require.False(t, q.park(), "the ended writer stays ended")
}

// TestIdleConnectionHasNoWriter: once an authenticated connection has been
// answered, no writer goroutine waits on it (P6); a live event then starts
// one and arrives, and a close of the idle connection is carried out.
func TestIdleConnectionHasNoWriter(t *testing.T) {
	b := newTestDB(t).setup(t, nil)
	const n = 5
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = b.dial(t)
		clients[i].auth(t)
		clients[i].send(t, "REQ", "live", map[string]any{"kinds": []int{1}, "limit": 0})
		clients[i].expect(t, "EOSE", "live")
	}
	eventually(t, func() bool { return goroutinesIn("wsapi.(*conn).writeLoop") == 0 }, "no writer on idle connections")
	require.GreaterOrEqual(t, goroutinesIn("wsapi.(*conn).readLoop"), n, "each connection still reads")

	ev := eventtest.NewKey().Signed(t, 1)
	b.srv.Broadcast(ingest.Delivery{CommunityID: b.communityA, Event: &ev, JSON: ev.AppendJSON(nil)})
	for _, c := range clients {
		require.Equal(t, ev.ID, eventID(t, c.expect(t, "EVENT", "live")))
	}
	eventually(t, func() bool { return goroutinesIn("wsapi.(*conn).writeLoop") == 0 }, "the writers end once the queues are empty")

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b.srv.Shutdown(ctx)
	for _, c := range clients {
		require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(c.closed(t)), "an idle connection is closed with 1012")
	}
	require.Zero(t, b.srv.Connections())
}

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), fn+"(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
