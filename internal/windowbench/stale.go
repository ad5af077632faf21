package windowbench

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
)

// The benchmark's target (b): every page ≤ 100 ms; a page of 1 s or more fails.
const (
	staleTarget = 100 * time.Millisecond
	staleFail   = time.Second
)

// staleReport is one root of the stale-statistics case.
type staleReport struct {
	Root  string      `json:"root"`
	Burst burstReport `json:"burst"`
	// Pages is every page: the head, the walk and the deep cursors.
	Pages     dist    `json:"pages"`
	HeadMs    float64 `json:"head_ms"`
	WalkPages int     `json:"walk_pages"`
	Deep      dist    `json:"deep_cursors"`
	// DeepExecution is EXPLAIN (ANALYZE, TIMING OFF) of the deep cursors'
	// selections, run after the pages.
	DeepExecution dist `json:"deep_execution"`
	DeepPlanning  dist `json:"deep_planning"`
	// Slowest is the slowest page.
	Slowest     slowest `json:"slowest_page"`
	Over100ms   int     `json:"pages_over_100ms"`
	Over1s      int     `json:"pages_over_1s"`
	Unavailable int     `json:"status_503"`
	// Stats are thread_metadata's statistics around the case: rows changed
	// since the last ANALYZE right after the burst, and whether anything
	// (the relay's own analyzer) analyzed it before the case ended.
	ModsSinceAnalyze int64 `json:"thread_metadata_mods_since_analyze"`
	AnalyzedDuring   bool  `json:"thread_metadata_analyzed_during_case"`
	Pass             bool  `json:"pass"`
}

// burstSeconds is the time the benchmark gives the burst.
const burstSeconds = 10

// burstReport is the inserts of one root through the relay.
type burstReport struct {
	Events int `json:"events"`
	// InTime reports whether the burst took at most burstSeconds; the
	// relay's insert rate for one thread decides it, not the benchmark.
	InTime    bool     `json:"within_10s"`
	Conns     int      `json:"conns"`
	Inflight  int      `json:"inflight_per_conn"`
	Seconds   float64  `json:"seconds"`
	PerSecond float64  `json:"events_per_second"`
	Refused   int      `json:"refused"`
	Messages  []string `json:"refused_messages,omitempty"`
	OK        dist     `json:"event_to_ok"`
}

// staleRun is the state the two roots share.
type staleRun struct {
	cfg  Config
	fx   *fixture
	cl   *windowClient
	pool *pgxpool.Pool
	pubs []*publisher
	rng  *rand.Rand
	p    *progress
}

// staleCase turns autovacuum off, then for a new root R2 and for R: a
// burst of replies through the relay, the head page, the walk, the deep
// cursors and the plan check, with no ANALYZE from the benchmark.
func staleCase(ctx context.Context, t *target, cl *windowClient, pool *pgxpool.Pool, fx *fixture, cfg Config,
	rng *rand.Rand, p *progress) ([]*staleReport, []planReport, []string, error) {
	if err := autovacuumOff(ctx, pool); err != nil {
		return nil, nil, nil, err
	}
	s := &staleRun{cfg: cfg, fx: fx, cl: cl, pool: pool, rng: rng, p: p}
	defer func() {
		for _, pub := range s.pubs {
			pub.close()
		}
	}()
	for i := range cfg.conns {
		a := newAuthor("burst-" + strconv.Itoa(i))
		if err := store.New(pool).ChannelMemberUpsert(ctx, fx.communityID, fx.channel, a.pubkey, "member", fx.authors[0].pubkey); err != nil {
			return nil, nil, nil, fmt.Errorf("add burst author: %w", err)
		}
		pub, err := dialPublisher(ctx, t.Addr, benchHost, a)
		if err != nil {
			return nil, nil, nil, err
		}
		s.pubs = append(s.pubs, pub)
	}
	r2, err := s.newRoot(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var (
		reports  []*staleReport
		plans    []planReport
		failures []string
	)
	for _, root := range []struct {
		name  string
		key   window.Cursor
		older []window.Cursor // the root's replies before the burst
	}{{"R2", r2, nil}, {"R", fx.root, fx.replies}} {
		rep, pl, f, err := s.root(ctx, root.name, root.key, root.older)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("stale %s: %w", root.name, err)
		}
		reports, plans, failures = append(reports, rep), append(plans, pl), append(failures, f...)
	}
	return reports, plans, failures, nil
}

