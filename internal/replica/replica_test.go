package replica

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/standbytest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// clock is the local clock of Config.NowFunc: it stands still from its
// start until a test advances it, so a probe ages only when the test says
// so, however slowly a loaded machine replays.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func newClock() *clock { return &clock{at: time.Now()} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// testBundle is a real primary and standby, the relay's armed writer pool
// on the primary, a replica pool on the standby and a Replica on both.
type testBundle struct {
	pair   *standbytest.Pair
	writer *pgxpool.Pool
	pool   *pgxpool.Pool
	r      *Replica
	m      *metrics.Metrics
	clock  *clock
	logs   *logtest.Buffer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := context.Background()
	pair := standbytest.Start(t)
	writer, err := pg.Open(ctx, pair.WriterURL, pg.PoolConfig{MaxConns: 4, CreatedAtFloor: Floor})
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	// A connection for each of the eight TestRead subtests that share one
	// bundle, so no read waits out the acquire timeout behind a neighbour.
	pool, err := OpenPool(ctx, pair.ReplicaURL, 8, nil)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &testBundle{pair: pair, writer: writer, pool: pool, m: metrics.Disabled(), clock: newClock(), logs: &logtest.Buffer{}}
	b.r = b.newReplica()
	return b
}

// newReplica returns a fresh Replica (no probe yet) on the bundle's pools.
func (b *testBundle) newReplica() *Replica {
	return New(Config{Writer: b.writer, Pool: b.pool, Metrics: b.m, NowFunc: b.clock.now,
		Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
}

// fork returns a bundle on the same pair and pools with a fresh Replica,
// metrics, clock and log, for subtests that share a standby.
func (b *testBundle) fork() *testBundle {
	c := *b
	c.m, c.clock, c.logs = metrics.Disabled(), newClock(), &logtest.Buffer{}
	c.r = c.newReplica()
	return &c
}

// probed runs one probe and waits until the standby has replayed it.
func (b *testBundle) probed(t *testing.T) time.Time {
	t.Helper()
	beat, err := b.r.runOnce(context.Background())
	require.NoError(t, err)
	b.pair.WaitReplayed(t)
	return beat
}

// heartbeat writes the heartbeat row as if a probe ran age ago.
func (b *testBundle) heartbeat(t *testing.T, age time.Duration) {
	t.Helper()
	_, err := b.writer.Exec(context.Background(), `UPDATE replica_heartbeat
		SET beat_at = now() - make_interval(secs => $1), safe_through = now() - make_interval(secs => $1) - interval '965 seconds'`,
		age.Seconds())
	require.NoError(t, err)
}

// read runs Read with a statement that must see the proved snapshot.
func (b *testBundle) read(t *testing.T, until int64) (Route, *Session, bool) {
	t.Helper()
	var seen *Session
	ran := false
	route, err := b.r.Read(context.Background(), until, func(s *Session) error {
		ran, seen = true, s
		var one int
		return s.Querier().QueryRow(context.Background(), "SELECT 1").Scan(&one)
	})
	require.NoError(t, err)
	return route, seen, ran
}

func (b *testBundle) counts() (reads, degraded float64) {
	return testutil.ToFloat64(b.m.Replica.Reads), testutil.ToFloat64(b.m.Replica.Degraded)
}

var historical = time.Now().Unix() - 3600

func TestProbe(t *testing.T) {
	t.Parallel()

	t.Run("WritesTheHeartbeat", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		beat := b.probed(t)
		var gotBeat, safe time.Time
		var rows int
		require.NoError(t, b.writer.QueryRow(context.Background(),
			"SELECT beat_at, safe_through, count(*) OVER () FROM replica_heartbeat").Scan(&gotBeat, &safe, &rows))
		require.Equal(t, 1, rows)
		require.True(t, beat.Equal(gotBeat))
		require.Equal(t, Floor+Margin, gotBeat.Sub(safe))
		require.WithinDuration(t, time.Now(), gotBeat, 5*time.Second)
		// The replica holds the same row, and the lag was measured.
		var onReplica time.Time
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT beat_at FROM replica_heartbeat").Scan(&onReplica))
		require.True(t, beat.Equal(onReplica))
		require.GreaterOrEqual(t, testutil.ToFloat64(b.m.Replica.LagBytes), 0.0)
		again := b.probed(t)
		require.True(t, again.After(beat), "every probe rewrites the row")
		require.NoError(t, b.writer.QueryRow(context.Background(), "SELECT count(*) FROM replica_heartbeat").Scan(&rows))
		require.Equal(t, 1, rows)
	})

	t.Run("LoopProbesAtOnceAndOnTicks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r := New(Config{Writer: b.writer, Pool: b.pool, Interval: 10 * time.Millisecond})
		r.TestSignals.Init()
		require.NoError(t, r.Start(context.Background()))
		first := r.TestSignals.Probed.WaitOrTimeout(t)
		second := r.TestSignals.Probed.WaitOrTimeout(t)
		require.True(t, second.After(first))
		r.Stop()
		r.Stop()
	})

	t.Run("FailedProbeIsLoggedAndDoubted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.probed(t)
		require.Equal(t, RouteReplica, first(b.read(t, historical)))
		_, err := b.writer.Exec(context.Background(), "ALTER TABLE replica_heartbeat RENAME TO replica_heartbeat_away")
		require.NoError(t, err)
		b.r.TestSignals.Init()
		require.NoError(t, b.r.Start(context.Background()))
		defer b.r.Stop()
		require.ErrorContains(t, b.r.TestSignals.Failed.WaitOrTimeout(t), "write replica heartbeat")
		require.Contains(t, b.logs.String(), "replica probe failed")
		route, _, ran := b.read(t, historical)
		require.Equal(t, RouteDoubt, route)
		require.False(t, ran)
	})
}

