package read

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/search"
)

// Search paging (docs/PROTOCOL.md §12.6, §12.7, §12.9). The WebSocket budget is derived
// from the advertised max_limit, never tuned by hand.
const (
	SearchPageSize     = 100
	MaxSearchPages     = (MaxLimit + SearchPageSize - 1) / SearchPageSize
	httpSearchDefault  = 100
	httpSearchMaxLimit = 500
)

// searchOptions are the per-request settings of Engine.searchFilter.
type searchOptions struct {
	// Mode is FullText on WebSocket; the bridge may choose Prefix.
	Mode search.Mode
	// OnePage selects the HTTP bridge's shape: one FTS statement of Page with
	// per_page = the filter's limit (default 100, at most 500). Otherwise the
	// WebSocket loop runs up to MaxSearchPages pages of SearchPageSize until
	// the filter's limit (default and cap MaxLimit) is filled.
	OnePage bool
	Page    int64
	// Seen holds the ids already sent for this request, shared across its
	// filters: a hit in it is skipped and does not count towards the limit,
	// and every accepted hit is added. Nil disables cross-filter dedupe.
	Seen map[string]struct{}
	// ContinueFunc, when set, is asked at every page boundary; false stops
	// the search (a CLOSE arrived).
	ContinueFunc func() bool
	// on, when set, runs every statement in a proved replica snapshot
	// (route.go); nil runs them on the writer.
	on *replica.Session
	// tally, when set, collects the buzz_search_hits_total increments
	// instead of counting them: a replica run's hits count only once it
	// served (route.go), so a doubted run that the writer repeats is not
	// counted twice.
	tally map[hitKey]int
}

// hitKey is one buzz_search_hits_total series.
type hitKey struct{ transport, result string }

// SearchError is a failed FTS statement or hydration. Its message is the log
// line of docs/PROTOCOL.md §12.8; it never contains the search text.
type SearchError struct {
	// Fetch is true for a hydration (batch fetch) failure.
	Fetch bool
	// Page is the FTS page that failed.
	Page int64
	Err  error
}

func (e *SearchError) Error() string {
	if e.Fetch {
		return "NIP-50 batch fetch failed: " + e.Err.Error()
	}
	return "NIP-50 search failed: " + e.Err.Error()
}

func (e *SearchError) Unwrap() error { return e.Err }

// searchText normalises NIP-50 text as the query function does
// (docs/PROTOCOL.md §12.2); "" means the filter is skipped with no SQL.
func searchText(s string) string { return search.NormalizeText(s) }

type stageKey struct{}

// SearchStage reports, inside Config.QueryHookFunc, which search statement is
// about to run: "fts" or "hydrate"; "" for a plain history query.
func SearchStage(ctx context.Context) string {
	s, _ := ctx.Value(stageKey{}).(string)
	return s
}

// searchFilter runs one search filter (docs/PROTOCOL.md §12.6, §12.7): scope from the
// filter's #h and the reader's access, FTS pages through package search,
// one batched hydration per page, then acceptance in rank order — the
// filter's full NIP-01 match, an accessible channel, per-event visibility,
// a live edit target for kind 40003, not already in opt.Seen. Empty text,
// limit 0, kinds [] and a #h with nothing accessible issue no search SQL.
// On failure it returns the rows accepted so far and a *SearchError.
func (e *Engine) searchFilter(ctx context.Context, sc Scope, acc *Access, f *event.Filter, chans []string, named bool, opt searchOptions) (rows []Row, err error) {
	if f.Search == nil || f.MatchesNothing() {
		return nil, nil
	}
	transport := "ws"
	if opt.OnePage {
		transport = "http"
	}
	m := e.cfg.Metrics
	defer func() {
		outcome := "ok"
		switch {
		case err != nil && opt.on != nil:
			return // a replica doubt: the writer's run is the one counted
		case err != nil && (errors.Is(err, context.DeadlineExceeded) || search.IsTimeout(err)):
			outcome = "timeout"
		case err != nil:
			outcome = "error"
		}
		m.Search.Requests.WithLabelValues(transport, outcome).Inc()
	}()
	text := search.NormalizeText(*f.Search)
	limit, perPage, pages := MaxLimit, int64(SearchPageSize), MaxSearchPages
	if opt.OnePage {
		limit, pages = httpSearchDefault, 1
		if f.Limit != nil {
			limit = min(*f.Limit, httpSearchMaxLimit)
		}
		perPage = int64(limit)
	} else if f.Limit != nil {
		limit = min(*f.Limit, MaxLimit)
	}
	if text == "" || limit == 0 {
		return nil, nil
	}
	q := search.Query{Community: sc.CommunityID, Text: text, Kinds: f.Kinds, Since: f.Since, Until: f.Until, Mode: opt.Mode, PerPage: perPage}
	channels := map[string]struct{}{}
	if named {
		if len(chans) == 0 {
			return nil, nil // never widen
		}
		for _, ch := range chans {
			channels[ch] = struct{}{}
		}
		q.Scope = search.Channels(chans)
	} else {
		q.Scope = search.ChannelsOrChannelLess(acc.List())
	}
	for _, a := range f.Authors {
		b, err := hex.DecodeString(a)
		if err == nil && len(b) == 32 {
			q.Authors = append(q.Authors, b)
		}
	}
	if len(f.Authors) > 0 && len(q.Authors) == 0 {
		return nil, nil
	}

	var out []Row
	for page := int64(1); page <= int64(pages); page++ {
		if page > 1 && opt.ContinueFunc != nil && !opt.ContinueFunc() {
			break
		}
		if opt.OnePage {
			q.Page = opt.Page
		} else {
			q.Page = page
		}
		if err := e.hook(ctx, "fts", f); err != nil {
			return out, &SearchError{Page: q.Page, Err: err}
		}
		res, watched, err := e.searchPage(ctx, opt.on, q, transport)
		if err != nil {
			return out, &SearchError{Page: q.Page, Err: err}
		}
		rows, err := e.accept(ctx, opt.on, watched, sc, acc, f, channels, res.Hits, opt.Seen, limit-len(out), transport, opt.tally)
		out = append(out, rows...)
		if err != nil {
			return out, &SearchError{Fetch: true, Page: q.Page, Err: err}
		}
		if len(out) >= limit || int64(len(res.Hits)) < perPage {
			break
		}
	}
	return out, nil
}

