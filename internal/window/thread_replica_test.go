package window_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/standbytest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
)

// zeroID is a before_id below every real id.
var zeroID = strings.Repeat("0", 64)

// replicaWorld is a thread-window engine over a real primary and
// streaming standby, wired as the relay wires it: the store on the armed
// writer pool, the replica's probe running. Fixtures older than the floor
// go through an unarmed pool, as an import would.
type replicaWorld struct {
	pair          *standbytest.Pair
	writer, plain *pgxpool.Pool
	rep           *replica.Replica
	m             *metrics.Metrics
	engine        *window.Engine
	key           []byte
	cid, ch       string
	author        eventtest.Key
	reader        eventtest.Key
	// kill, when set, terminates the replica backend of the next hop-2 aux
	// scan before it is sent.
	kill atomic.Bool
}

func replicaSetup(t *testing.T) *replicaWorld {
	t.Helper()
	ctx := context.Background()
	w := &replicaWorld{pair: standbytest.Start(t), m: metrics.New(prometheus.NewRegistry()), author: eventtest.NewKey(),
		reader: eventtest.NewKey(), key: event.GenerateKey()}
	var err error
	w.writer, err = pg.Open(ctx, w.pair.WriterURL, pg.PoolConfig{MaxConns: 6, CreatedAtFloor: replica.Floor})
	require.NoError(t, err)
	t.Cleanup(w.writer.Close)
	w.plain, err = pg.Open(ctx, w.pair.WriterURL, pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(w.plain.Close)
	// The replica pool as replica.OpenPool makes it, plus a tracer that can
	// kill a backend mid-closure (a real connection loss).
	cfg, err := pgxpool.ParseConfig(w.pair.ReplicaURL)
	require.NoError(t, err)
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "2000"
	cfg.ConnConfig.Tracer = &killer{w: w, t: t}
	rp, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(rp.Close)

	w.cid = fixture.Community(t, w.plain).ID
	w.ch = fixture.Channel(t, w.plain, w.cid, w.author)
	w.rep = replica.New(replica.Config{Writer: w.writer, Pool: rp, Metrics: w.m, Interval: 20 * time.Millisecond})
	require.NoError(t, w.rep.Verify(ctx))
	w.rep.TestSignals.Init()
	require.NoError(t, w.rep.Start(ctx))
	t.Cleanup(w.rep.Stop)
	w.rep.TestSignals.Probed.WaitOrTimeout(t)
	// These tests check routes and budgets, not the batch deadline: a
	// minute instead of 8 s, so that a loaded machine reading thousands of
	// rows twice, replica then writer, does not meet the deadline first.
	w.engine = window.New(window.Config{Pool: w.writer, Replica: w.rep, Key: w.key, Metrics: w.m, Deadline: time.Minute})
	return w
}

// killer terminates, when armed, the backend of the first hop-2 aux scan
// (kinds 5 and 9005) on the replica, through another connection, and
// waits for it to exit.
type killer struct {
	w *replicaWorld
	t *testing.T
}

func (k *killer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(data.SQL, "jsonb_array_elements") || !slices.Equal(data.Args[1].([]int), []int{5, 9005}) || !k.w.kill.Swap(false) {
		return ctx
	}
	// A context of its own: the query's may be about to end (the batch's
	// deadline on a loaded machine), and the kill must still happen.
	kctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := pgx.Connect(kctx, k.w.pair.ReplicaURL)
	require.NoError(k.t, err)
	defer admin.Close(kctx)
	var done bool
	require.NoError(k.t, admin.QueryRow(kctx, "SELECT pg_terminate_backend($1, 5000)", conn.PgConn().PID()).Scan(&done))
	require.True(k.t, done)
	return ctx
}

func (k *killer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// post stores a kind of the author in the channel at ts through q.
func (w *replicaWorld) post(t *testing.T, q pg.Querier, kind int, ts int64, opts ...eventtest.Option) event.Event {
	t.Helper()
	return fixture.Event(t, q, w.cid, w.author, kind, append([]eventtest.Option{eventtest.Channel(w.ch), eventtest.At(ts)}, opts...)...)
}

// reply stores a depth-1 reply of root at ts through q, with its thread row.
func (w *replicaWorld) reply(t *testing.T, q pg.Querier, root event.Event, ts int64) event.Event {
	t.Helper()
	ev := w.post(t, q, event.KindStreamMessage, ts, eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", root.ID, "", "reply"),
		eventtest.Content("reply "+time.Unix(ts, 0).String()))
	require.NoError(t, store.New(q).ThreadReplyAdd(context.Background(), store.ThreadReplyParams{CommunityID: w.cid,
		Channel: w.ch, EventID: ev.ID, CreatedAt: ev.CreatedAt, ParentID: root.ID, ParentCreatedAt: root.CreatedAt,
		RootID: root.ID, RootCreatedAt: root.CreatedAt, Depth: 1}))
	return ev
}

func (w *replicaWorld) run(t *testing.T, e *window.Engine, reqs ...window.ThreadRequest) ([]window.Item, error) {
	t.Helper()
	return e.Threads(context.Background(), window.Batch{CommunityID: w.cid, Host: "relay.test", Reader: w.reader.PubKey, Windows: reqs})
}

func (w *replicaWorld) rows(t *testing.T, r window.ThreadRequest) []string {
	t.Helper()
	items, err := w.run(t, w.engine, r)
	require.NoError(t, err)
	var out []string
	for _, it := range items {
		if it.Event.Kind != 39007 {
			out = append(out, it.Event.ID)
		}
	}
	return out
}

func (w *replicaWorld) decided(path, route, reason string) float64 {
	return testutil.ToFloat64(w.m.Window.RouteDecision.WithLabelValues(path, route, reason))
}

// freshProbe returns once a probe that began after the call succeeded.
func (w *replicaWorld) freshProbe(t *testing.T) {
	t.Helper()
	w.rep.TestSignals.Init()
	w.rep.TestSignals.Probed.WaitOrTimeout(t)
	w.rep.TestSignals.Probed.WaitOrTimeout(t)
}

// With replay paused while the frozen heartbeat is still fresh,
// a cursor page whose until lies above the frozen beat_at − 965 s reads
// from the writer (reason bound) and has rows written after the pause; an
// older cursor page reads from the replica (proved); a head page always
// reads from the writer. Once the frozen heartbeat is more than 30 s
// behind, cursor pages go to the writer (lag).
func TestReplicaRouting(t *testing.T) {
	t.Parallel()
	w := replicaSetup(t)
	old := time.Now().Unix() - 7200
	root := w.post(t, w.plain, event.KindStreamMessage, old)
	var replies []event.Event
	for i := range 5 {
		replies = append(replies, w.reply(t, w.plain, root, old+1+int64(i)))
	}
	slices.Reverse(replies)
	w.pair.WaitReplayed(t)
	w.freshProbe(t)

	oldCursor := window.ThreadRequest{Channel: w.ch, Root: root.ID, Limit: 10, Depth: 100, Kinds: []int{9},
		Cursor: &window.Cursor{CreatedAt: old + 100, ID: zeroID}}
	require.Equal(t, ids(replies), w.rows(t, oldCursor))
	require.Equal(t, 1.0, w.decided("thread_window_cursor", "replica", "proved"))
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.Replica.Reads))

	w.pair.PauseReplay(t)
	t.Cleanup(func() { w.pair.ResumeReplay(t) })
	imported := w.reply(t, w.plain, root, old+50)
	fresh := w.reply(t, w.writer, root, time.Now().Unix()-100)

	t.Run("OldCursorOnTheReplica", func(t *testing.T) {
		require.Equal(t, ids(replies), w.rows(t, oldCursor), "the replica's snapshot lacks the import")
		require.Equal(t, 2.0, w.decided("thread_window_cursor", "replica", "proved"))
	})
	t.Run("RecentCursorOnTheWriter", func(t *testing.T) {
		r := oldCursor
		r.Cursor = &window.Cursor{CreatedAt: time.Now().Unix(), ID: zeroID}
		require.Equal(t, append([]string{fresh.ID, imported.ID}, ids(replies)...), w.rows(t, r))
		require.Equal(t, 1.0, w.decided("thread_window_cursor", "writer", "bound"))
	})
	t.Run("HeadPageOnTheWriter", func(t *testing.T) {
		r := oldCursor
		r.Cursor = nil
		require.Equal(t, append([]string{fresh.ID, imported.ID}, ids(replies)...), w.rows(t, r))
		require.Equal(t, 1.0, w.decided("thread_window_head", "writer", "head_page"))
	})
	require.Zero(t, testutil.ToFloat64(w.m.Replica.Degraded))

	t.Run("MissingRootThenTheWriter", func(t *testing.T) {
		// A root the paused standby lacks is a doubt; the window and the
		// rest of the batch read from the writer.
		late := w.post(t, w.plain, event.KindStreamMessage, old+60)
		lateReply := w.reply(t, w.plain, late, old+61)
		first := oldCursor
		first.Root = late.ID
		items, err := w.run(t, w.engine, first, oldCursor)
		require.NoError(t, err)
		require.Equal(t, []string{lateReply.ID}, ids(itemEvents(items[:1])))
		require.Equal(t, append([]string{imported.ID}, ids(replies)...), ids(itemEvents(items[2:len(items)-1])), "the second window on the writer")
		require.Equal(t, 2.0, w.decided("thread_window_cursor", "writer", "missing_root"))
		require.Equal(t, 2.0, w.decided("thread_window_cursor", "replica", "proved"), "no replica page after the doubt")
		require.Equal(t, 1.0, testutil.ToFloat64(w.m.Replica.Degraded))
	})

	t.Run("LagOnTheWriter", func(t *testing.T) {
		// The standby's heartbeat is 40 s old when replay pauses; then the
		// probe goes on writing fresh ones it cannot see.
		w.rep.Stop()
		w.pair.ResumeReplay(t)
		_, err := w.writer.Exec(context.Background(), `UPDATE replica_heartbeat SET beat_at = now() - interval '40 seconds',
			safe_through = now() - interval '1005 seconds'`)
		require.NoError(t, err)
		w.pair.WaitReplayed(t)
		w.pair.PauseReplay(t)
		require.NoError(t, w.rep.Start(context.Background()))
		w.freshProbe(t)
		require.Equal(t, append([]string{imported.ID}, ids(replies)...), w.rows(t, oldCursor), "read on the writer")
		require.Equal(t, 1.0, w.decided("thread_window_cursor", "writer", "lag"))
		require.Equal(t, 2.0, testutil.ToFloat64(w.m.Replica.Degraded))
	})

	t.Run("NotConfigured", func(t *testing.T) {
		m := metrics.New(prometheus.NewRegistry())
		e := window.New(window.Config{Pool: w.writer, Key: w.key, Metrics: m, NoReplicaReason: "floor_unverified"})
		_, err := w.run(t, e, oldCursor)
		require.NoError(t, err)
		require.Equal(t, 1.0, testutil.ToFloat64(m.Window.RouteDecision.WithLabelValues("thread_window_cursor", "writer", "floor_unverified")))
	})
}

