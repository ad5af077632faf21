package window_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/window"
)

const suffix = "; reduce window work before retrying"

// edits returns n edits of root stored directly, each with content of
// size bytes, one per second going back from ts.
func (w *world) edits(t *testing.T, ch string, root event.Event, n, size int, ts int64) []event.Event {
	t.Helper()
	content := strings.Repeat("e", size)
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = unsigned(w.owner, event.KindMessageEdit, eventtest.Channel(ch), eventtest.At(ts-int64(i/4)),
			eventtest.Content(content), eventtest.Tag("e", root.ID), eventtest.Tag("n", strconv.Itoa(i)))
	}
	for chunk := range slicesChunk(evs, 500) {
		w.store(t, chunk...)
	}
	return evs
}

// unsigned is a well-formed event by the key's owner with its true id and a
// random signature: reads never verify signatures (docs/NIP-CW.md §2), and
// signing thousands of bulk aux rows would dominate the test's time under
// the race detector.
func unsigned(by eventtest.Key, kind int, opts ...eventtest.Option) event.Event {
	ev := event.Event{Kind: kind, PubKey: by.PubKey, Tags: event.Tags{}}
	for _, o := range opts {
		o(&ev)
	}
	ev.ID = ev.ComputeID()
	sig := make([]byte, 64)
	_, _ = rand.Read(sig)
	ev.Sig = hex.EncodeToString(sig)
	return ev
}

// replies stores n depth-1 replies of root directly, content of size
// bytes, newest at ts.
func (w *world) replies(t *testing.T, ch string, root event.Event, n, size int, ts int64) []event.Event {
	t.Helper()
	content := strings.Repeat("r", size)
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = w.owner.Signed(t, event.KindStreamMessage, replyOpts(ch, root, root, ts-int64(i), content)...)
		w.storeReply(t, ch, root, root, 1, evs[i])
	}
	return evs
}

func slicesChunk(evs []event.Event, n int) func(func([]event.Event) bool) {
	return func(yield func([]event.Event) bool) {
		for len(evs) > 0 {
			k := min(n, len(evs))
			if !yield(evs[:k]) {
				return
			}
			evs = evs[k:]
		}
	}
}

// The raw-row budget trips on 51 replies and 8,200 root edits;
// 1,001 edits drain over two aux pages. The heavy window is read by an
// engine of the test's (newEngine): reading 8,192 rows under the race
// detector on a loaded machine can take longer than the relay's 8 s batch
// deadline, which would say nothing of the row budget. How a budget 503
// reaches the client over HTTP is TestPayloadChargedBeforeLoad's.
func TestRawRowBudget(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()

	heavy := w.root(t, ch, base)
	w.replies(t, ch, heavy, 51, 10, base)
	w.edits(t, ch, heavy, 8200, 10, base)
	r := req(ch, heavy)
	r.IncludeAux = true
	ew := w.newEngine(t, 2, nil)
	_, err := ew.run(reader, r)
	requireFails(t, err, http.StatusServiceUnavailable, "thread window raw row budget exceeded"+suffix)
	require.Equal(t, 1.0, testutil.ToFloat64(ew.m.Window.BudgetExhausted.WithLabelValues("raw_row")))

	light := w.root(t, ch, base)
	replies := w.replies(t, ch, light, 51, 10, base)
	edits := w.edits(t, ch, light, 1001, 10, base)
	r = req(ch, light)
	r.IncludeAux = true
	a := w.query(t, reader, filter(r))
	require.Len(t, a.events, 1052)
	pages := w.windows(t, a, reader, r)
	require.Equal(t, ids(replies[:50]), ids(pages[0].rows))
	require.ElementsMatch(t, ids(edits), ids(pages[0].aux))
	require.Equal(t, ids(newestFirst(edits)), ids(pages[0].aux), "discovery order across the two pages")
	require.True(t, pages[0].hasMore)
}

