package wsapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNegSessionsEndWithTheSocket: closing the socket frees every NIP-77
// session of the connection (docs/PROTOCOL.md §7.13), their idle timers
// stopped.
func TestNegSessionsEndWithTheSocket(t *testing.T) {
	t.Parallel()
	b := newTestDB(t).setup(t, nil)
	c := b.dial(t)
	c.auth(t)
	filter := map[string]any{"kinds": []int{1}}
	for _, id := range []string{"a", "b"} {
		c.send(t, "NEG-OPEN", id, filter, "6100000200")
		c.expect(t, "NEG-MSG", id)
	}
	var server *conn
	b.srv.mu.Lock()
	for sc := range b.srv.conns {
		server = sc
	}
	b.srv.mu.Unlock()
	require.NotNil(t, server)
	server.mu.Lock()
	sessions := make([]*negSession, 0, len(server.negs))
	for _, s := range server.negs {
		sessions = append(sessions, s)
	}
	server.mu.Unlock()
	require.Len(t, sessions, 2)

	require.NoError(t, c.ws.CloseNow())
	eventually(t, func() bool {
		server.mu.Lock()
		defer server.mu.Unlock()
		return len(server.negs) == 0
	}, "the sessions end with the socket")
	for _, s := range sessions {
		require.False(t, s.timer.Stop(), "the idle timer was stopped")
	}
}
