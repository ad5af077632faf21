package hot_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/redistest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The differential test (docs/ARCHITECTURE.md "Hot window"): a relay with
// a small hot window takes a random stream of events (kinds the window
// holds and kinds it must not answer for, replies and mentions, NIP-09
// deletions, expirations, backdated events below the window's horizon, a
// private channel and a membership change). After every batch, random
// filters are sent as the same reader to it and to a second process on
// the same database without a window, which only reads: every answer of
// the window must equal, in order and content, the answer of PostgreSQL
// alone. Rounds follow an import into the community while the relay runs
// (a write outside its ingest) and a restart of the windowed process. The
// window must have answered some of them itself.
//
// BUZZ_HOT_DIFF_ROUNDS and BUZZ_HOT_DIFF_QUERIES make it run longer
// (docs/OPERATIONS.md "Hot window"); the seed is logged.
func TestDifferential(t *testing.T) {
	t.Parallel()
	runDiff(t, nil)
}

// TestDifferentialRedis is the differential test with two windowed
// processes over Redis: the authors write through both, the reader asks
// both, and each must answer as PostgreSQL does, so each window follows
// the other process's commits. Its sixth round restarts Redis (every
// process loses its link, and commits made meanwhile reach no window
// through it) and writes during the gap.
func TestDifferentialRedis(t *testing.T) {
	t.Parallel()
	runDiff(t, redistest.Start(t))
}

