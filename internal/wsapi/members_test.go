package wsapi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/logtest"
)

// requireMembership turns on the relay-membership gate with a fast recheck.
func requireMembership(c *Config) {
	c.Settings.RequireRelayMembership = true
	c.Settings.MembershipRecheck = 10 * time.Millisecond
}

// requireOpen checks that c's connection still answers.
func requireOpen(t *testing.T, c *client) {
	t.Helper()
	c.send(t, "CLOSE", "open?")
	c.expect(t, "CLOSED", "open?", "")
}

func requireRevoked(t *testing.T, c *client) {
	t.Helper()
	c.expect(t, "NOTICE", "restricted: not a relay member")
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(c.closed(t)))
}

func TestMembershipService(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("RunOnceClosesOnlyFormerMembers", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, requireMembership)
		gone, twin, stays := b.dial(t), b.dial(t), b.dial(t)
		twin.key = gone.key // two connections of one pubkey
		b.setRelayMember(t, gone.key.PubKey, true)
		b.setRelayMember(t, stays.key.PubKey, true)
		for _, c := range []*client{gone, twin, stays} {
			c.auth(t)
		}
		unauthenticated := b.dial(t)

		m := NewMembershipService(b.srv)
		n, err := m.runOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 2, n, "one lookup per (community, pubkey); unauthenticated connections are not looked up")
		requireOpen(t, gone)

		b.setRelayMember(t, gone.key.PubKey, false)
		n, err = m.runOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 2, n)
		requireRevoked(t, gone)
		requireRevoked(t, twin)
		requireOpen(t, stays)
		requireOpen(t, unauthenticated)
		n, err = m.runOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n, "the closed connections are gone")
	})

	t.Run("LookupFailureKeepsTheConnectionAndIsLogged", func(t *testing.T) {
		t.Parallel()
		// A database of its own: the test locks relay_members whole, and the
		// relay's membership lookups give up on a lock after 200 ms.
		own := newTestDB(t)
		logs := &logtest.Buffer{}
		b := own.setupWith(t, options{members: openStore(t, own.url, "lock_timeout=200ms"), config: func(c *Config) {
			requireMembership(c)
			c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}})
		c := b.dial(t)
		b.setRelayMember(t, c.key.PubKey, true)
		c.auth(t)
		l := lock(t, own.pool, `LOCK TABLE relay_members IN ACCESS EXCLUSIVE MODE`)

		m := NewMembershipService(b.srv)
		n, err := m.runOnce(context.Background())
		require.Equal(t, 1, n)
		failures := memberFailures(err)
		require.Len(t, failures, 1)
		require.Equal(t, c.key.PubKey, failures[0].pubkey)
		require.ErrorContains(t, err, "relay membership of "+c.key.PubKey+": ")
		requireOpen(t, c)

		m.TestSignals.Init()
		require.NoError(t, m.Start(context.Background()))
		defer m.Stop()
		require.Equal(t, 1, m.TestSignals.Rechecked.WaitOrTimeout(t))
		require.Contains(t, logs.String(), `level=ERROR msg="relay membership recheck failed" component=relay pubkey=`+c.key.PubKey+" err=")
		l.release(t)
		b.setRelayMember(t, c.key.PubKey, false)
		requireRevoked(t, c) // the next ticks see the removal
	})

	t.Run("StartAndStopTwice", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, requireMembership)
		m := NewMembershipService(b.srv)
		m.TestSignals.Init()
		require.NoError(t, m.Start(context.Background()))
		require.NoError(t, m.Start(context.Background()))
		require.True(t, m.Running())
		require.Zero(t, m.TestSignals.Rechecked.WaitOrTimeout(t))
		m.Stop()
		m.Stop()
		require.False(t, m.Running())
	})

	t.Run("OffWithoutTheGate", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.MembershipRecheck = 10 * time.Millisecond })
		m := NewMembershipService(b.srv)
		require.NoError(t, m.Start(context.Background()))
		require.False(t, m.Running(), "nothing runs without RequireRelayMembership")
		m.Stop()
	})
}
