package read_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/standbytest"
)

// replicaWorld is a read engine over a real primary and streaming standby,
// wired as the relay wires it: the store on the armed writer pool, the
// replica's probe running. history is an old kind 9 in an open channel,
// fixture (unarmed, like an import) before the probe started.
type replicaWorld struct {
	pair    *standbytest.Pair
	engine  *read.Engine
	rep     *replica.Replica
	m       *metrics.Metrics
	writer  *pgxpool.Pool
	plain   *pgxpool.Pool // unarmed: fixtures older than the floor
	cid     string
	channel string
	reader  eventtest.Key
	author  eventtest.Key
	history event.Event
}

// historical is a bound an hour back: far below every safe_through.
func historical() int64 { return time.Now().Unix() - 3600 }

// replicaSetup builds the world; opts adjust the engine's Config.
func replicaSetup(t *testing.T, opts ...func(*read.Config)) *replicaWorld {
	t.Helper()
	ctx := context.Background()
	w := &replicaWorld{pair: standbytest.Start(t), m: metrics.Disabled(), reader: eventtest.NewKey(), author: eventtest.NewKey()}
	var err error
	w.writer, err = pg.Open(ctx, w.pair.WriterURL, pg.PoolConfig{MaxConns: 6, CreatedAtFloor: replica.Floor})
	require.NoError(t, err)
	t.Cleanup(w.writer.Close)
	w.plain, err = pg.Open(ctx, w.pair.WriterURL, pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(w.plain.Close)
	rp, err := replica.OpenPool(ctx, w.pair.ReplicaURL, 4, nil)
	require.NoError(t, err)
	t.Cleanup(rp.Close)

	w.cid = fixture.Community(t, w.plain).ID
	w.channel = fixture.Channel(t, w.plain, w.cid, w.author)
	w.history = w.old(t, 7200, "needle from the past")

	w.rep = replica.New(replica.Config{Writer: w.writer, Pool: rp, Metrics: w.m, Interval: 20 * time.Millisecond})
	require.NoError(t, w.rep.Verify(ctx))
	w.rep.TestSignals.Init()
	require.NoError(t, w.rep.Start(ctx))
	t.Cleanup(w.rep.Stop)
	w.rep.TestSignals.Probed.WaitOrTimeout(t)
	w.pair.WaitReplayed(t)
	cfg := read.Config{Pool: w.writer, Metrics: w.m, Replica: w.rep}
	for _, o := range opts {
		o(&cfg)
	}
	w.engine = read.New(cfg)
	return w
}

// freshProbe returns once a probe that began after the call has succeeded:
// the signal is initialised anew (forgetting buffered beats), then two
// beats are awaited, since the first may have begun before.
func (w *replicaWorld) freshProbe(t *testing.T) {
	t.Helper()
	w.rep.TestSignals.Init()
	w.rep.TestSignals.Probed.WaitOrTimeout(t)
	w.rep.TestSignals.Probed.WaitOrTimeout(t)
}

// old stores a channel kind 9 created age seconds ago through the unarmed
// pool, as an import would.
func (w *replicaWorld) old(t *testing.T, age int64, content string) event.Event {
	t.Helper()
	return fixture.Event(t, w.plain, w.cid, w.author, event.KindStreamMessage, eventtest.Channel(w.channel),
		eventtest.Content(content), eventtest.At(time.Now().Unix()-age))
}

func (w *replicaWorld) filter(format string, args ...any) string {
	return fmt.Sprintf(format, args...)
}

func (w *replicaWorld) request(t *testing.T, s read.Surface, filters ...string) *read.Read {
	t.Helper()
	fs := make([]event.Filter, len(filters))
	for i, raw := range filters {
		f, err := event.ParseFilter([]byte(raw))
		require.NoError(t, err, raw)
		fs[i] = f
	}
	rd, err := w.engine.Open(context.Background(), read.Request{
		Scope: read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey}, Surface: s, Filters: fs})
	require.NoError(t, err)
	return rd
}

// rows runs a row read and returns the ids handed over.
func (w *replicaWorld) rows(t *testing.T, s read.Surface, filters ...string) []string {
	t.Helper()
	var ids []string
	require.NoError(t, w.request(t, s, filters...).Rows(context.Background(), func(r read.Row) bool {
		ids = append(ids, r.Event.ID)
		return true
	}))
	return ids
}

func (w *replicaWorld) count(t *testing.T, s read.Surface, filters ...string) int64 {
	t.Helper()
	n, err := w.request(t, s, filters...).Count(context.Background())
	require.NoError(t, err)
	return n
}

