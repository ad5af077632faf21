package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// pipeFixture is a community with an open channel on the bundle's pool,
// and events to send through a BatchPipe.
type pipeFixture struct {
	b      *poolBundle
	cid    string
	ch     string
	author eventtest.Key
	n      int
}

func newPipeFixture(t *testing.T, b *poolBundle) *pipeFixture {
	t.Helper()
	f := &pipeFixture{b: b, cid: b.community(t), author: eventtest.NewKey()}
	f.ch = fixture.Channel(t, b.pool, f.cid, f.author)
	return f
}

// params are the insert parameters of n new kind 9 events in the channel,
// each with its audit intent.
func (f *pipeFixture) params(t *testing.T, n int) []store.EventInsertParams {
	t.Helper()
	out := make([]store.EventInsertParams, n)
	for i := range out {
		f.n++
		ev := f.author.Signed(t, 9, eventtest.Channel(f.ch), eventtest.Content("piped "+strconv.Itoa(f.n)))
		out[i] = f.param(t, &ev)
	}
	return out
}

func (f *pipeFixture) param(t *testing.T, ev *event.Event) store.EventInsertParams {
	obj := ev.ID
	return store.EventInsertParams{CommunityID: f.cid, Event: ev, Channel: f.ch,
		Audit: &store.OutboxIntent{DedupeKey: "event_created:" + ev.ID, Action: "event_created",
			Actor: unhex(t, f.author.PubKey), ObjectID: &obj, Detail: []byte(`{"event_kind":9}`)}}
}

// stored counts the rows of ps's events.
func (f *pipeFixture) stored(t *testing.T, ps []store.EventInsertParams) int {
	t.Helper()
	n := 0
	for _, p := range ps {
		n += count(t, f.b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, p.CommunityID, unhex(t, p.Event.ID))
	}
	return n
}

// newPipe is a database of the test's own with a community, and a pipe on
// it whose connection is taken, so that a lock the test then holds is met
// by the pipe's batches, not by its preparing.
func newPipe(t *testing.T, timeout time.Duration) (*pipeFixture, *store.BatchPipe) {
	t.Helper()
	f := newPipeFixture(t, setupPool(t))
	pipe := store.NewBatchPipe(f.b.pool, timeout)
	t.Cleanup(pipe.Close)
	f.warm(t, pipe)
	return f, pipe
}

// warm has the pipe take its connection and prepare its statement, which
// waits for a lock on the tables it writes, by sending one batch.
func (f *pipeFixture) warm(t *testing.T, pipe *store.BatchPipe) {
	t.Helper()
	_, err := pipe.Send(f.params(t, 1)).Result()
	require.NoError(t, err)
}