func (e *Engine) hook(ctx context.Context, stage string, f *event.Filter) error {
	if h := e.cfg.QueryHookFunc; h != nil {
		return h(context.WithValue(ctx, stageKey{}, stage), f)
	}
	return nil
}

// countHits adds a tally to buzz_search_hits_total.
func (e *Engine) countHits(tally map[hitKey]int) {
	for k, n := range tally {
		e.cfg.Metrics.Search.Hits.WithLabelValues(k.transport, k.result).Add(float64(n))
	}
}

// searchPage returns one page of hits: from the search cache when the
// community's hot window vouches that nothing changed since the same page
// was read (docs/ARCHITECTURE.md "Search cache"), otherwise from one FTS
// run in on, or on the writer when on is nil, kept for the next time when
// the window vouched for it. watched is true when the window was ready
// at the start and had waited for the other processes' acknowledged
// events, so that accept may take the hits' events from it.
func (e *Engine) searchPage(ctx context.Context, on *replica.Session, q search.Query, transport string) (res search.Result, watched bool, err error) {
	if on != nil {
		res, err = e.runSearch(ctx, on, q, transport)
		return res, false, err
	}
	stamp, watched := e.cfg.Hot.Watch(ctx, q.Community)
	var key [32]byte
	if c := e.searchCache; c != nil && !watched {
		c.m.Cache.WithLabelValues("unwatched").Inc()
	} else if c != nil {
		key = q.Key()
		if res, ok := c.get(key, stamp, time.Now().Unix()); ok {
			return res, true, nil
		}
	}
	res, err = e.runSearch(ctx, nil, q, transport)
	if err == nil && watched && e.searchCache != nil && e.cfg.Hot.Unchanged(stamp) {
		e.searchCache.put(key, stamp, res)
	}
	return res, watched, err
}

// runSearch runs one FTS statement in on, or on the writer when on is nil,
// and times it (buzz_search_query_seconds).
func (e *Engine) runSearch(ctx context.Context, on *replica.Session, q search.Query, transport string) (res search.Result, err error) {
	started := time.Now()
	if on != nil {
		res, err = e.replicaSearcher.SearchOn(ctx, on.Querier(), q)
	} else {
		res, err = e.searcher.Search(ctx, q)
	}
	e.cfg.Metrics.Search.QuerySeconds.WithLabelValues(transport).Observe(time.Since(started).Seconds())
	return res, err
}

// accept hydrates one page of hits and returns, in rank order, at most want
// rows that pass the acceptance checks of docs/PROTOCOL.md §12.6. Its
// statements run in on, or on the writer when on is nil. It hydrates the
// hits in rank-ordered chunks, the first of want hits and each next one of
// at least twice the rows still wanted, so a page whose first hits all pass
// reads want rows, not the whole page (docs/PROTOCOL.md §12.6).
func (e *Engine) accept(ctx context.Context, on *replica.Session, watched bool, sc Scope, acc *Access, f *event.Filter, channels map[string]struct{},
	hits []search.Hit, seen map[string]struct{}, want int, transport string, tally map[hitKey]int) ([]Row, error) {
	var out []Row
	m := f.Compile() // a page costs each hit's tags, not tags × values
	chunk := want
	for len(hits) > 0 && len(out) < want {
		n := min(len(hits), chunk)
		rows, err := e.acceptChunk(ctx, on, watched, sc, acc, f, m, channels, hits[:n], seen, want-len(out), transport, tally)
		out = append(out, rows...)
		if err != nil {
			return out, err
		}
		hits = hits[n:]
		chunk = max(2*(want-len(out)), minHydrateChunk)
	}
	return out, nil
}

