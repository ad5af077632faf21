package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/store"
)

// replayRows inserts one used NIP-98 id per age and returns the community.
func (b *testBundle) replayRows(t *testing.T, ages ...time.Duration) string {
	t.Helper()
	var cid string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO communities (host) VALUES ('replay.test') RETURNING id::text`).Scan(&cid))
	for i, age := range ages {
		b.exec(t, `INSERT INTO nip98_replay (community_id, event_id, seen_at) VALUES ($1, $2, now() - make_interval(secs => $3))`,
			cid, []byte{byte(i)}, age.Seconds())
	}
	return cid
}

// replayAges returns the ages in whole seconds of the rows left, oldest first.
func (b *testBundle) replayAges(t *testing.T) []int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT round(EXTRACT(EPOCH FROM now() - seen_at))::int FROM nip98_replay ORDER BY seen_at`)
	require.NoError(t, err)
	ages, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return ages
}

func TestReplayPurge(t *testing.T) {
	t.Parallel()

	t.Run("DeletesOnlyRowsOlderThan180s", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.replayRows(t, time.Hour, 190*time.Second, 170*time.Second, 0)
		r := NewReplayPurge(ReplayPurgeConfig{Store: store.New(b.pool), Logger: b.log})
		n, err := r.runOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		require.Equal(t, []int{170, 0}, b.replayAges(t))
		n, err = r.runOnce(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, ReplayMaxAge, r.cfg.MaxAge)
		require.Equal(t, 180*time.Second, ReplayMaxAge)
		require.Equal(t, ReplayPurgeInterval, r.cfg.Interval)
		require.Equal(t, 60*time.Second, ReplayPurgeInterval)
	})

	t.Run("PurgesOnATick", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.replayRows(t, time.Hour, 0)
		r := NewReplayPurge(ReplayPurgeConfig{Store: store.New(b.pool), Logger: b.log, Interval: 10 * time.Millisecond})
		r.TestSignals.Init()
		require.NoError(t, r.Start(context.Background()))
		require.Equal(t, int64(1), r.TestSignals.Purged.WaitOrTimeout(t))
		require.Zero(t, r.TestSignals.Purged.WaitOrTimeout(t))
		r.Stop()
		r.Stop()
		require.Equal(t, []int{0}, b.replayAges(t))
		require.Empty(t, b.logs.String())
	})

	t.Run("LoopLogsAFailureAndGoesOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.replayRows(t, time.Hour)
		b.exec(t, `ALTER TABLE nip98_replay RENAME TO nip98_replay_away`)
		r := NewReplayPurge(ReplayPurgeConfig{Store: store.New(b.pool), Logger: b.log, Interval: 10 * time.Millisecond})
		r.TestSignals.Init()
		require.NoError(t, r.Start(context.Background()))
		defer r.Stop()
		require.ErrorContains(t, r.TestSignals.Failed.WaitOrTimeout(t), "purge nip98 replay: ")
		require.Contains(t, b.logs.String(), `level=ERROR msg="nip98 replay purge failed" err="purge nip98 replay: `)
		r.TestSignals.Purged.RequireEmpty(t)
		b.exec(t, `ALTER TABLE nip98_replay_away RENAME TO nip98_replay`)
		require.Equal(t, int64(1), r.TestSignals.Purged.WaitOrTimeout(t))
	})
}
