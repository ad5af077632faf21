package wsapi

import (
	"strings"
	"testing"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

// TestSendQueueBytes covers BUZZ_SEND_BUFFER_BYTES on the queue: up to the
// byte cap a message is queued, one byte over it is refused like a full
// queue, a message larger than the cap still enters an empty queue, and a
// message handed to the parked writer is not counted.
func TestSendQueueBytes(t *testing.T) {
	t.Parallel()
	newQueue := func() *sendQueue { return &sendQueue{max: 100, maxBytes: 10, writing: true} } // a writer is busy
	push := func(q *sendQueue, m []byte) bool { ok, _ := q.push(m); return ok }
	msg := func(n int) []byte { return []byte(strings.Repeat("x", n)) }

	t.Run("AtCapAndOneOver", func(t *testing.T) {
		t.Parallel()
		q := newQueue()
		require.True(t, push(q, msg(5)))
		require.True(t, push(q, msg(5)), "exactly the cap")
		require.False(t, push(q, msg(1)), "one byte over")
		_, ok := q.pop()
		require.True(t, ok)
		require.True(t, push(q, msg(5)), "a pop gives its bytes back")
		require.False(t, push(q, msg(1)))
	})

	t.Run("LargerThanCapIntoEmptyQueue", func(t *testing.T) {
		t.Parallel()
		q := newQueue()
		require.True(t, push(q, msg(20)))
		require.False(t, push(q, msg(1)))
		_, ok := q.pop()
		require.True(t, ok)
		require.Zero(t, q.bytes)
	})

	t.Run("HandedToNewWriterNotCounted", func(t *testing.T) {
		t.Parallel()
		q := newQueue()
		_, ok := q.pop()
		require.False(t, ok)
		require.True(t, q.park(), "the writer ends")
		require.True(t, push(q, msg(20)))
		require.True(t, push(q, msg(10)), "the handed message does not count")
		require.False(t, push(q, msg(1)))
		for range 2 {
			_, ok := q.pop()
			require.True(t, ok)
		}
		require.Zero(t, q.bytes)
	})

	t.Run("EphemeralOverBytesStrikes", func(t *testing.T) {
		t.Parallel()
		srv := New(Config{Settings: settings(func(s *config.Config) { s.SendBuffer, s.Bytes.SendBufferBytes = 100, 10 })})
		c := &conn{srv: srv, send: sendQueue{max: 100, maxBytes: 10, writing: true}, ctrl: make(chan closeReq, 1), log: srv.log}
		c.mu.Lock()
		defer c.mu.Unlock()
		require.True(t, c.enqueueLocked(msg(10), true))
		require.False(t, c.enqueueLocked(msg(1), true))
		require.False(t, c.closing.Load(), "a dropped ephemeral event is a strike")
		require.False(t, c.enqueueLocked(msg(1), false))
		require.True(t, c.closing.Load(), "a stored event over the bytes closes")
		req := <-c.ctrl
		require.Equal(t, websocket.StatusPolicyViolation, req.code)
		require.Equal(t, "slow client", req.reason)
	})
}