// 80 edits of 60 KB fit one window; the same window twice in
// one batch shares the byte budget and fails. The 4.8 MB window is
// served by an engine of the test's, as in TestRawRowBudget: under the
// race detector on a loaded machine it can take a good part of the
// relay's 8 s batch deadline. The refusal goes over HTTP.
func TestSharedByteBudget(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base-100)
	edits := w.edits(t, ch, root, 80, 60_000, base)
	r := req(ch, root)
	r.IncludeAux = true
	ew := w.newEngine(t, 2, nil)
	items, err := ew.run(reader, r)
	require.NoError(t, err)
	require.Subset(t, ids(itemEvents(items)), ids(edits), "every edit is in the window's aux")

	a := w.query(t, reader, filter(r), filter(r))
	require.Equal(t, http.StatusServiceUnavailable, a.status, a.body)
	require.Contains(t, a.body, "byte budget")
	a.requireError(t, http.StatusServiceUnavailable, "thread window payload byte budget exceeded"+suffix)
}

// statements records the SQL and arguments of every statement a pool
// runs, and hands each statement's text to onQuery, when set, before it
// is sent.
type statements struct {
	mu      sync.Mutex
	all     []pgx.TraceQueryStartData
	onQuery func(sql string)
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	s.all = append(s.all, data)
	s.mu.Unlock()
	if s.onQuery != nil {
		s.onQuery(data.SQL)
	}
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// loadedIDs returns every id the load statement was asked for.
func (s *statements) loadedIDs() map[string]bool {
	loadSQL, _ := window.LoadStatement("", nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, d := range s.all {
		if d.SQL != loadSQL {
			continue
		}
		for _, id := range d.Args[2].([][]byte) {
			out[hex.EncodeToString(id)] = true
		}
	}
	return out
}

// count returns how many statements contained fragment.
func (s *statements) count(fragment string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.all {
		if strings.Contains(d.SQL, fragment) {
			n++
		}
	}
	return n
}

// engineWorld is an Engine built by the test on the relay's database: its
// own pool (of size conns), its own metrics.
type engineWorld struct {
	engine *window.Engine
	pool   *pgxpool.Pool
	rec    *statements
	m      *metrics.Metrics
	w      *world
}

// newEngine builds an Engine on the relay's database whose pool records
// every statement.
func (w *world) newEngine(t *testing.T, conns int32, onQuery func(sql string)) *engineWorld {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(w.r.DBURL)
	require.NoError(t, err)
	rec := &statements{onQuery: onQuery}
	cfg.ConnConfig.Tracer = rec
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	m := metrics.New(prometheus.NewRegistry())
	// Its tests check budgets other than the batch deadline: a minute
	// instead of 8 s, so that a loaded machine reading thousands of rows
	// does not meet the deadline first.
	e := window.New(window.Config{Pool: pool, Key: event.GenerateKey(), Metrics: m, Deadline: time.Minute})
	return &engineWorld{engine: e, pool: pool, rec: rec, m: m, w: w}
}

// run runs one batch of reqs for reader.
func (ew *engineWorld) run(reader eventtest.Key, reqs ...window.ThreadRequest) ([]window.Item, error) {
	return ew.engine.Threads(context.Background(), window.Batch{CommunityID: ew.w.cid, Host: ew.w.r.Host, Reader: reader.PubKey,
		Windows: reqs})
}

// requireFails asserts the batch's *Error.
func requireFails(t *testing.T, err error, status int, text string) {
	t.Helper()
	var e *window.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, &window.Error{Status: status, Text: text}, e)
}

// 40 edits of exactly 256 KiB trip the payload byte budget
// before their page's load statement runs; without aux the same window is
// served.
func TestPayloadChargedBeforeLoad(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base-100)
	reply := w.reply(t, ch, root, root, base-50, "a reply")
	edits := w.edits(t, ch, root, 40, 256<<10, base)
	r := req(ch, root)
	r.IncludeAux = true
	w.query(t, reader, filter(r)).requireError(t, http.StatusServiceUnavailable, "thread window payload byte budget exceeded"+suffix)

	ew := w.newEngine(t, 2, nil)
	_, err := ew.run(reader, r)
	requireFails(t, err, http.StatusServiceUnavailable, "thread window payload byte budget exceeded"+suffix)
	require.Equal(t, 1, ew.rec.count("jsonb_array_elements"), "the aux page's size scan ran")
	require.Equal(t, 1.0, testutil.ToFloat64(ew.m.Window.BudgetExhausted.WithLabelValues("payload_byte")))
	loaded := ew.rec.loadedIDs()
	require.True(t, loaded[reply.ID], "the reply was loaded")
	for _, ev := range edits {
		require.False(t, loaded[ev.ID], "an edit's payload was loaded")
	}

	r.IncludeAux = false
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, []string{reply.ID}, ids(pages[0].rows))
}