func runDiff(t *testing.T, rs *redistest.Server) {
	rounds := envInt(t, "BUZZ_HOT_DIFF_ROUNDS", 6)
	queries := envInt(t, "BUZZ_HOT_DIFF_QUERIES", 40)
	seed := uint64(time.Now().UnixNano())
	if v := envInt(t, "BUZZ_HOT_DIFF_SEED", 0); v != 0 {
		seed = uint64(v)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))

	_, url := dbtest.NewDB(t)
	relayKey := hex.EncodeToString(event.GenerateKey())
	env := func(events string) map[string]string {
		e := map[string]string{"DATABASE_URL": url, "BUZZ_HOT_WINDOW_EVENTS": events, "TEST_HEARTBEAT": "1h"}
		if rs != nil {
			e["REDIS_URL"], e["BUZZ_RELAY_PRIVATE_KEY"] = rs.URL(), relayKey
		}
		return e
	}
	hots := []*relaytest.Relay{relaytest.Start(t, env("150"))}
	if rs != nil {
		hots = append(hots, relaytest.Start(t, env("150")))
	}
	pgRelay := relaytest.Start(t, env("0"))
	host := hots[0].Host
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c, err := hots[0].App.Store().CommunityByHost(context.Background(), host)
	require.NoError(t, err)

	d := &diff{t: t, rng: rng, host: host, community: c.ID, hots: hots}
	for range 4 {
		d.authors = append(d.authors, eventtest.NewKey())
	}
	d.reader = d.authors[3]
	d.connect(pgRelay)
	owner := d.authors[0]
	d.open = uuid.NewString()
	d.private = uuid.NewString()
	d.hotWS[0].MustPublish(owner.Signed(t, event.KindCreateGroup, eventtest.Channel(d.open), eventtest.Tag("name", "open"),
		eventtest.Content("o")))
	d.hotWS[0].MustPublish(owner.Signed(t, event.KindCreateGroup, eventtest.Channel(d.private), eventtest.Tag("name", "private"),
		eventtest.Tag("visibility", "private"), eventtest.Content("p")))
	d.hotWS[0].MustPublish(owner.Signed(t, event.KindPutUser, eventtest.Channel(d.private), eventtest.Tag("p", d.authors[1].PubKey),
		eventtest.Content("m")))
	for i, a := range d.authors {
		d.hotWS[i].MustPublish(a.Signed(t, event.KindJoinRequest, eventtest.Channel(d.open), eventtest.Content("j")))
	}

	for round := range rounds {
		switch round {
		case 2: // the reader joins the private channel
			d.hotWS[0].MustPublish(owner.Signed(t, event.KindPutUser, eventtest.Channel(d.private),
				eventtest.Tag("p", d.reader.PubKey), eventtest.Content("r")))
			if rs == nil {
				// The reading process learns it when its cache of the
				// reader's channels expires (10 s): without Redis nothing
				// tells it.
				time.Sleep(11 * time.Second)
			} else {
				time.Sleep(time.Second) // the control message
			}
		case 3: // events written outside the relay's ingest
			d.importEvents(pool)
		case 4: // a windowed process restarts
			d.hots[0].Stop()
			d.hots[0] = relaytest.Start(t, env("150"))
			d.connect(pgRelay)
		case 5: // Redis restarts; events are written while links are down
			if rs == nil {
				break
			}
			rs.Restart()
			d.publish(10)
			d.reconnected(append([]*relaytest.Relay{pgRelay}, d.hots...))
		}
		d.publish(60)
		for range queries {
			d.compare(d.filter())
			d.compareSearch(d.searchFilter())
		}
	}
	var hits float64
	for _, r := range d.hots {
		hits += r.Metric(t, `buzz_hot_window_reads_total{result="hit"}`)
		t.Logf("a windowed process's filters: %v answered by the window, %v beyond its horizon, %v while cold, %v unservable",
			r.Metric(t, `buzz_hot_window_reads_total{result="hit"}`),
			r.Metric(t, `buzz_hot_window_reads_total{result="beyond_horizon"}`),
			r.Metric(t, `buzz_hot_window_reads_total{result="cold"}`),
			r.Metric(t, `buzz_hot_window_reads_total{result="unservable"}`))
	}
	require.Positive(t, hits, "the window answered nothing itself")
	var cached, stale float64
	for _, r := range d.hots {
		cached += r.Metric(t, `buzz_search_cache_total{result="hit"}`)
		stale += r.Metric(t, `buzz_search_cache_total{result="stale"}`)
		t.Logf("a windowed process's search pages: %v from the cache, %v changed since cached, %v not cached, %v unwatched",
			r.Metric(t, `buzz_search_cache_total{result="hit"}`), r.Metric(t, `buzz_search_cache_total{result="stale"}`),
			r.Metric(t, `buzz_search_cache_total{result="miss"}`), r.Metric(t, `buzz_search_cache_total{result="unwatched"}`))
	}
	require.Positive(t, cached, "no search page came from the cache")
	require.Positive(t, stale, "no cached search page was found changed")
	if rs != nil {
		for _, r := range d.hots {
			require.Positive(t, r.Metric(t, `buzz_hot_window_reads_total{result="hit"}`),
				"each windowed process answered some filters itself")
		}
	}
}

type diff struct {
	t         *testing.T
	rng       *rand.Rand
	host      string
	community string
	// hots are the windowed processes.
	hots    []*relaytest.Relay
	authors []eventtest.Key
	reader  eventtest.Key
	open    string
	private string
	// hotWS and pgWS are one connection per author, to a windowed process
	// (author i to hots[i % len(hots)]) and to the process without a
	// window; hotReads are the reader's, one to each windowed process.
	hotWS, pgWS []*relaytest.WS
	hotReads    []*relaytest.WS
	pgRead      *relaytest.WS
	// ids are the stored events, for e tags and deletions; refs the values
	// of the e tags sent, other than deletions'.
	ids     []event.Event
	refs    []string
	expires []int64
	n       int
}

func (d *diff) connect(pgRelay *relaytest.Relay) {
	d.hotWS, d.pgWS, d.hotReads = nil, nil, nil
	for i, a := range d.authors {
		h := d.hots[i%len(d.hots)].Dial(d.t, d.host)
		h.Auth(a)
		p := pgRelay.Dial(d.t, d.host)
		p.Auth(a)
		d.hotWS, d.pgWS = append(d.hotWS, h), append(d.pgWS, p)
	}
	for _, r := range d.hots {
		h := r.Dial(d.t, d.host)
		h.Auth(d.reader)
		d.hotReads = append(d.hotReads, h)
	}
	d.pgRead = d.pgWS[3]
}

