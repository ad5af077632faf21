package maintenance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pg"
)

// hotPartition fills this month's partition with 2000 rows and waits until
// the statistics collector has published the changes.
func (b *testBundle) hotPartition(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pg.EnsurePartitions(ctx, b.pool, time.Now(), 0))
	var cid string
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO communities (host) VALUES ('analyze.test') RETURNING id::text`).Scan(&cid))
	b.exec(t, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
		SELECT $1, decode(lpad(to_hex(g), 64, '0'), 'hex'), decode(repeat('ab', 32), 'hex'), now(), 1, '[]', 'x', decode(repeat('cd', 64), 'hex')
		FROM generate_series(1, 2000) g`, cid)
	part := pg.PartitionName(time.Now())
	// The statistics collector publishes the counters asynchronously; a
	// stats snapshot is per transaction, so each poll sees fresh counters.
	require.Eventually(t, func() bool {
		var n int64
		_ = b.pool.QueryRow(ctx, `SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = $1`, part).Scan(&n)
		return n >= 2000
	}, 10*time.Second, 20*time.Millisecond)
	return part
}

func (b *testBundle) analyzed(t *testing.T, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&ok))
	return ok
}

func TestAnalyze(t *testing.T) {
	t.Parallel()

	t.Run("AnalyzesAChangedPartition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		part := b.hotPartition(t)
		a := NewAnalyze(AnalyzeConfig{Pool: b.pool, Logger: b.log})
		require.False(t, b.analyzed(t, part))
		names, err := a.runOnce(context.Background())
		require.NoError(t, err)
		require.Contains(t, names, part)
		require.True(t, b.analyzed(t, part))
		names, err = a.runOnce(context.Background())
		require.NoError(t, err)
		require.NotContains(t, names, part, "nothing changed since")
		require.Equal(t, AnalyzeInterval, a.cfg.Interval)
		require.Equal(t, int64(AnalyzeMinRows), a.cfg.MinRows)
	})

	t.Run("LoopAnalyzesAndLogs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		part := b.hotPartition(t)
		a := NewAnalyze(AnalyzeConfig{Pool: b.pool, Logger: b.log, Interval: 10 * time.Millisecond})
		a.TestSignals.Init()
		require.NoError(t, a.Start(context.Background()))
		defer a.Stop()
		for !slices.Contains(a.TestSignals.Analyzed.WaitOrTimeout(t), part) {
		}
		require.True(t, b.analyzed(t, part))
		require.Contains(t, b.logs.String(), `level=DEBUG msg=analyzed tables=[`)
	})

	t.Run("LoopLogsAFailureAndGoesOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		part := b.hotPartition(t)
		// A session of another pool holds a lock ANALYZE waits for, and the
		// service's pool gives up waiting after 50 ms.
		pool, err := pg.Open(context.Background(), b.url+"&lock_timeout=50", pg.PoolConfig{MaxConns: 2})
		require.NoError(t, err)
		defer pool.Close()
		holder, err := b.pool.Begin(context.Background())
		require.NoError(t, err)
		defer func() { _ = holder.Rollback(context.Background()) }()
		_, err = holder.Exec(context.Background(), `LOCK TABLE `+part+` IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)

		a := NewAnalyze(AnalyzeConfig{Pool: pool, Logger: b.log, Interval: 10 * time.Millisecond})
		_, err = a.runOnce(context.Background())
		require.ErrorContains(t, err, "analyze "+part+": ")
		a.TestSignals.Init()
		require.NoError(t, a.Start(context.Background()))
		defer a.Stop()
		require.ErrorContains(t, a.TestSignals.Failed.WaitOrTimeout(t), "analyze "+part+": ")
		require.Contains(t, b.logs.String(), `level=ERROR msg="analyze failed" err="analyze `+part+`: `)
		require.NoError(t, holder.Rollback(context.Background()))
		for !slices.Contains(a.TestSignals.Analyzed.WaitOrTimeout(t), part) {
		}
	})
}