func (w *replicaWorld) reads() float64    { return testutil.ToFloat64(w.m.Replica.Reads) }
func (w *replicaWorld) degraded() float64 { return testutil.ToFloat64(w.m.Replica.Degraded) }

// importWhilePaused pauses replay and stores an old row the standby then
// lacks: a read that returns it ran on the writer, one that omits it on
// the replica.
func (w *replicaWorld) importWhilePaused(t *testing.T) event.Event {
	t.Helper()
	w.pair.PauseReplay(t)
	t.Cleanup(func() { w.pair.ResumeReplay(t) })
	return w.old(t, 5400, "needle imported while paused")
}

// docs/PROTOCOL.md §16.6 at the read engine: which reads the replica serves.
func TestReplicaRouting(t *testing.T) {
	t.Parallel()
	w := replicaSetup(t)
	until := historical()
	hist := w.filter(`{"#h":["%s"],"kinds":[9],"until":%d}`, w.channel, until)
	fresh := fixture.Event(t, w.writer, w.cid, w.author, event.KindStreamMessage, eventtest.Channel(w.channel),
		eventtest.Content("written just now"))

	cases := []struct {
		name    string
		surface read.Surface
		filters []string
		want    []string
		// replica is how many reads the replica serves.
		replica float64
	}{
		{"HistoricalREQ", read.SurfaceREQ, []string{hist}, []string{w.history.ID}, 1},
		{"HistoricalQuery", read.SurfaceQuery, []string{hist}, []string{w.history.ID}, 1},
		{"HistoricalQueryCursor", read.SurfaceQuery, []string{w.filter(`{"#h":["%s"],"kinds":[9],"until":%d,"before_id":"%064d"}`,
			w.channel, w.history.CreatedAt, 0)}, []string{w.history.ID}, 1},
		{"TwoHistoricalFilters", read.SurfaceREQ, []string{hist, w.filter(`{"#h":["%s"],"until":%d}`, w.channel, until)},
			[]string{w.history.ID}, 2},
		{"SearchREQ", read.SurfaceREQ, []string{w.filter(`{"#h":["%s"],"search":"needle","until":%d}`, w.channel, until)},
			[]string{w.history.ID}, 1},
		{"SearchQuery", read.SurfaceQuery, []string{w.filter(`{"#h":["%s"],"search":"needle","until":%d}`, w.channel, until)},
			[]string{w.history.ID}, 1},
		{"WithoutUntil", read.SurfaceREQ, []string{w.filter(`{"#h":["%s"],"kinds":[9]}`, w.channel)},
			[]string{fresh.ID, w.history.ID}, 0},
		{"UntilNow", read.SurfaceREQ, []string{w.filter(`{"#h":["%s"],"kinds":[9],"until":%d}`, w.channel, fresh.CreatedAt)},
			[]string{fresh.ID, w.history.ID}, 0},
		{"WithoutH", read.SurfaceREQ, []string{w.filter(`{"kinds":[9],"until":%d}`, until)}, []string{w.history.ID}, 0},
		{"SearchWithoutH", read.SurfaceQuery, []string{w.filter(`{"search":"needle","until":%d}`, until)},
			[]string{w.history.ID}, 0},
		{"LegacyThread", read.SurfaceQuery, []string{w.filter(`{"#h":["%s"],"#e":["%s"],"depth_limit":3,"until":%d}`,
			w.channel, w.history.ID, until)}, nil, 0},
	}
	// Sequential: the last subtest pauses the shared standby.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := w.reads()
			require.Equal(t, tc.want, w.rows(t, tc.surface, tc.filters...))
			require.Equal(t, tc.replica, w.reads()-before)
		})
	}

	t.Run("CountOnTheWriter", func(t *testing.T) {
		before := w.reads()
		require.EqualValues(t, 1, w.count(t, read.SurfaceCOUNT, hist))
		require.EqualValues(t, 1, w.count(t, read.SurfaceCountHTTP, hist))
		require.Equal(t, before, w.reads())
	})

	t.Run("ServedFromTheReplicasSnapshot", func(t *testing.T) {
		imported := w.importWhilePaused(t)
		before := w.reads()
		require.Equal(t, []string{w.history.ID}, w.rows(t, read.SurfaceREQ, hist), "the replica lacks the import")
		require.Equal(t, before+1, w.reads())
		// The writer has it: COUNT and a head page see it.
		require.EqualValues(t, 2, w.count(t, read.SurfaceCOUNT, hist))
		require.Contains(t, w.rows(t, read.SurfaceREQ, w.filter(`{"#h":["%s"],"kinds":[9]}`, w.channel)), imported.ID)
	})
	require.Zero(t, w.degraded())
}

