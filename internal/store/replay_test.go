package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestNIP98Replay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	cid, other := b.community(t), b.community(t)
	id := eventtest.NewKey().Signed(t, 27235).ID

	fresh, err := b.s.NIP98Use(ctx, cid, id)
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = b.s.NIP98Use(ctx, cid, id)
	require.NoError(t, err)
	require.False(t, fresh, "a replay")
	fresh, err = b.s.NIP98Use(ctx, other, id)
	require.NoError(t, err)
	require.True(t, fresh, "ids are single-use per community")
	_, err = b.s.NIP98Use(ctx, cid, "not hex")
	require.Error(t, err)

	old := eventtest.NewKey().Signed(t, 27235).ID
	_, err = b.s.NIP98Use(ctx, cid, old)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE nip98_replay SET seen_at = now() - interval '181 seconds' WHERE event_id = $1`, unhex(t, old))
	require.NoError(t, err)

	n, err := b.s.NIP98Purge(ctx, 180*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the row older than maxAge")
	fresh, err = b.s.NIP98Use(ctx, cid, old)
	require.NoError(t, err)
	require.True(t, fresh, "a purged id is accepted again")
	fresh, err = b.s.NIP98Use(ctx, cid, id)
	require.NoError(t, err)
	require.False(t, fresh, "a recent id survives the purge")
}

// TestNIP98UseAll: one statement for many marks. A mark used before, in
// this call or an earlier one, is not fresh; the same id in another
// community is; a bad id fails the call and records nothing.
func TestNIP98UseAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	cid, other := b.community(t), b.community(t)
	used := eventtest.NewKey().Signed(t, 27235).ID
	_, err := b.s.NIP98Use(ctx, cid, used)
	require.NoError(t, err)
	a, c := eventtest.NewKey().Signed(t, 27235).ID, eventtest.NewKey().Signed(t, 27235).ID

	fresh, err := b.s.NIP98UseAll(ctx, []store.NIP98Mark{
		{CommunityID: cid, EventID: a},
		{CommunityID: cid, EventID: used},
		{CommunityID: cid, EventID: a},
		{CommunityID: other, EventID: a},
		{CommunityID: strings.ToUpper(cid), EventID: strings.ToUpper(c)},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false, true, true}, fresh)
	fresh, err = b.s.NIP98UseAll(ctx, []store.NIP98Mark{{CommunityID: cid, EventID: c}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, fresh, "recorded by the batch before")

	before := count(t, b.pool, `SELECT count(*) FROM nip98_replay`)
	_, err = b.s.NIP98UseAll(ctx, []store.NIP98Mark{
		{CommunityID: cid, EventID: eventtest.NewKey().Signed(t, 27235).ID},
		{CommunityID: cid, EventID: "not hex"},
	})
	require.Error(t, err)
	require.Equal(t, before, count(t, b.pool, `SELECT count(*) FROM nip98_replay`))
}

// TestReplayBatcher: concurrent calls share statements. While the table is
// locked, the first batch waits and every call made meanwhile joins the
// next one, so a hundred calls take a handful of pooled connections
// (one each before), and every call still gets its own answer.
func TestReplayBatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, url := dbtest.NewDB(t)
	cid := fixture.Community(t, pool).ID
	used := eventtest.NewKey().Signed(t, 27235).ID
	_, err := store.New(pool).NIP98Use(ctx, cid, used)
	require.NoError(t, err)
	// The batcher's own pool, so that its acquisitions are its statements.
	bp, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 10})
	require.NoError(t, err)
	t.Cleanup(bp.Close)
	rb := store.NewReplayBatcher(store.New(bp), 10*time.Second)

	lock, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = lock.Exec(ctx, `LOCK TABLE nip98_replay IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	acquired := bp.Stat().AcquireCount()

	const calls = 100
	ids := make([]string, calls)
	for i := range ids {
		ids[i] = eventtest.NewKey().Signed(t, 27235).ID
	}
	ids[calls-1] = ids[0] // the same token twice: one of them is a replay
	ids[calls-2] = used
	type answer struct {
		fresh bool
		err   error
	}
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			fresh, err := rb.NIP98Use(ctx, cid, ids[i])
			answers[i] = answer{fresh, err}
		})
	}
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_locks WHERE relation = 'nip98_replay'::regclass AND NOT granted`) > 0
	}, 10*time.Second, 5*time.Millisecond, "the first batch waits for the lock")
	time.Sleep(200 * time.Millisecond) // the other calls join the next batch meanwhile
	require.NoError(t, lock.Rollback(ctx))
	wg.Wait()

	fresh := 0
	for i, a := range answers {
		require.NoError(t, a.err, i)
		if a.fresh {
			fresh++
		}
	}
	require.False(t, answers[calls-2].fresh, "an id used before")
	require.NotEqual(t, answers[0].fresh, answers[calls-1].fresh, "one of the two copies is fresh")
	require.Equal(t, calls-2, fresh)
	require.Equal(t, calls-1, count(t, pool, `SELECT count(*) FROM nip98_replay`))
	// The first batch, the one the others joined, and any straggler.
	require.LessOrEqual(t, bp.Stat().AcquireCount()-acquired, int64(5))

	_, err = rb.NIP98Use(ctx, cid, "not hex")
	require.Error(t, err)
}
