package read_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// shareBundle is a world whose engine has read shares and a deadline.
type shareBundle struct {
	*world
	m    *metrics.Metrics
	pool *pgxpool.Pool
}

// setupShares builds the bundle on a pool opened as the relay's writer
// pool is (pg.Open); slow, when set, makes every history query and
// count statement first sleep 30 s on the server.
func setupShares(t *testing.T, sc read.ShareConfig, slow bool) *shareBundle {
	t.Helper()
	_, url := dbtest.NewDB(t)
	pool, err := pg.Open(context.Background(), url, pg.PoolConfig{MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	w := newWorld(t, pool)
	m := metrics.Disabled()
	var hook func(ctx context.Context, f *event.Filter) error
	if slow {
		hook = func(ctx context.Context, _ *event.Filter) error {
			_, err := pool.Exec(ctx, "SELECT pg_sleep(30)")
			return err
		}
	}
	w.engine = read.New(read.Config{Pool: pool, Metrics: m, Shares: sc, QueryHookFunc: hook})
	return &shareBundle{world: w, m: m, pool: pool}
}

// open opens a COUNT of kind 1 for reader on conn.
func (b *shareBundle) open(conn, reader string) (*read.Read, error) {
	f, _ := event.ParseFilter([]byte(`{"kinds":[1]}`))
	return b.engine.Open(context.Background(), read.Request{
		Scope:   read.Scope{CommunityID: b.cid, Reader: reader},
		Surface: read.SurfaceCOUNT, Filters: []event.Filter{f}, Conn: conn,
	})
}

func requireRefused(t *testing.T, err error, code read.Code, reason string) {
	t.Helper()
	var ref *read.Refusal
	require.ErrorAs(t, err, &ref)
	require.Equal(t, code, ref.Code)
	require.Equal(t, reason, ref.Reason)
}

func TestReadShares(t *testing.T) {
	t.Parallel()
	const wait = 50 * time.Millisecond

	for _, tc := range []struct {
		name  string
		sc    read.ShareConfig
		conns []string // the connection of each read, the last one over the cap
		keys  []int    // the reader of each read (index into two keys)
	}{
		{"Process", read.ShareConfig{Max: 3}, []string{"a", "b", "c", "d"}, []int{0, 1, 0, 1}},
		{"Connection", read.ShareConfig{Max: 10, PerConnection: 2}, []string{"a", "a", "b", "a"}, []int{0, 1, 1, 1}},
		{"Pubkey", read.ShareConfig{Max: 10, PerPubkey: 2}, []string{"a", "b", "c", "d"}, []int{0, 0, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.sc.AcquireTimeout = wait
			b := setupShares(t, tc.sc, false)
			keys := []string{b.reader.PubKey, eventtest.NewKey().PubKey}
			var held []*read.Read
			last := len(tc.conns) - 1
			for i := range last { // at the cap
				rd, err := b.open(tc.conns[i], keys[tc.keys[i]])
				require.NoError(t, err, "read %d", i)
				held = append(held, rd)
			}
			require.InDelta(t, float64(last), testutil.ToFloat64(b.m.Reads.InFlight), 0)
			start := time.Now()
			_, err := b.open(tc.conns[last], keys[tc.keys[last]]) // one over
			requireRefused(t, err, read.CodeTooManyReads, wire.MsgTooManyReads)
			require.GreaterOrEqual(t, time.Since(start), wait, "waited the acquire timeout first")
			scope := map[string]string{"Process": "process", "Connection": "connection", "Pubkey": "pubkey"}[tc.name]
			require.InDelta(t, 1, testutil.ToFloat64(b.m.Reads.ShareRejections.WithLabelValues(scope)), 0)

			// A share given back lets a waiting read in.
			done := make(chan error, 1)
			go func() {
				rd, err := b.open(tc.conns[last], keys[tc.keys[last]])
				if err == nil {
					rd.Close()
				}
				done <- err
			}()
			held[0].Close()
			held[0].Close() // twice is harmless
			require.NoError(t, <-done)
			for _, rd := range held[1:] {
				rd.Close()
			}
			require.InDelta(t, 0, testutil.ToFloat64(b.m.Reads.InFlight), 0)
		})
	}

	t.Run("RefusalBeforeShareGivesItBack", func(t *testing.T) {
		t.Parallel()
		b := setupShares(t, read.ShareConfig{Max: 1, AcquireTimeout: wait}, false)
		_, err := b.open2(t, read.SurfaceCOUNT, `{"kinds":[1059]}`) // p-gated: refused after the share was taken
		var ref *read.Refusal
		require.ErrorAs(t, err, &ref)
		require.Equal(t, read.CodeGated, ref.Code)
		rd, err := b.open("a", b.reader.PubKey)
		require.NoError(t, err)
		rd.Close()
	})
}

// TestSnapshotTakesAShare: the read-state snapshot is a read like the
// others: it waits for its pubkey's share and is refused when the share
// stays full, and holds none once answered.
func TestSnapshotTakesAShare(t *testing.T) {
	t.Parallel()
	const wait = 50 * time.Millisecond
	b := setupShares(t, read.ShareConfig{Max: 10, PerPubkey: 1, AcquireTimeout: wait}, false)
	me := b.reader.PubKey
	f, err := event.ParseFilter([]byte(`{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1}`))
	require.NoError(t, err)
	snapshot := func() error {
		_, err := b.engine.ReadStateSnapshot(context.Background(), read.Scope{CommunityID: b.cid, Reader: me}, "s", []event.Filter{f})
		return err
	}
	held, err := b.open("a", me)
	require.NoError(t, err)
	requireRefused(t, snapshot(), read.CodeTooManyReads, wire.MsgTooManyReads)
	require.InDelta(t, 1, testutil.ToFloat64(b.m.Reads.ShareRejections.WithLabelValues("pubkey")), 0)
	held.Close()
	require.NoError(t, snapshot())
	require.InDelta(t, 0, testutil.ToFloat64(b.m.Reads.InFlight), 0, "the snapshot gave its share back")
}

// TestReadTimeJudgedAtGrant: a read that waits for its pubkey's share is
// judged on the read-time budget when the share is granted, after the
// reads ahead of it have paid: it does not run on the budget it found when
// it arrived.
func TestReadTimeJudgedAtGrant(t *testing.T) {
	t.Parallel()
	b := setupShares(t, read.ShareConfig{Max: 10, PerPubkey: 1, AcquireTimeout: 10 * time.Second,
		TimePerSecond: time.Millisecond, TimeBurst: 50 * time.Millisecond}, false)
	me := b.reader.PubKey
	held, err := b.open("a", me) // costs the 150 ms it holds its share: three bursts
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		rd, err := b.open("b", me) // arrives with the budget full, waits for the share
		if err == nil {
			rd.Close()
		}
		done <- err
	}()
	time.Sleep(150 * time.Millisecond)
	held.Close()
	err = <-done
	var ref *read.Refusal
	require.ErrorAs(t, err, &ref)
	require.Equal(t, read.CodeReadTime, ref.Code)
	require.Contains(t, ref.Reason, "rate-limited: quota exceeded; retry in ")
	require.InDelta(t, 0, testutil.ToFloat64(b.m.Reads.InFlight), 0, "the refused read gave its share back")
	require.InDelta(t, 1, testutil.ToFloat64(b.m.Reads.ShareRejections.WithLabelValues("read_time")), 0)
}

func TestReadDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	b := setupShares(t, read.ShareConfig{Max: 7, AcquireTimeout: 5 * time.Second, Timeout: timeout}, true)

	for name, s := range surfaces {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rd, err := b.open2(t, s, `{"kinds":[1]}`)
			require.NoError(t, err)
			defer rd.Close()
			start := time.Now()
			switch s {
			case read.SurfaceCOUNT, read.SurfaceCountHTTP:
				_, err = rd.Count(context.Background())
			case read.SurfaceNEG:
				err = rd.Records(context.Background(), 100, func(int64, [32]byte) {})
				defer func() {
					require.GreaterOrEqual(t, testutil.ToFloat64(b.m.Reads.Timeouts.WithLabelValues("neg")), 1.0)
				}()
			default:
				err = rd.Rows(context.Background(), func(read.Row) bool { return true })
			}
			requireRefused(t, err, read.CodeReadTimeout, wire.MsgReadTimedOut)
			require.Less(t, time.Since(start), 10*time.Second, "ended at the deadline, not at the statement's end")
		})
	}
	t.Run("CountedAndStoppedOnTheServer", func(t *testing.T) {
		t.Parallel()
		rd, err := b.open2(t, read.SurfaceCOUNT, `{"kinds":[1]}`)
		require.NoError(t, err)
		_, err = rd.Count(context.Background())
		rd.Close()
		requireRefused(t, err, read.CodeReadTimeout, wire.MsgReadTimedOut)
		require.GreaterOrEqual(t, testutil.ToFloat64(b.m.Reads.Timeouts.WithLabelValues("count")), 1.0)
		// The cancel request pgx sends when a context ends mid-statement
		// stopped the statement: no backend of this
		// database still sleeps once every read has returned.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var sleeping int
			require.NoError(t, b.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'SELECT pg_sleep(30)' AND state = 'active'`).Scan(&sleeping))
			if sleeping == 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "%d statements still sleeping on the server", sleeping)
		}
	})
	t.Run("ClientGoneIsNoTimeout", func(t *testing.T) {
		t.Parallel()
		rd, err := b.open2(t, read.SurfaceCOUNT, `{"kinds":[1]}`)
		require.NoError(t, err)
		defer rd.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = rd.Count(ctx)
		require.Error(t, err)
		var ref *read.Refusal
		require.False(t, errors.As(err, &ref), "a read its client abandoned is not refused: %v", err)
	})
}