// reconnected waits until every process is linked to Redis again.
func (d *diff) reconnected(relays []*relaytest.Relay) {
	for _, r := range relays {
		require.Eventually(d.t, func() bool { return r.Metric(d.t, "buzz_pubsub_connected") == 1 },
			30*time.Second, 50*time.Millisecond, "a process did not reconnect to Redis")
	}
}

// publish sends n random events through the windowed processes, each as
// its author: its OK follows its own process's window update and its
// PUBLISH, so nothing is to wait for.
func (d *diff) publish(n int) {
	now := time.Now().Unix()
	for range n {
		i := d.rng.IntN(3)
		a := d.authors[i]
		ev := d.event(a, now)
		if ok, _ := d.hotWS[i].Publish(ev); ok {
			d.ids = append(d.ids, ev)
		}
	}
}

var words = []string{"alpha", "beta", "gamma"}

// event is one random event by a at about now.
func (d *diff) event(a eventtest.Key, now int64) event.Event {
	d.n++
	at := now - int64(d.rng.IntN(40))
	if d.rng.IntN(8) == 0 {
		at = now - 300 - int64(d.rng.IntN(500)) // below the horizon
	}
	// One of three words in the content, for the searches (compareSearch).
	opts := []eventtest.Option{eventtest.At(at), eventtest.Content("c" + strconv.Itoa(d.n) + " " + words[d.rng.IntN(3)])}
	kind := 1
	switch r := d.rng.IntN(20); {
	case r < 8:
		kind = event.KindStreamMessage
		ch := d.open
		if d.rng.IntN(3) == 0 {
			ch = d.private
		}
		opts = append(opts, eventtest.Channel(ch))
	case r < 10 && len(d.ids) > 0:
		// a deletion of one of a's events, or of someone else's (refused)
		kind = event.KindDeletion
		target := d.ids[d.rng.IntN(len(d.ids))]
		if mine := d.mine(a); len(mine) > 0 && d.rng.IntN(4) != 0 {
			target = mine[d.rng.IntN(len(mine))]
		}
		opts = append(opts, eventtest.Tag("e", target.ID))
		if target.Kind == event.KindStreamMessage {
			opts = append(opts, eventtest.Channel(target.Tags.First("h").Value()))
		}
	case r < 11:
		kind = 0
	case r < 12:
		kind = 30023
		opts = append(opts, eventtest.Tag("d", words[d.rng.IntN(3)]))
	}
	if kind != event.KindDeletion {
		if d.rng.IntN(3) == 0 && len(d.ids) > 0 {
			ref := d.ids[d.rng.IntN(len(d.ids))].ID
			d.refs = append(d.refs, ref)
			opts = append(opts, eventtest.Tag("e", ref))
		}
		if d.rng.IntN(3) == 0 {
			opts = append(opts, eventtest.Tag("p", d.authors[d.rng.IntN(4)].PubKey))
		}
		if d.rng.IntN(2) == 0 {
			opts = append(opts, eventtest.Tag("t", words[d.rng.IntN(3)]))
		}
		if d.rng.IntN(10) == 0 {
			exp := time.Now().Unix() + 2 + int64(d.rng.IntN(4))
			d.expires = append(d.expires, exp)
			opts = append(opts, eventtest.Tag("expiration", strconv.FormatInt(exp, 10)))
		}
	}
	return a.Signed(d.t, kind, opts...)
}

func (d *diff) mine(a eventtest.Key) []event.Event {
	var out []event.Event
	for _, ev := range d.ids {
		if ev.PubKey == a.PubKey && ev.Kind != event.KindDeletion {
			out = append(out, ev)
		}
	}
	return out
}