func first(r Route, _ *Session, _ bool) Route { return r }

func TestRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := setup(t) // for the subtests that neither pause nor stop the standby

	t.Run("HistoricalReadServedByTheReplica", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		beat := b.probed(t)
		route, s, ran := b.read(t, historical)
		require.Equal(t, RouteReplica, route)
		require.True(t, ran)
		require.True(t, s.BeatAt.Equal(beat) || s.BeatAt.After(beat))
		reads, degraded := b.counts()
		require.Equal(t, 1.0, reads)
		require.Zero(t, degraded)
	})

	t.Run("HeadPageStaysOnTheWriter", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		beat := b.probed(t)
		for _, until := range []int64{time.Now().Unix(), safeThrough(beat).Unix() + 1} {
			route, _, ran := b.read(t, until)
			require.Equal(t, RouteWriter, route, "until %d", until)
			require.False(t, ran)
		}
		reads, degraded := b.counts()
		require.Zero(t, reads)
		require.Zero(t, degraded, "a head page is not a doubt")
	})

	t.Run("NoProbeYetStaysOnTheWriter", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		route, _, ran := b.read(t, historical)
		require.Equal(t, RouteWriter, route)
		require.False(t, ran)
	})

	t.Run("StaleProbeIsADoubt", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		b.probed(t)
		b.clock.advance(Freshness - time.Second)
		require.Equal(t, RouteReplica, first(b.read(t, historical)))
		b.clock.advance(time.Second)
		route, _, ran := b.read(t, historical)
		require.Equal(t, RouteDoubt, route)
		require.False(t, ran)
		_, degraded := b.counts()
		require.Equal(t, 1.0, degraded)
		require.Contains(t, b.logs.String(), "last successful probe 30s ago")
	})

	t.Run("FailingStatementIsADoubt", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		b.probed(t)
		route, err := b.r.Read(ctx, historical, func(s *Session) error {
			_, err := s.Querier().Exec(ctx, "SELECT * FROM no_such_table")
			return err
		})
		require.NoError(t, err)
		require.Equal(t, RouteDoubt, route)
		_, degraded := b.counts()
		require.Equal(t, 1.0, degraded)
		require.Equal(t, RouteReplica, first(b.read(t, historical)), "the connection went back clean; log:\n%s", b.logs)
	})

	t.Run("StatementOverTwoSecondsIsADoubt", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		b.probed(t)
		began := time.Now()
		route, err := b.r.Read(ctx, historical, func(s *Session) error {
			_, err := s.Querier().Exec(ctx, "SELECT pg_sleep(10)")
			return err
		})
		require.NoError(t, err)
		require.Equal(t, RouteDoubt, route)
		require.Less(t, time.Since(began), 8*time.Second, "cut at StatementTimeout")
		require.Contains(t, b.logs.String(), "statement timeout")
	})

	t.Run("SnapshotIsFixedByTheHeartbeat", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		b.probed(t)
		host := "snapshot-" + time.Now().Format("150405.000000000")
		var before, after int
		route, err := b.r.Read(ctx, historical, func(s *Session) error {
			if err := s.Querier().QueryRow(ctx, "SELECT count(*) FROM communities WHERE host = $1", host).Scan(&before); err != nil {
				return err
			}
			// Committed and replayed after the heartbeat read: not in this snapshot.
			if _, err := b.writer.Exec(ctx, "INSERT INTO communities (host) VALUES ($1)", host); err != nil {
				return err
			}
			b.pair.WaitReplayed(t)
			return s.Querier().QueryRow(ctx, "SELECT count(*) FROM communities WHERE host = $1", host).Scan(&after)
		})
		require.NoError(t, err)
		require.Equal(t, RouteReplica, route, "log:\n%s", b.logs)
		require.Zero(t, before)
		require.Zero(t, after, "REPEATABLE READ: one snapshot, taken by the heartbeat statement")
	})

	t.Run("CanceledRequestIsNotADoubt", func(t *testing.T) {
		t.Parallel()
		b := shared.fork()
		b.probed(t)
		cctx, cancel := context.WithCancel(ctx)
		_, err := b.r.Read(cctx, historical, func(*Session) error {
			cancel()
			return cctx.Err()
		})
		require.ErrorIs(t, err, context.Canceled)
		_, degraded := b.counts()
		require.Zero(t, degraded)
	})
}