// autovacuumOff disables autovacuum on thread_metadata and every events partition.
func autovacuumOff(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'events'::regclass`)
	if err != nil {
		return fmt.Errorf("list events partitions: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list events partitions: %w", err)
	}
	for _, tbl := range append(tables, "thread_metadata") {
		if _, err := pool.Exec(ctx, "ALTER TABLE "+tbl+" SET (autovacuum_enabled = false)"); err != nil {
			return fmt.Errorf("autovacuum off on %s: %w", tbl, err)
		}
	}
	return nil
}

// newRoot publishes R2, a top-level kind 9 of channel C, through the relay.
func (s *staleRun) newRoot(ctx context.Context) (window.Cursor, error) {
	pub := s.pubs[0]
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindStreamMessage,
		Tags: event.Tags{{"h", s.fx.channel}}, Content: content(s.rng, s.cfg.sizes.ContentBytes)}
	if err := pub.author.signEvent(&ev); err != nil {
		return window.Cursor{}, err
	}
	res, err := pub.publish(ctx, []event.Event{ev}, 1)
	if err != nil {
		return window.Cursor{}, fmt.Errorf("publish R2: %w", err)
	}
	if res.accepted != 1 {
		return window.Cursor{}, fmt.Errorf("publish R2: refused: %v", res.refused)
	}
	return window.Cursor{CreatedAt: ev.CreatedAt, ID: ev.ID}, nil
}

// root runs the case for one root whose replies before the burst are older.
func (s *staleRun) root(ctx context.Context, name string, root window.Cursor, older []window.Cursor) (*staleReport, planReport, []string, error) {
	rep := &staleReport{Root: name}
	var failures []string
	fail := func(format string, args ...any) {
		if len(failures) < 10 {
			failures = append(failures, "stale "+name+": "+fmt.Sprintf(format, args...))
		}
	}
	before, err := analyzeStats(ctx, s.pool)
	if err != nil {
		return nil, planReport{}, nil, err
	}
	s.p.logf("stale %s: %d replies through the relay over %d sockets × %d in flight", name, s.cfg.burst, len(s.pubs), s.cfg.inflight)
	burst, keys, err := s.burst(ctx, root.ID)
	if err != nil {
		return nil, planReport{}, nil, err
	}
	rep.Burst = burst
	if burst.Refused > 0 {
		fail("%d of the burst's replies refused: %v", burst.Refused, burst.Messages)
	}
	after, err := analyzeStats(ctx, s.pool)
	if err != nil {
		return nil, planReport{}, nil, err
	}
	rep.ModsSinceAnalyze = after.mods
	newestFirst(keys)
	all := append(slices.Clone(keys), older...)
	newestFirst(all)

	// The pages, at once: head, walk, deep cursors.
	var lat, deepLat []time.Duration
	count := func(pg page, what string) {
		lat = append(lat, pg.Took)
		rep.Slowest.note(pg.Took, what)
		switch {
		case pg.Status == http.StatusServiceUnavailable:
			rep.Unavailable++
			fail("%s: 503 %s", what, pg.Error)
		case pg.Status != http.StatusOK:
			fail("%s: %d %s", what, pg.Status, pg.Error)
		}
		if pg.Took > staleTarget {
			rep.Over100ms++
		}
		if pg.Took >= staleFail {
			rep.Over1s++
		}
	}
	walkPages := s.cfg.burst / pageLimit
	s.p.logf("stale %s: head page, walk of %d pages, %d deep cursors", name, walkPages, s.cfg.deep)
	head, err := s.cl.fetch(ctx, s.fx.channel, root.ID, nil)
	if err != nil {
		return nil, planReport{}, nil, err
	}
	count(head, "head page")
	rep.HeadMs = msOf(head.Took)
	got := slices.Clone(head.Rows)
	next := head.Next
	rep.WalkPages = 1
	for next != nil && rep.WalkPages < walkPages {
		pg, err := s.cl.fetch(ctx, s.fx.channel, root.ID, next)
		if err != nil {
			return nil, planReport{}, nil, err
		}
		count(pg, "walk page "+strconv.Itoa(rep.WalkPages+1))
		got = append(got, pg.Rows...)
		next = pg.Next
		rep.WalkPages++
	}
	if !slices.Equal(got, keys) {
		fail("the walk of %d pages returned %d rows, not the burst's %d replies newest first", rep.WalkPages, len(got), len(keys))
	}
	if older == nil && next != nil {
		fail("the last page of the walk says has_more")
	}
	lo, hi := deepRange(len(all))
	var deep []window.Cursor
	for range s.cfg.deep {
		c := all[lo+s.rng.IntN(hi-lo+1)]
		deep = append(deep, c)
		pg, err := s.cl.fetch(ctx, s.fx.channel, root.ID, &c)
		if err != nil {
			return nil, planReport{}, nil, err
		}
		count(pg, fmt.Sprintf("deep cursor %d:%s", c.CreatedAt, c.ID))
		deepLat = append(deepLat, pg.Took)
	}
	rep.Pages, rep.Deep = distOf(lat), distOf(deepLat)

	// After the pages: the plan check and the deep selections' own cost.
	sh, err := scanShape(ctx, s.pool, s.fx.communityID, selectionRequest(s.fx.channel, root.ID, &deep[0]))
	if err != nil {
		return nil, planReport{}, nil, fmt.Errorf("plan check: %w", err)
	}
	pl := planReport{Case: name + " deep cursor, stale statistics", shape: sh}
	if !sh.OK {
		fail("plan: %s", sh.Why)
	}
	var exec, planning []time.Duration
	for _, c := range deep {
		cost, err := explainPage(ctx, s.pool, s.fx.communityID, selectionRequest(s.fx.channel, root.ID, &c))
		if err != nil {
			return nil, planReport{}, nil, err
		}
		exec, planning = append(exec, cost.Execution), append(planning, cost.Planning)
	}
	rep.DeepExecution, rep.DeepPlanning = distOf(exec), distOf(planning)
	end, err := analyzeStats(ctx, s.pool)
	if err != nil {
		return nil, planReport{}, nil, err
	}
	rep.AnalyzedDuring = end.analyzed != before.analyzed
	if rep.Pages.Max > msOf(staleTarget) {
		fail("slowest page %.1f ms > %s (%d pages over)", rep.Pages.Max, staleTarget, rep.Over100ms)
	}
	if rep.Over1s > 0 {
		fail("%d pages took 1 s or more", rep.Over1s)
	}
	rep.Pass = rep.Over100ms == 0 && rep.Over1s == 0 && rep.Unavailable == 0 && sh.OK && len(failures) == 0
	return rep, pl, failures, nil
}

// phase builds the unsigned replies of one burst phase under root: depth
// 1 replies under the root itself (parents nil), deeper ones under the
// previous phase's replies in turn. Kinds alternate 9 and 40002.
func (s *staleRun) phase(root string, n int, parents []event.Event) []event.Event {
	evs := make([]event.Event, n)
	for j := range evs {
		parent := root
		if len(parents) > 0 {
			parent = parents[j%len(parents)].ID
		}
		kind := event.KindStreamMessage
		if j%2 == 1 {
			kind = event.KindStreamMessage2
		}
		evs[j] = event.Event{Kind: kind, Content: content(s.rng, s.cfg.sizes.ContentBytes),
			Tags: event.Tags{{"h", s.fx.channel}, {"e", root, "", "root"}, {"e", parent, "", "reply"}}}
	}
	return evs
}

// burst publishes cfg.burst replies to root in three phases (depth 1, 2,
// 3; a reply's parent is stored before it is sent), each phase from every
// socket at once, reply j of a phase on socket j % conns. It returns the
// keys of the stored replies.
func (s *staleRun) burst(ctx context.Context, root string) (burstReport, []window.Cursor, error) {
	b := burstReport{Conns: len(s.pubs), Inflight: s.cfg.inflight}
	n := s.cfg.burst
	sizes := []int{(n + 2) / 3, (n + 1) / 3, n / 3}
	var (
		lat     []time.Duration
		all     []event.Event
		parents []event.Event
	)
	start := time.Now()
	for _, size := range sizes {
		phase := s.phase(root, size, parents)
		per := make([][]event.Event, len(s.pubs))
		for j := range phase {
			per[j%len(s.pubs)] = append(per[j%len(s.pubs)], phase[j])
		}
		results := make([]sent, len(s.pubs))
		errs := make([]error, len(s.pubs))
		var wg sync.WaitGroup
		for i, pub := range s.pubs {
			wg.Go(func() { results[i], errs[i] = pub.publish(ctx, per[i], s.cfg.inflight) })
		}
		wg.Wait()
		parents = parents[:0:0]
		for i, r := range results {
			if errs[i] != nil {
				return b, nil, errs[i]
			}
			b.Refused += r.refusals
			for _, m := range r.refused {
				if len(b.Messages) < 5 && !slices.Contains(b.Messages, m) {
					b.Messages = append(b.Messages, m)
				}
			}
			lat = append(lat, r.lat...)
			parents = append(parents, per[i]...)
		}
		all = append(all, parents...)
	}
	took := time.Since(start)
	b.Events, b.Seconds = len(lat), round3(took.Seconds())
	b.PerSecond = round3(float64(len(lat)) / took.Seconds())
	b.InTime = took <= burstSeconds*time.Second
	b.OK = distOf(lat)
	if b.Refused > 0 { // keep only what was stored: the walk compares against it
		keys, err := storedKeys(ctx, s.pool, s.fx.communityID, all)
		return b, keys, err
	}
	keys := make([]window.Cursor, len(all))
	for i, ev := range all {
		keys[i] = window.Cursor{CreatedAt: ev.CreatedAt, ID: ev.ID}
	}
	return b, keys, nil
}

// storedKeys returns the keys of the phases' events that are in events.
func storedKeys(ctx context.Context, pool *pgxpool.Pool, communityID string, evs []event.Event) ([]window.Cursor, error) {
	ids := make([][]byte, len(evs))
	for i, ev := range evs {
		ids[i], _ = hex.DecodeString(ev.ID)
	}
	rows, err := pool.Query(ctx, `SELECT extract(epoch FROM created_at)::bigint, encode(id, 'hex') FROM events
		WHERE community_id = $1 AND id = ANY($2)`, communityID, ids)
	if err != nil {
		return nil, fmt.Errorf("stored burst replies: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (window.Cursor, error) {
		var c window.Cursor
		err := r.Scan(&c.CreatedAt, &c.ID)
		return c, err
	})
}

// tableStats is thread_metadata's analyze state.
type tableStats struct {
	mods     int64
	analyzed string // the last analyze of any origin, as text
}

func analyzeStats(ctx context.Context, pool *pgxpool.Pool) (tableStats, error) {
	var s tableStats
	err := pool.QueryRow(ctx, `SELECT n_mod_since_analyze,
			COALESCE(GREATEST(last_analyze, last_autoanalyze)::text, '')
		FROM pg_stat_user_tables WHERE relname = 'thread_metadata' AND schemaname = current_schema()`).
		Scan(&s.mods, &s.analyzed)
	if err != nil {
		return s, fmt.Errorf("thread_metadata statistics: %w", err)
	}
	return s, nil
}