// holdEvents holds a SHARE lock on events, which every insert waits for,
// until the returned function is called.
func holdEvents(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE events IN SHARE MODE`)
	require.NoError(t, err)
	done := false
	release = func() {
		if !done {
			done = true
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	t.Cleanup(release)
	return release
}

// lockWaiters are the pids of this database's backends waiting for a lock.
func lockWaiters(t *testing.T, pool *pgxpool.Pool) []int32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	return pids
}

// awaitOneWaiter waits until exactly one backend waits for the lock, and
// returns its pid.
func awaitOneWaiter(t *testing.T, pool *pgxpool.Pool) int32 {
	t.Helper()
	var pids []int32
	require.Eventually(t, func() bool { pids = lockWaiters(t, pool); return len(pids) == 1 },
		10*time.Second, 5*time.Millisecond, "one backend waiting for the lock")
	return pids[0]
}

// twoOnTheirWay holds a lock on events, sends first through pipe, waits
// for its backend to wait for the lock, then sends second behind it. It
// returns both pending batches, the backend's pid and the lock's release.
func twoOnTheirWay(t *testing.T, f *pipeFixture, pipe *store.BatchPipe, first, second []store.EventInsertParams) (p1, p2 *store.PendingBatch, pid int32, release func()) {
	t.Helper()
	release = holdEvents(t, f.b.pool)
	p1 = pipe.Send(first)
	pid = awaitOneWaiter(t, f.b.pool)
	p2 = pipe.Send(second)
	return p1, p2, pid, release
}

func pending(pb *store.PendingBatch) bool {
	select {
	case <-pb.Done():
		return false
	default:
		return true
	}
}

func TestBatchPipe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SameAnswersAsEventInsertBatch", func(t *testing.T) {
		t.Parallel()
		// The same elements through the pooled statement and through the
		// pipe, in two communities: an event stored before, a copy in the
		// batch, a poster check that refuses, and its copy.
		b := setupPool(t)
		pipe := store.NewBatchPipe(b.pool, 10*time.Second)
		t.Cleanup(pipe.Close)
		elements := func(f *pipeFixture) []store.EventInsertParams {
			ps := f.params(t, 3)
			_, err := store.New(f.b.pool).EventInsert(ctx, ps[1])
			require.NoError(t, err)
			stranger := eventtest.NewKey()
			private := fixture.Channel(t, f.b.pool, f.cid, f.author, fixture.Private())
			ev := stranger.Signed(t, 9, eventtest.Channel(private), eventtest.Content("not a member"))
			refused := store.EventInsertParams{CommunityID: f.cid, Event: &ev, Channel: private, PosterCheck: true}
			return append(ps, ps[0], refused, refused)
		}
		viaPool, err := store.New(b.pool).EventInsertBatch(ctx, elements(newPipeFixture(t, b)))
		require.NoError(t, err)
		f := newPipeFixture(t, b)
		ps := elements(f)
		viaPipe, err := pipe.Send(ps).Result()
		require.NoError(t, err)
		require.Equal(t, viaPool, viaPipe)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {}, {Inserted: true}, {}, {Refused: true}, {Refused: true}}, viaPipe)
		require.Equal(t, 3, f.stored(t, ps[:3]))
		require.Zero(t, f.stored(t, ps[4:5]), "the refused event is not stored")
	})

	t.Run("TwoOnTheirWayOnOneConnection", func(t *testing.T) {
		t.Parallel()
		f, pipe := newPipe(t, 10*time.Second)
		b := f.b
		first, second := f.params(t, 2), f.params(t, 3)
		p1, p2, _, release := twoOnTheirWay(t, f, pipe, first, second)
		time.Sleep(100 * time.Millisecond)
		require.True(t, pending(p1) && pending(p2), "both wait for the lock")
		require.Len(t, lockWaiters(t, b.pool), 1, "the second batch waits behind the first, on its connection")
		release()
		res, err := p2.Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {Inserted: true}, {Inserted: true}}, res)
		require.False(t, pending(p1), "batches answer in order")
		res, err = p1.Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {Inserted: true}}, res)
		require.Equal(t, 5, f.stored(t, append(first, second...)))
	})

	t.Run("OneFailsTheNextCommits", func(t *testing.T) {
		t.Parallel()
		// Each batch is its own transaction: the first, refused by a
		// constraint, stores nothing; the second, already on its way
		// behind it, commits.
		f, pipe := newPipe(t, 10*time.Second)
		bad := f.author.Signed(t, 22242, eventtest.Content("refused kind")) // events_kind_check
		first := append(f.params(t, 1), store.EventInsertParams{CommunityID: f.cid, Event: &bad})
		second := f.params(t, 2)
		p1, p2, _, release := twoOnTheirWay(t, f, pipe, first, second)
		release()
		_, err := p1.Result()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "23514", pgErr.Code)
		require.False(t, pg.MayHaveCommitted(err), "a refusal rolled the batch back")
		res, err := p2.Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {Inserted: true}}, res)
		require.Zero(t, f.stored(t, first))
		require.Equal(t, 2, f.stored(t, second))
		// The connection goes on.
		res, err = pipe.Send(f.params(t, 2)).Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {Inserted: true}}, res)
	})

	t.Run("ConnectionLost", func(t *testing.T) {
		t.Parallel()
		// The server ends the pipe's session with two batches on their
		// way: both fail as possibly committed, and the next batch takes a
		// new connection.
		f, pipe := newPipe(t, 10*time.Second)
		b := f.b
		first, second := f.params(t, 2), f.params(t, 2)
		p1, p2, pid, release := twoOnTheirWay(t, f, pipe, first, second)
		var ok bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
		require.True(t, ok)
		for _, p := range []*store.PendingBatch{p1, p2} {
			_, err := p.Result()
			require.Error(t, err)
			require.True(t, pg.MayHaveCommitted(err), "the answer was lost: %v", err)
		}
		release()
		third := f.params(t, 2)
		res, err := pipe.Send(third).Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {Inserted: true}}, res)
		require.Zero(t, f.stored(t, append(first, second...)), "ended before its commit")
		require.Equal(t, 2, f.stored(t, third))
	})

	t.Run("NoAnswerInTime", func(t *testing.T) {
		t.Parallel()
		// A batch that does not answer within the timeout fails as
		// possibly committed: the server may still commit it (it does here,
		// once the lock is released), and the pipe takes a new connection.
		f, pipe := newPipe(t, time.Second)
		b := f.b
		release := holdEvents(t, b.pool)
		late := f.params(t, 2)
		start := time.Now()
		_, err := pipe.Send(late).Result()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.True(t, pg.MayHaveCommitted(err))
		require.GreaterOrEqual(t, time.Since(start), time.Second)
		release()
		res, err := pipe.Send(f.params(t, 1)).Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}}, res)
	})

	t.Run("CloseAnswersWhatIsOnItsWay", func(t *testing.T) {
		t.Parallel()
		f, pipe := newPipe(t, 10*time.Second)
		b := f.b
		release := holdEvents(t, b.pool)
		ps := f.params(t, 2)
		p := pipe.Send(ps)
		pid := awaitOneWaiter(t, b.pool)
		pipe.Close()
		release()
		res, err := p.Result()
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true}, {Inserted: true}}, res)
		require.Equal(t, 2, f.stored(t, ps))
		require.Eventually(t, func() bool {
			return count(t, b.pool, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) == 0
		}, 10*time.Second, 10*time.Millisecond, "the session ends after its batch")
		_, err = pipe.Send(f.params(t, 1)).Result()
		require.ErrorIs(t, err, store.ErrPipeClosed)
		require.False(t, pg.MayHaveCommitted(err), "nothing was sent")
	})

	t.Run("NoConnection", func(t *testing.T) {
		t.Parallel()
		// A pool that cannot give a connection: the batch fails as not
		// sent, so a caller retrying its events needs no care for a commit.
		pool, _ := dbtest.NewDB(t)
		b := &poolBundle{pool: pool, s: store.New(pool)}
		f := newPipeFixture(t, b)
		ps := f.params(t, 2)
		pool.Close()
		pipe := store.NewBatchPipe(pool, time.Second)
		t.Cleanup(pipe.Close)
		_, err := pipe.Send(ps).Result()
		require.Error(t, err)
		require.False(t, pg.MayHaveCommitted(err), "%v", err)
		require.False(t, errors.Is(err, context.DeadlineExceeded))
	})
}