// filter is a random REQ filter: mostly ones the window may answer.
func (d *diff) filter() map[string]any {
	f := map[string]any{}
	kinds := [][]int{{1}, {9}, {1, 9}, {9, 5}, {5}, {1, 0}, {30023}}
	f["kinds"] = kinds[d.rng.IntN(len(kinds))]
	if d.rng.IntN(2) == 0 && len(d.ids) > 0 {
		// a REQ without kinds is never the window's
		if d.rng.IntN(6) == 0 {
			delete(f, "kinds")
		}
	}
	if d.rng.IntN(4) == 0 {
		f["authors"] = []string{d.authors[d.rng.IntN(4)].PubKey}
	}
	switch d.rng.IntN(6) {
	case 0:
		f["#p"] = []string{d.authors[d.rng.IntN(4)].PubKey}
	case 1:
		// Two ids, or (as often) two values some event's e tag holds, so
		// that the events below the window's horizon are often among the
		// answers.
		pool := make([]string, len(d.ids))
		for i, ev := range d.ids {
			pool[i] = ev.ID
		}
		if d.rng.IntN(2) == 0 && len(d.refs) > 0 {
			pool = d.refs
		}
		if len(pool) > 0 {
			f["#e"] = []string{pool[d.rng.IntN(len(pool))], pool[d.rng.IntN(len(pool))]}
			if _, ok := f["kinds"]; ok && d.rng.IntN(2) == 0 {
				f["kinds"] = []int{1, event.KindStreamMessage} // the kinds that carry e tags here
			}
		}
	case 2:
		f["#t"] = []string{words[d.rng.IntN(3)]}
	case 3:
		f["#h"] = []string{[]string{d.open, d.private}[d.rng.IntN(2)]}
	}
	now := time.Now().Unix()
	if d.rng.IntN(4) == 0 {
		f["since"] = now - int64(d.rng.IntN(900))
	}
	if d.rng.IntN(5) == 0 {
		f["until"] = now - int64(d.rng.IntN(60))
	}
	if l := []int{1, 5, 20, 50, 200, -1}[d.rng.IntN(6)]; l >= 0 {
		f["limit"] = l
	}
	return f
}

// searchFilter is a random NIP-50 filter over the words of the contents:
// few enough shapes that the same page is often asked again, after a
// commit or not (docs/ARCHITECTURE.md "Search cache").
func (d *diff) searchFilter() map[string]any {
	f := map[string]any{"search": words[d.rng.IntN(3)]}
	switch d.rng.IntN(3) {
	case 0:
		f["kinds"] = []int{event.KindStreamMessage}
	case 1:
		f["kinds"] = []int{event.KindStreamMessage, 0}
	}
	if d.rng.IntN(4) == 0 {
		f["#h"] = []string{[]string{d.open, d.private}[d.rng.IntN(2)]}
	}
	if d.rng.IntN(5) == 0 {
		f["authors"] = []string{d.authors[d.rng.IntN(4)].PubKey}
	}
	if l := []int{5, 20, -1}[d.rng.IntN(3)]; l >= 0 {
		f["limit"] = l
	}
	return f
}

// compareSearch sends the search f as the reader to each windowed process
// twice (the second is most often a page from its cache) and to the one
// without a window, whose pages always come from PostgreSQL: all the
// answers must be equal, in order and content.
func (d *diff) compareSearch(f map[string]any) {
	for _, hotRead := range d.hotReads {
		for attempt := 0; ; attempt++ {
			want := d.answer(d.pgRead, f)
			first, second := d.answer(hotRead, f), d.answer(hotRead, f)
			if slices.Equal(first, want) && slices.Equal(second, want) {
				break
			}
			if attempt < 2 && d.nearExpiry() {
				time.Sleep(1100 * time.Millisecond)
				continue
			}
			require.Equal(d.t, want, first, "search %v", f)
			require.Equal(d.t, want, second, "search %v, asked again", f)
		}
	}
}

