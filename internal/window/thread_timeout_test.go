package window_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/window"
)

// hold opens a transaction on its own connection to the relay's database
// that runs stmt and keeps its locks until release is called (or the test
// ends).
func (w *world) hold(t *testing.T, stmt string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgxpool.New(ctx, w.r.DBURL)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, stmt, args...)
	require.NoError(t, err)
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx)
			conn.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// Selection waits at most lock_timeout (1 s) for a lock and the
// batch fails with 503, never [] or empty bounds. A row lock alone does
// not block a read: the page is served whole.
func TestLockTimeout(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	reply := w.reply(t, ch, root, root, base+1, "reply")
	r := req(ch, root)

	release := w.hold(t, `SELECT 1 FROM thread_metadata WHERE community_id = $1 AND event_id = $2 FOR UPDATE`, w.cid, hexBytes(reply.ID))
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, []string{reply.ID}, ids(pages[0].rows))
	release()

	w.hold(t, `LOCK TABLE thread_metadata IN ACCESS EXCLUSIVE MODE`)
	start := time.Now()
	a := w.query(t, reader, filter(r))
	took := time.Since(start)
	a.requireError(t, http.StatusServiceUnavailable, "thread database timeout; retry window")
	require.GreaterOrEqual(t, took, time.Second)
	require.Less(t, took, 4*time.Second, "lock_timeout is 1 s")
	require.Equal(t, 1.0, w.r.Metric(t, `buzz_thread_window_budget_exhausted_total{budget="db_timeout"}`))
}

// With every connection of the writer pool held, the batch
// fails after the pool's acquire timeout with 503; with its authorization
// read blocked beyond the 8 s deadline (12 s, so a loaded machine's slower
// start cannot let the lock go before the deadline) it fails at 8 s, and
// an engine given a 2 s Config.Deadline at 2 s.
func TestPoolAndDeadline(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	w.reply(t, ch, root, root, base+1, "reply")
	r := req(ch, root)

	t.Run("PoolExhausted", func(t *testing.T) {
		t.Parallel()
		ew := w.newEngine(t, 2, nil)
		for range 2 {
			c, err := ew.pool.Acquire(context.Background())
			require.NoError(t, err)
			t.Cleanup(c.Release)
		}
		start := time.Now()
		_, err := ew.run(reader, r)
		requireFails(t, err, http.StatusServiceUnavailable, "thread database timeout; retry window")
		require.GreaterOrEqual(t, time.Since(start), pg.DefaultAcquireTimeout)
		require.Equal(t, 1.0, testutil.ToFloat64(ew.m.Window.BudgetExhausted.WithLabelValues("db_timeout")))
	})

	t.Run("AuthorizationBlocked", func(t *testing.T) {
		t.Parallel()
		release := w.hold(t, `LOCK TABLE channel_members IN ACCESS EXCLUSIVE MODE`)
		timer := time.AfterFunc(12*time.Second, release)
		t.Cleanup(func() { timer.Stop() })
		// Meanwhile an engine given 2 s (Config.Deadline) ends at 2 s.
		short := window.New(window.Config{Pool: w.pool, Key: event.GenerateKey(), Deadline: 2 * time.Second})
		shortDone := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			_, err := short.Threads(context.Background(), window.Batch{CommunityID: w.cid, Host: w.r.Host, Reader: reader.PubKey,
				Windows: []window.ThreadRequest{r}})
			var e *window.Error
			if !errors.As(err, &e) || e.Text != "thread window deadline exceeded" {
				t.Errorf("the 2 s engine: %v", err)
			}
			shortDone <- time.Since(start)
		}()
		start := time.Now()
		a := w.query(t, reader, filter(r))
		took := time.Since(start)
		a.requireError(t, http.StatusServiceUnavailable, "thread window deadline exceeded")
		require.GreaterOrEqual(t, took, 8*time.Second)
		require.Less(t, took, 11*time.Second, "the batch ends at its deadline, not when the lock goes")
		require.Equal(t, 1.0, w.r.Metric(t, `buzz_thread_window_budget_exhausted_total{budget="deadline"}`))
		shortTook := <-shortDone
		require.GreaterOrEqual(t, shortTook, 2*time.Second)
		require.Less(t, shortTook, 5*time.Second, "Config.Deadline bounds the batch")
	})
}
