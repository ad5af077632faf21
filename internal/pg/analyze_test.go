package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

func TestAnalyzeHot(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	require.NoError(t, pg.EnsurePartitions(ctx, pool, time.Now(), 0))
	var cid string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO communities (host) VALUES ('analyze.test') RETURNING id::text`).Scan(&cid))
	_, err := pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
		SELECT $1, decode(lpad(to_hex(g), 64, '0'), 'hex'), decode(repeat('ab', 32), 'hex'), now(), 1, '[]', 'x', decode(repeat('cd', 64), 'hex')
		FROM generate_series(1, 2000) g`, cid)
	require.NoError(t, err)
	part := pg.PartitionName(time.Now())
	// The statistics collector publishes the counters asynchronously.
	require.Eventually(t, func() bool {
		var n int64
		_ = pool.QueryRow(ctx, `SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = $1`, part).Scan(&n)
		return n >= 2000
	}, 10*time.Second, 50*time.Millisecond)
	names, err := pg.AnalyzeHot(ctx, pool, 1000)
	require.NoError(t, err)
	require.Contains(t, names, part)
	var analyzed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = $1`, part).Scan(&analyzed))
	require.True(t, analyzed)
	names, err = pg.AnalyzeHot(ctx, pool, 1000)
	require.NoError(t, err)
	require.NotContains(t, names, part, "nothing changed since")
}