// minHydrateChunk is the smallest chunk accept hydrates after the first, so
// a page whose hits mostly fail costs few statements.
const minHydrateChunk = 16

// acceptChunk hydrates hits, all of them, and returns at most want of them
// that pass, in rank order.
func (e *Engine) acceptChunk(ctx context.Context, on *replica.Session, watched bool, sc Scope, acc *Access, f *event.Filter, m *event.Matcher, channels map[string]struct{},
	hits []search.Hit, seen map[string]struct{}, want int, transport string, tally map[hitKey]int) ([]Row, error) {
	count := func(result string) {
		if tally != nil {
			tally[hitKey{transport, result}]++
			return
		}
		e.cfg.Metrics.Search.Hits.WithLabelValues(transport, result).Inc()
	}
	if err := e.hook(ctx, "hydrate", f); err != nil {
		return nil, err
	}
	stored, held, err := e.hydrate(ctx, on, watched, sc.CommunityID, hits)
	if err != nil {
		return nil, err
	}
	var targets [][]byte
	for _, st := range stored {
		if st.Event.Kind == event.KindMessageEdit {
			if b, err := hex.DecodeString(editTarget(&st.Event)); err == nil && len(b) == 32 {
				targets = append(targets, b)
			}
		}
	}
	live := map[string]bool{}
	if len(targets) > 0 {
		if on != nil {
			live, err = e.replicaSearcher.LiveIDsOn(ctx, on.Querier(), sc.CommunityID, targets)
		} else {
			live, err = e.searcher.LiveIDs(ctx, sc.CommunityID, targets)
		}
		if err != nil {
			return nil, fmt.Errorf("edit targets: %w", err)
		}
	}
	var out []Row
	for i := range hits {
		st, ok := stored[hits[i].IDHex()]
		switch {
		case !ok: // deleted or gone since the FTS statement
			count("missing")
		case !m.Match(&st.Event, st.Channel):
			count("filter")
		case st.Channel != "" && !acc.Has(st.Channel) && !has(channels, st.Channel):
			count("channel")
		case !visibleTo(sc.Reader, &st.Event):
			count("visibility")
		case st.Event.Kind == event.KindMessageEdit && !live[editTarget(&st.Event)]:
			count("edit_target")
		default:
			if seen != nil {
				if _, dup := seen[st.Event.ID]; dup {
					count("duplicate")
					continue
				}
				seen[st.Event.ID] = struct{}{}
			}
			count("sent")
			js := held[st.Event.ID]
			if js == nil {
				js = st.Event.AppendJSON(nil)
			}
			out = append(out, Row{Event: st.Event, Channel: st.Channel, JSON: js})
			if len(out) == want {
				return out, nil
			}
		}
	}
	return out, nil
}

// hydrate loads the live events of hits, keyed by lowercase hex id: those
// the community's hot window holds from it, when watched (the window was
// ready and caught up when the page was read: what it holds is live, as a
// REQ from it relies on), with their stored JSON in held; the others in
// one statement in on, or on the writer when on is nil.
func (e *Engine) hydrate(ctx context.Context, on *replica.Session, watched bool, community string, hits []search.Hit) (stored map[string]search.Stored, held map[string][]byte, err error) {
	rest := hits
	if watched && on == nil {
		ids := make([]string, len(hits))
		for i := range hits {
			ids[i] = hits[i].IDHex()
		}
		if entries, ok := e.cfg.Hot.Lookup(community, ids, time.Now().Unix()); ok && len(entries) > 0 {
			stored = make(map[string]search.Stored, len(hits))
			held = make(map[string][]byte, len(entries))
			rest = make([]search.Hit, 0, len(hits)-len(entries))
			for i := range hits {
				if en := entries[ids[i]]; en != nil {
					stored[ids[i]] = search.Stored{Event: en.Event, Channel: en.Channel}
					held[ids[i]] = en.JSON
				} else {
					rest = append(rest, hits[i])
				}
			}
			if len(rest) == 0 {
				return stored, held, nil
			}
		}
	}
	var more map[string]search.Stored
	if on != nil {
		more, err = e.replicaSearcher.HydrateOn(ctx, on.Querier(), community, rest)
	} else {
		more, err = e.searcher.Hydrate(ctx, community, rest)
	}
	if err != nil || stored == nil {
		return more, held, err
	}
	for id, st := range more {
		stored[id] = st
	}
	return stored, held, nil
}

// editTarget is the first 64-hex "e" value of an edit, lowercased.
func editTarget(ev *event.Event) string {
	for _, t := range ev.Tags {
		if len(t) > 1 && t[0] == "e" && event.IsHexAnyCase64(t[1]) {
			return strings.ToLower(t[1])
		}
	}
	return ""
}

func has(set map[string]struct{}, k string) bool { _, ok := set[k]; return ok }