// Doubt means the writer at the replica's level, and docs/PROTOCOL.md §16.6's doubts.
func TestDoubt(t *testing.T) {
	t.Parallel()

	t.Run("PausedReplayLagsPastThirtySeconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.probed(t)
		// The replica's row is 40 s old when replay pauses; the next probe
		// writes a fresh one it cannot see.
		b.heartbeat(t, 40*time.Second)
		b.pair.WaitReplayed(t)
		b.pair.PauseReplay(t)
		beat, err := b.r.runOnce(context.Background())
		require.NoError(t, err)
		route, _, ran := b.read(t, historical)
		require.Equal(t, RouteDoubt, route)
		require.False(t, ran)
		_, degraded := b.counts()
		require.Equal(t, 1.0, degraded)
		require.Contains(t, b.logs.String(), "behind the newest one written")

		b.pair.ResumeReplay(t)
		b.pair.WaitReplayed(t)
		route, s, _ := b.read(t, historical)
		require.Equal(t, RouteReplica, route)
		require.True(t, s.BeatAt.Equal(beat))
	})

	t.Run("UntilAboveTheReplicasSafeThrough", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.probed(t)
		// The replica's row says safe_through = now − 10 s − 965 s; this
		// process wrote a newer one, so until = now − 970 s passes its own
		// bound and fails the replica's.
		b.heartbeat(t, 10*time.Second)
		b.pair.WaitReplayed(t)
		b.pair.PauseReplay(t)
		_, err := b.r.runOnce(context.Background())
		require.NoError(t, err)
		until := time.Now().Unix() - 970
		route, _, ran := b.read(t, until)
		require.Equal(t, RouteDoubt, route)
		require.False(t, ran)
		require.Contains(t, b.logs.String(), "after the replica's safe_through")
		require.Equal(t, RouteReplica, first(b.read(t, until-10)))
	})

	t.Run("MissingHeartbeatRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.probed(t)
		_, err := b.writer.Exec(context.Background(), "DELETE FROM replica_heartbeat")
		require.NoError(t, err)
		b.pair.WaitReplayed(t)
		route, _, _ := b.read(t, historical)
		require.Equal(t, RouteDoubt, route)
		require.Contains(t, b.logs.String(), "no heartbeat row on the replica")
	})

	t.Run("StandbyStopped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.probed(t)
		b.pair.StopStandby(t)
		route, _, ran := b.read(t, historical)
		require.Equal(t, RouteDoubt, route, "a failed connection")
		require.False(t, ran)
		// The next probe finds it unreachable: reads doubt without dialling.
		_, err := b.r.runOnce(context.Background())
		require.NoError(t, err, "the replica's state never fails the probe")
		require.Contains(t, b.logs.String(), "read replica unreachable")
		route, _, _ = b.read(t, historical)
		require.Equal(t, RouteDoubt, route)
		require.Contains(t, b.logs.String(), "replica unreachable at the last probe")
		_, degraded := b.counts()
		require.Equal(t, 2.0, degraded)

		b.pair.StartStandby(t)
		b.probed(t)
		require.Contains(t, b.logs.String(), "read replica reachable again")
		require.Equal(t, RouteReplica, first(b.read(t, historical)))
	})
}

