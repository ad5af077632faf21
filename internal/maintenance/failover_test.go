package maintenance

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/standbytest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// waitSignal reads s until ok holds for a value, failing after d.
func waitSignal[T any](t *testing.T, s *testsignal.Signal[T], d time.Duration, what string, ok func(T) bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case v := <-s.WaitC():
			if ok(v) {
				return
			}
		case <-deadline.C:
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// Every periodic job keeps running across a writer failover
// (docs/OPERATIONS.md "High availability"): on a pool of the multi-host URL
// of a primary and its synchronous standby, each job fails while no writer
// answers (the primary killed) and succeeds again on the promoted standby
// with nothing restarted; partition maintenance then makes a missing
// partition there.
func TestJobsSurviveFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := standbytest.StartWith(t, standbytest.Options{Synchronous: true})
	pool, err := pg.Open(ctx, pair.FailoverURL, pg.PoolConfig{MaxConns: 4, AcquireTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	logs := &logBuffer{}
	b := &testBundle{pool: pool, url: pair.FailoverURL, logs: logs,
		log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}

	const every = 100 * time.Millisecond
	parts := NewPartitions(PartitionsConfig{Pool: pool, Logger: b.log, Errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "e"}),
		Interval: every, NowFunc: november2030})
	analyze := NewAnalyze(AnalyzeConfig{Pool: pool, Logger: b.log, Interval: every})
	replay := NewReplayPurge(ReplayPurgeConfig{Store: store.New(pool), Logger: b.log, Interval: every})
	expired := NewExpiredPurge(ExpiredPurgeConfig{Pool: pool, Logger: b.log, Interval: every})
	parts.TestSignals.Init()
	analyze.TestSignals.Init()
	replay.TestSignals.Init()
	expired.TestSignals.Init()
	for _, s := range []interface {
		Start(context.Context) error
		Stop()
	}{parts, analyze, replay, expired} {
		require.NoError(t, s.Start(ctx))
		t.Cleanup(s.Stop)
	}
	const d = 30 * time.Second
	succeeded := func(what string) {
		t.Helper()
		waitSignal(t, &parts.TestSignals.Ran, d, what+": partitions", func(err error) bool { return err == nil })
		waitSignal(t, &analyze.TestSignals.Analyzed, d, what+": analyze", func([]string) bool { return true })
		waitSignal(t, &replay.TestSignals.Purged, d, what+": replay purge", func(int64) bool { return true })
		waitSignal(t, &expired.TestSignals.Purged, d, what+": expired purge", func(int64) bool { return true })
	}
	succeeded("before the kill")

	pair.KillPrimary(t)
	waitSignal(t, &parts.TestSignals.Ran, d, "partitions fail without a writer", func(err error) bool { return err != nil })
	waitSignal(t, &analyze.TestSignals.Failed, d, "analyze fails without a writer", func(error) bool { return true })
	waitSignal(t, &replay.TestSignals.Failed, d, "replay purge fails without a writer", func(error) bool { return true })
	waitSignal(t, &expired.TestSignals.Failed, d, "expired purge fails without a writer", func(error) bool { return true })

	pair.Promote(t)
	// A partition dropped on the new primary is made again there. Values
	// emitted before the drop may still be queued: forget them.
	primary, err := pgx.Connect(ctx, pair.ReplicaURL)
	require.NoError(t, err)
	_, err = primary.Exec(ctx, "DROP TABLE events_p2031_02")
	require.NoError(t, err)
	require.NoError(t, primary.Close(ctx))
	parts.TestSignals.Init()
	analyze.TestSignals.Init()
	replay.TestSignals.Init()
	expired.TestSignals.Init()
	succeeded("after the promotion")
	require.Equal(t, []string{"events_p2030_11", "events_p2030_12", "events_p2031_01", "events_p2031_02"}, b.monthly(t),
		"the dropped partition is made again on the new primary")
}