// docs/PROTOCOL.md §16.6 at the read engine: doubt means the writer.
func TestReplicaDoubt(t *testing.T) {
	t.Parallel()

	t.Run("PausedReplayBeyondThirtySeconds", func(t *testing.T) {
		t.Parallel()
		w := replicaSetup(t)
		hist := w.filter(`{"#h":["%s"],"kinds":[9],"until":%d}`, w.channel, historical())
		// The standby's heartbeat is 40 s old when replay pauses; then the
		// probe goes on writing fresh ones it cannot see.
		w.rep.Stop()
		_, err := w.writer.Exec(context.Background(), `UPDATE replica_heartbeat SET beat_at = now() - interval '40 seconds',
			safe_through = now() - interval '1005 seconds'`)
		require.NoError(t, err)
		w.pair.WaitReplayed(t)
		imported := w.importWhilePaused(t)
		require.NoError(t, w.rep.Start(context.Background()))
		w.freshProbe(t)

		before := w.reads()
		require.ElementsMatch(t, []string{w.history.ID, imported.ID}, w.rows(t, read.SurfaceREQ, hist), "served by the writer")
		require.Equal(t, before, w.reads())
		require.Equal(t, 1.0, w.degraded())

		// After the first doubt the rest of the request stays on the writer.
		got := w.rows(t, read.SurfaceQuery, hist, w.filter(`{"#h":["%s"],"kinds":[9,40002],"until":%d}`, w.channel, historical()))
		require.ElementsMatch(t, []string{w.history.ID, imported.ID}, got)
		require.Equal(t, 2.0, w.degraded(), "one doubt for the request, not one per filter")
		require.Equal(t, before, w.reads())
	})

	t.Run("StandbyStopped", func(t *testing.T) {
		t.Parallel()
		w := replicaSetup(t)
		hist := w.filter(`{"#h":["%s"],"kinds":[9],"until":%d}`, w.channel, historical())
		search := w.filter(`{"#h":["%s"],"search":"needle","until":%d}`, w.channel, historical())
		w.pair.StopStandby(t)
		require.Equal(t, []string{w.history.ID}, w.rows(t, read.SurfaceREQ, hist))
		require.Equal(t, []string{w.history.ID}, w.rows(t, read.SurfaceQuery, search))
		require.Equal(t, 2.0, w.degraded())
		require.Zero(t, w.reads())

		w.pair.StartStandby(t)
		w.freshProbe(t) // one that found the standby back
		w.pair.WaitReplayed(t)
		require.Equal(t, []string{w.history.ID}, w.rows(t, read.SurfaceREQ, hist))
		require.Equal(t, 1.0, w.reads(), "back on the replica")
	})

	t.Run("SearchDoubtAfterAcceptingLeavesNoTrace", func(t *testing.T) {
		t.Parallel()
		// The first FTS page runs and is accepted on the replica, the
		// second fails there (a real failure injected before the
		// statement): the writer's run starts over and hands over every
		// hit, none skipped as already sent.
		var fts atomic.Int32
		w := replicaSetup(t, func(c *read.Config) {
			c.QueryHookFunc = func(ctx context.Context, _ *event.Filter) error {
				if read.SearchStage(ctx) == "fts" && fts.Add(1) == 2 {
					return errors.New("injected failure of the second page")
				}
				return nil
			}
		})
		many := make([]event.Event, 0, 150)
		for i := range 150 {
			many = append(many, w.old(t, 4000+int64(i), "needle "+strconv.Itoa(i)))
		}
		w.pair.WaitReplayed(t)
		search := w.filter(`{"#h":["%s"],"search":"needle","until":%d}`, w.channel, historical())
		got := w.rows(t, read.SurfaceREQ, search)
		require.Len(t, got, 151)
		require.Subset(t, got, []string{many[0].ID, many[149].ID, w.history.ID})
		require.Equal(t, 1.0, w.degraded())
		require.Zero(t, w.reads())
		require.EqualValues(t, 4, fts.Load(), "two pages on the replica, two on the writer")
	})
}

// TestReplicaNotConfigured: without a replica every read is the writer's
// and nothing is counted.
func TestReplicaNotConfigured(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ids := w.rows(t, read.SurfaceREQ, `{"#h":["`+w.open+`"],"until":`+strconv.FormatInt(historical()+7200, 10)+`}`)
	require.Equal(t, []string{w.inOpen.ID}, ids)
}