// TestVerify needs a writer only: Verify never reads the replica.
func TestVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) (*pgxpool.Pool, string) {
		t.Helper()
		_, url := dbtest.NewDB(t)
		writer, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2, CreatedAtFloor: Floor})
		require.NoError(t, err)
		t.Cleanup(writer.Close)
		return writer, url
	}
	verify := func(writer *pgxpool.Pool) error {
		return New(Config{Writer: writer, Pool: writer}).Verify(ctx)
	}

	t.Run("ArmedWriterPasses", func(t *testing.T) {
		t.Parallel()
		writer, _ := setup(t)
		require.NoError(t, pg.EnsurePartitions(ctx, writer, time.Now(), 1))
		require.NoError(t, verify(writer))
	})

	t.Run("UnarmedWriterFails", func(t *testing.T) {
		t.Parallel()
		_, url := setup(t)
		plain, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1})
		require.NoError(t, err)
		defer plain.Close()
		require.EqualError(t, verify(plain), `read replica fence: the writer pool is not armed (buzz.created_at_floor is unset, want "960")`)
	})

	t.Run("DisabledOnAPartitionFails", func(t *testing.T) {
		t.Parallel()
		writer, _ := setup(t)
		_, err := writer.Exec(ctx, "ALTER TABLE events_p_default DISABLE TRIGGER events_created_at_floor")
		require.NoError(t, err)
		require.EqualError(t, verify(writer), "read replica fence: trigger events_created_at_floor is missing or disabled on events_p_default")
	})

	t.Run("MissingTriggerFails", func(t *testing.T) {
		t.Parallel()
		writer, _ := setup(t)
		_, err := writer.Exec(ctx, "DROP TRIGGER events_created_at_floor ON events")
		require.NoError(t, err)
		require.EqualError(t, verify(writer), "read replica fence: trigger events_created_at_floor is missing on events; run buzz-relay migrate")
	})

	t.Run("OtherTriggerDefinitionFails", func(t *testing.T) {
		t.Parallel()
		writer, _ := setup(t)
		_, err := writer.Exec(ctx, `DROP TRIGGER events_created_at_floor ON events;
			CREATE CONSTRAINT TRIGGER events_created_at_floor AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION events_created_at_floor_guard()`)
		require.NoError(t, err)
		require.ErrorContains(t, verify(writer), "read replica fence: trigger events_created_at_floor has another definition")
	})

	t.Run("MissingHeartbeatTableFails", func(t *testing.T) {
		t.Parallel()
		writer, _ := setup(t)
		_, err := writer.Exec(ctx, "ALTER TABLE replica_heartbeat RENAME TO replica_heartbeat_away")
		require.NoError(t, err)
		require.EqualError(t, verify(writer), "read replica fence: table replica_heartbeat is missing; run buzz-relay migrate")
	})
}

// A former primary that comes back as a replica of the promoted standby
// (docs/OPERATIONS.md "High availability"): the replica pool names the
// primary's address, the writer pool both servers. After the primary's
// death and the standby's promotion the probe goes on on the new writer,
// and every read is doubted while the replica's address does not answer.
// Once the old primary runs again as a standby of the new one, the proof
// holds on it and it serves reads again, which see what the new primary
// wrote after the failover.
func TestFormerPrimaryReturnsAsReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := standbytest.StartWith(t, standbytest.Options{Synchronous: true})
	writer, err := pg.Open(ctx, pair.FailoverURL, pg.PoolConfig{MaxConns: 4, CreatedAtFloor: Floor})
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	pool, err := OpenPool(ctx, pair.WriterURL, 4, nil)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r := New(Config{Writer: writer, Pool: pool, Interval: 100 * time.Millisecond})
	r.TestSignals.Init()
	require.NoError(t, r.Start(ctx))
	t.Cleanup(r.Stop)
	_, err = writer.Exec(ctx, `CREATE TABLE failover_marks (mark text PRIMARY KEY)`)
	require.NoError(t, err)
	// An idle connection of the pool to the killed primary fails its
	// first write before sending it (broken pipe): that write is safe to
	// send again, on a new connection.
	mark := func(m string) {
		t.Helper()
		for attempt := 1; ; attempt++ {
			_, err := writer.Exec(ctx, `INSERT INTO failover_marks VALUES ($1)`, m)
			if err != nil && attempt < 10 && pgconn.SafeToRetry(err) {
				continue
			}
			require.NoError(t, err)
			return
		}
	}
	marks := func() (Route, []string) {
		t.Helper()
		var got []string
		route, err := r.Read(ctx, historical, func(s *Session) error {
			rows, err := s.Querier().Query(ctx, `SELECT mark FROM failover_marks ORDER BY mark`)
			if err != nil {
				return err
			}
			got, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		require.NoError(t, err)
		return route, got
	}
	mark("a-before")
	r.TestSignals.Probed.WaitOrTimeout(t)
	route, got := marks()
	require.Equal(t, RouteReplica, route, "the primary serves as its own replica before the failover")
	require.Equal(t, []string{"a-before"}, got)

	pair.KillPrimary(t)
	pair.Promote(t)
	mark("b-after")
	r.TestSignals.Probed.Init()
	r.TestSignals.Probed.WaitOrTimeout(t)
	route, _ = marks()
	require.Equal(t, RouteDoubt, route, "no replica answers at the old primary's address")

	pair.RejoinPrimary(t)
	mark("c-rejoined")
	require.Eventually(t, func() bool {
		route, got = marks()
		return route == RouteReplica && len(got) == 3
	}, 30*time.Second, 50*time.Millisecond, "the rejoined server serves reads once it replays the new primary")
	require.Equal(t, []string{"a-before", "b-after", "c-rejoined"}, got)
}