// 201 replies of 256 KiB, limit 200, exceed the payload budget
// in the reply scan; limit 4 is served with has_more. The served page is
// kept to 1 MiB: the race detector makes a 5 MiB page about eight times
// slower to serve (1.6 s against 0.2 s alone), and on a loaded machine
// one met the relay's 8 s batch deadline, which says nothing of the budget.
func TestReplyPayloadBudget(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base-100)
	replies := w.replies(t, ch, root, 201, 256<<10, base)
	r := req(ch, root)
	r.Limit = 200
	w.query(t, reader, filter(r)).requireError(t, http.StatusServiceUnavailable, "thread window payload byte budget exceeded"+suffix)
	r.Limit = 4
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, ids(replies[:4]), ids(pages[0].rows))
	require.True(t, pages[0].hasMore)
}

// The response byte budget counts the JSON as sent: content that
// escaping doubles exceeds it while its payload fits.
func TestResponseByteBudget(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base-100)
	quoted := w.owner.Signed(t, event.KindStreamMessage, replyOpts(ch, root, root, base, strings.Repeat(`"`, 4<<20+1))...)
	w.storeReply(t, ch, root, root, 1, quoted)
	w.query(t, reader, filter(req(ch, root))).requireError(t, http.StatusServiceUnavailable, "thread window exceeds response byte budget")
}

// A reply whose stored signature has 63 bytes is skipped but
// keeps its slot, and can be next_cursor; a live aux row with one fails
// the batch with 500.
func TestUnreconstructableRows(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	_, err := w.pool.Exec(context.Background(), `ALTER TABLE events DROP CONSTRAINT events_sig_check`)
	require.NoError(t, err)
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base-100)
	oldest := w.reply(t, ch, root, root, base-3, "oldest")
	broken := w.reply(t, ch, root, root, base-2, "broken")
	newest := w.reply(t, ch, root, root, base-1, "newest")
	truncate := func(id string) {
		t.Helper()
		tag, err := w.pool.Exec(context.Background(), `UPDATE events SET sig = substring(sig from 1 for 63) WHERE community_id = $1 AND id = $2`,
			w.cid, hexBytes(id))
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	}
	truncate(broken.ID)

	r := req(ch, root)
	r.Limit = 2
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, []string{newest.ID}, ids(pages[0].rows), "the broken row is not delivered")
	require.True(t, pages[0].hasMore)
	require.Equal(t, &window.Cursor{CreatedAt: broken.CreatedAt, ID: broken.ID}, pages[0].next, "the broken row keeps its slot")
	r.Cursor = pages[0].next
	pages = w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, []string{oldest.ID}, ids(pages[0].rows))
	require.False(t, pages[0].hasMore)

	r = req(ch, root)
	r.IncludeAux = true
	reaction := w.publish(t, event.KindReaction, eventtest.Channel(ch), eventtest.At(base), eventtest.Content("+"),
		eventtest.Tag("e", newest.ID))
	w.windows(t, w.query(t, reader, filter(r)), reader, r)
	truncate(reaction.ID)
	w.query(t, reader, filter(r)).requireError(t, http.StatusInternalServerError, "internal server error")
}
