package listener_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/listener"
)

// register writes a registration created age ago.
func (b *testBundle) register(t *testing.T, l, target string, age time.Duration) {
	t.Helper()
	b.exec(t, `INSERT INTO operator_listener_pubkeys (listener_pubkey, target_pubkey, created_at)
		VALUES (decode($1, 'hex'), decode($2, 'hex'), now() - make_interval(secs => $3))`, l, target, age.Seconds())
}

func (b *testBundle) reaper(t *testing.T, cfg listener.ReaperConfig) *listener.Reaper {
	t.Helper()
	cfg.Pool, cfg.Logger, cfg.Metrics = b.pool, b.log, b.m
	r := listener.NewReaper(cfg)
	r.TestSignals.Init()
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(r.Stop)
	return r
}

func TestReaper(t *testing.T) {
	t.Parallel()

	t.Run("AtStartDeletesOnlyWhatExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l, keep := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
		community := b.community(t, fixture.Host())
		old := []string{
			b.enqueue(t, row{listener: l, community: community, age: 16 * time.Minute}),
			b.enqueue(t, row{listener: keep, community: community, age: time.Hour}),
		}
		fresh := []string{
			b.enqueue(t, row{listener: l, community: community, age: 14 * time.Minute}),
			b.enqueue(t, row{listener: keep, community: community}),
		}
		b.exec(t, `UPDATE operator_listener_outbox SET state = 'sending', lease_until = now() + interval '30 seconds',
			claim_id = gen_random_uuid(), attempts = 1 WHERE id = $1`, fresh[1])
		oldTarget, freshTarget := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
		b.register(t, l, oldTarget, 31*24*time.Hour)
		b.register(t, l, freshTarget, 29*24*time.Hour)
		b.register(t, keep, oldTarget, time.Minute)

		// No listener is configured anywhere: the reaper runs anyway.
		r := b.reaper(t, listener.ReaperConfig{})
		require.EqualValues(t, 2, r.TestSignals.OutboxReaped.WaitOrTimeout(t))
		require.EqualValues(t, 1, r.TestSignals.RegistrationsReaped.WaitOrTimeout(t))
		for _, id := range old {
			require.False(t, b.row(t, id).exists)
		}
		for _, id := range fresh {
			require.True(t, b.row(t, id).exists)
		}
		require.Zero(t, b.count(t, `SELECT count(*) FROM operator_listener_pubkeys WHERE listener_pubkey = decode($1, 'hex')
			AND target_pubkey = decode($2, 'hex')`, l, oldTarget))
		require.Equal(t, 2, b.count(t, `SELECT count(*) FROM operator_listener_pubkeys`))
		require.Equal(t, 2.0, testutil.ToFloat64(b.m.Listener.Reaped.WithLabelValues("outbox")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.m.Listener.Reaped.WithLabelValues("pubkeys")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.m.Listener.OutboxRows.WithLabelValues("pending")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.m.Listener.OutboxRows.WithLabelValues("sending")))
		require.Len(t, b.logLines(t, "operator-listener registration cleanup started"), 1)
	})

	t.Run("Periodic", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		community := b.community(t, fixture.Host())
		r := b.reaper(t, listener.ReaperConfig{OutboxInterval: 50 * time.Millisecond, RegistrationInterval: 50 * time.Millisecond})
		require.Zero(t, r.TestSignals.OutboxReaped.WaitOrTimeout(t))
		require.Zero(t, r.TestSignals.RegistrationsReaped.WaitOrTimeout(t))

		id := b.enqueue(t, row{listener: l, community: community, age: 20 * time.Minute})
		b.register(t, l, eventtest.NewKey().PubKey, 40*24*time.Hour)
		var outbox, registrations int64
		for outbox == 0 {
			outbox = r.TestSignals.OutboxReaped.WaitOrTimeout(t)
		}
		for registrations == 0 {
			registrations = r.TestSignals.RegistrationsReaped.WaitOrTimeout(t)
		}
		require.EqualValues(t, 1, outbox)
		require.EqualValues(t, 1, registrations)
		require.False(t, b.row(t, id).exists)
		require.Zero(t, b.count(t, `SELECT count(*) FROM operator_listener_pubkeys`))
	})

	t.Run("FailuresAreLogged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(t, `ALTER TABLE operator_listener_outbox RENAME TO operator_listener_outbox_moved`)
		b.exec(t, `ALTER TABLE operator_listener_pubkeys RENAME TO operator_listener_pubkeys_moved`)
		r := b.reaper(t, listener.ReaperConfig{})
		require.ErrorContains(t, r.TestSignals.OutboxFailed.WaitOrTimeout(t), "reap listener outbox")
		require.ErrorContains(t, r.TestSignals.RegistrationsFailed.WaitOrTimeout(t), "reap listener registrations")
		require.Len(t, b.logLines(t, "operator-listener outbox reap failed"), 1)
		require.Len(t, b.logLines(t, "operator-listener registration cleanup failed"), 1)
	})
}