// compare sends f as the reader to each windowed process and to the one
// without a window, as a REQ and as a COUNT, and requires the same events
// in the same order and the same count. An expiration passing between the
// reads can make them differ for a second: then they are read again.
func (d *diff) compare(f map[string]any) {
	for _, hotRead := range d.hotReads {
		for attempt := 0; ; attempt++ {
			got := append(d.answer(hotRead, f), d.count(hotRead, f))
			want := append(d.answer(d.pgRead, f), d.count(d.pgRead, f))
			if slices.Equal(got, want) {
				break
			}
			if attempt < 2 && d.nearExpiry() {
				time.Sleep(1100 * time.Millisecond)
				continue
			}
			require.Equal(d.t, want, got, "filter %v", f)
		}
	}
}

// count is a COUNT's answer, or its CLOSED.
func (d *diff) count(ws *relaytest.WS, f map[string]any) string {
	sub := "c" + strconv.Itoa(d.rng.IntN(1<<30))
	ws.Send("COUNT", sub, f)
	for {
		msg := ws.Next()
		if len(msg) < 2 || msg[1] != sub {
			continue
		}
		switch msg[0] {
		case "COUNT":
			b, err := json.Marshal(msg[2])
			require.NoError(d.t, err)
			return "COUNT " + string(b)
		case "CLOSED":
			return fmt.Sprintf("CLOSED %v", msg[2])
		}
	}
}

func (d *diff) nearExpiry() bool {
	now := time.Now().Unix()
	for _, e := range d.expires {
		if e >= now-2 && e <= now+2 {
			return true
		}
	}
	return false
}

// answer is a REQ's events as "id kind created_at content", in order.
func (d *diff) answer(ws *relaytest.WS, f map[string]any) []string {
	sub := "q" + strconv.Itoa(d.rng.IntN(1<<30))
	evs, closed, _ := ws.Req(sub, f)
	ws.Send("CLOSE", sub)
	out := make([]string, 0, len(evs)+1)
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %d %d %s", ev.ID[:12], ev.Kind, ev.CreatedAt, ev.Content))
	}
	if closed != "" {
		out = append(out, "CLOSED "+closed)
	}
	return out
}

func envInt(t *testing.T, name string, def int) int {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// importEvents writes events to the community as the importer does,
// outside the relay's ingest: a notification on store.HotWindowChannel
// before the first write and after the last.
func (d *diff) importEvents(pool *pgxpool.Pool) {
	ctx := context.Background()
	st := store.New(pool)
	before := make([]float64, len(d.hots))
	for i, r := range d.hots {
		before[i] = r.Metric(d.t, `buzz_hot_window_resets_total{reason="external"}`)
	}
	for i, r := range d.hots {
		require.Eventually(d.t, func() bool {
			// Again until heard: one sent before a LISTEN began is lost.
			require.NoError(d.t, st.NotifyHotWindow(ctx, d.community))
			return r.Metric(d.t, `buzz_hot_window_resets_total{reason="external"}`) > before[i]
		}, 10*time.Second, 50*time.Millisecond, "a relay did not hear the notification")
	}
	now := time.Now().Unix()
	for i := range 5 {
		ev := d.authors[0].Signed(d.t, 1, eventtest.At(now-int64(i)), eventtest.Content("imported "+strconv.Itoa(i)),
			eventtest.Tag("t", words[i%3]))
		tags, err := json.Marshal(ev.Tags)
		require.NoError(d.t, err)
		id, _ := hex.DecodeString(ev.ID)
		pub, _ := hex.DecodeString(ev.PubKey)
		sig, _ := hex.DecodeString(ev.Sig)
		_, err = pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
			VALUES ($1, $2, $3, to_timestamp($4), 1, $5, $6, $7)`, d.community, id, pub, ev.CreatedAt, string(tags), ev.Content, sig)
		require.NoError(d.t, err)
		d.ids = append(d.ids, ev)
	}
	require.NoError(d.t, st.NotifyHotWindow(ctx, d.community))
	d.compare(map[string]any{"kinds": []int{1}, "limit": 10})
}
