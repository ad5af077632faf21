package maintenance

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
)

// expiredEvents stores n events that expired a second ago and one that
// expires in an hour, in a new community, and returns the community.
func (b *testBundle) expiredEvents(t *testing.T, n int) string {
	t.Helper()
	cid := fixture.Community(t, b.pool).ID
	k := eventtest.NewKey()
	exp := func(d int64) eventtest.Option {
		return eventtest.Tag("expiration", strconv.FormatInt(time.Now().Unix()+d, 10))
	}
	for i := range n {
		fixture.Event(t, b.pool, cid, k, 1, exp(-1), eventtest.Content("gone "+strconv.Itoa(i)))
	}
	fixture.Event(t, b.pool, cid, k, 1, exp(3600))
	return cid
}

func (b *testBundle) events(t *testing.T, cid string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE community_id = $1`, cid).Scan(&n))
	return n
}

func TestExpiredPurge(t *testing.T) {
	t.Parallel()

	t.Run("DeletesInBoundedBatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.expiredEvents(t, 7)
		r := NewExpiredPurge(ExpiredPurgeConfig{Pool: b.pool, Logger: b.log, Interval: time.Minute, Batch: 2, MaxBatches: 3})
		n, err := r.runOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(6), n, "a pass stops after MaxBatches full batches")
		n, err = r.runOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "a batch that is not full ends the pass")
		n, err = r.runOnce(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, 1, b.events(t, cid), "the event that has not expired stays")
		d := NewExpiredPurge(ExpiredPurgeConfig{Pool: b.pool, Interval: time.Minute})
		require.Equal(t, ExpiredPurgeBatch, d.cfg.Batch)
		require.Equal(t, 500, ExpiredPurgeBatch)
		require.Equal(t, ExpiredPurgeMaxBatches, d.cfg.MaxBatches)
		require.Equal(t, 20, ExpiredPurgeMaxBatches)
	})

	t.Run("PurgesOnATick", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.expiredEvents(t, 2)
		r := NewExpiredPurge(ExpiredPurgeConfig{Pool: b.pool, Logger: b.log, Interval: 10 * time.Millisecond})
		r.TestSignals.Init()
		require.NoError(t, r.Start(context.Background()))
		require.NoError(t, r.Start(context.Background()))
		require.Equal(t, int64(2), r.TestSignals.Purged.WaitOrTimeout(t))
		require.Zero(t, r.TestSignals.Purged.WaitOrTimeout(t))
		r.Stop()
		r.Stop()
		require.Equal(t, 1, b.events(t, cid))
		require.NotContains(t, b.logs.String(), "level=ERROR")
	})

	t.Run("LoopLogsAFailureAndGoesOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cid := b.expiredEvents(t, 1)
		b.exec(t, `ALTER TABLE event_mentions RENAME TO event_mentions_away`)
		r := NewExpiredPurge(ExpiredPurgeConfig{Pool: b.pool, Logger: b.log, Interval: 10 * time.Millisecond})
		r.TestSignals.Init()
		require.NoError(t, r.Start(context.Background()))
		defer r.Stop()
		require.ErrorContains(t, r.TestSignals.Failed.WaitOrTimeout(t), "expired purge: purge expired events: ")
		require.Contains(t, b.logs.String(), `level=ERROR msg="expired event purge failed" err="expired purge: `)
		r.TestSignals.Purged.RequireEmpty(t)
		require.Equal(t, 2, b.events(t, cid), "a failed batch deletes nothing")
		b.exec(t, `ALTER TABLE event_mentions_away RENAME TO event_mentions`)
		require.Equal(t, int64(1), r.TestSignals.Purged.WaitOrTimeout(t))
	})

	t.Run("RefusesAnIntervalThatIsNotPositive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r := NewExpiredPurge(ExpiredPurgeConfig{Pool: b.pool})
		require.ErrorContains(t, r.Start(context.Background()), "expired purge: interval 0s is not positive")
	})
}