// The replica connection killed during hop 2 of a cursor page:
// the answer equals the writer-only answer (the closure restarts on the
// writer from the original targets, nothing twice), the doubt is counted
// once, and the budgets are not reset: a page that spends 60 % of the
// raw-row budget and degrades mid-closure fails with the raw-row 503.
func TestReplicaDoubtMidClosure(t *testing.T) {
	t.Parallel()
	w := replicaSetup(t)
	old := time.Now().Unix() - 7200
	root := w.post(t, w.plain, event.KindStreamMessage, old)
	reply := w.reply(t, w.plain, root, old+1)
	w.reply(t, w.plain, root, old+2)
	react := w.post(t, w.plain, event.KindReaction, old+3, eventtest.Content("+"), eventtest.Tag("e", reply.ID))
	w.post(t, w.plain, event.KindDeletion, old+4, eventtest.Tag("e", react.ID))
	w.post(t, w.plain, event.KindMessageEdit, old+5, eventtest.Content("edited"), eventtest.Tag("e", root.ID))

	heavy := w.post(t, w.plain, event.KindStreamMessage, old+10)
	w.reply(t, w.plain, heavy, old+11)
	edits := make([]event.Event, 4950)
	for i := range edits {
		edits[i] = unsigned(w.author, event.KindMessageEdit, eventtest.Channel(w.ch), eventtest.At(old+20+int64(i/10)),
			eventtest.Content("e"), eventtest.Tag("e", heavy.ID), eventtest.Tag("n", itoa(i)))
	}
	b := &pgx.Batch{}
	for i := range edits {
		b.Queue(`INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
			VALUES ($1, $2, $3, to_timestamp($4), $5, $6, $7, $8, $9)`, w.cid, hexBytes(edits[i].ID), hexBytes(edits[i].PubKey),
			edits[i].CreatedAt, edits[i].Kind, tagsJSON(t, edits[i]), edits[i].Content, hexBytes(edits[i].Sig), w.ch)
	}
	require.NoError(t, w.plain.SendBatch(context.Background(), b).Close())
	w.pair.WaitReplayed(t)
	w.freshProbe(t)
	writerOnly := window.New(window.Config{Pool: w.writer, Key: w.key, Deadline: time.Minute})

	cursor := &window.Cursor{CreatedAt: old + 5000, ID: zeroID}
	r := window.ThreadRequest{Channel: w.ch, Root: root.ID, Limit: 10, Depth: 100, Kinds: []int{9}, Cursor: cursor, IncludeAux: true}
	want, err := w.run(t, writerOnly, r)
	require.NoError(t, err)

	w.kill.Store(true)
	got, err := w.run(t, w.engine, r)
	require.NoError(t, err)
	require.False(t, w.kill.Load(), "the hop-2 scan ran on the replica and its connection was killed")
	require.Equal(t, summary(want), summary(got))
	require.Len(t, got, 6, "two replies, the edit, the reaction, its deletion, the bounds")
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.Replica.Degraded))
	require.Equal(t, 1.0, w.decided("thread_window_cursor", "writer", "replica_error"))
	require.Zero(t, testutil.ToFloat64(w.m.Replica.Reads))

	t.Run("BudgetsAreNotReset", func(t *testing.T) {
		r := window.ThreadRequest{Channel: w.ch, Root: heavy.ID, Limit: 10, Depth: 100, Kinds: []int{9}, Cursor: cursor, IncludeAux: true}
		items, err := w.run(t, writerOnly, r)
		require.NoError(t, err, "on the writer alone the page fits")
		require.Len(t, items, 1+len(edits)+1)
		degraded := testutil.ToFloat64(w.m.Replica.Degraded)
		w.freshProbe(t)
		w.kill.Store(true)
		_, err = w.run(t, w.engine, r)
		requireFails(t, err, http.StatusServiceUnavailable, "thread window raw row budget exceeded; reduce window work before retrying")
		require.False(t, w.kill.Load())
		require.Equal(t, degraded+1, testutil.ToFloat64(w.m.Replica.Degraded))
	})
}

func itemEvents(items []window.Item) []event.Event {
	out := make([]event.Event, len(items))
	for i := range items {
		out[i] = items[i].Event
	}
	return out
}

// summary is an answer without the bounds' signature and time: the ids
// of rows and aux in order, then each bounds event's tags and content.
func summary(items []window.Item) []string {
	var out []string
	for _, it := range items {
		if it.Event.Kind == 39007 {
			out = append(out, it.Event.Tags[0][1]+" "+it.Event.Content)
			continue
		}
		out = append(out, it.Event.ID)
	}
	return out
}
