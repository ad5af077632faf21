package read

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/wire"
)

// SearchDeadline bounds a whole search REQ, the statement in flight
// included; when it passes the REQ ends with EOSE (docs/PROTOCOL.md §12.6).
const SearchDeadline = 15 * time.Second

// historyParallelism is how many history queries one REQ runs at once.
const historyParallelism = 4

// Rows executes a read that returns events (REQ, /query) and hands each row
// to emit in filter order, an id already handed over never again; emit
// returning false stops the read without error. A database failure is
// returned; on a search REQ it ends only the failing filter, is logged here
// (never with the search text) and the read goes on, since a relevance
// search never promises a complete page (docs/PROTOCOL.md §12.8).
//
// The request's byte budget (Config.MaxBytes) ends the read, without
// error, before the first event that would take the bytes handed over
// past it (budget.go). A NIP-CW window is handed over whole: a thread
// batch keeps its own budgets, and a channel window or summary recovery
// counts against the request's budget without being cut by it.
func (r *Read) Rows(ctx context.Context, emit func(Row) bool) error {
	dctx, cancel := withDeadline(ctx, r.deadline)
	defer cancel()
	return r.finish(ctx, r.rows(dctx, emit))
}

// rows is Rows under the read's deadline.
func (r *Read) rows(ctx context.Context, emit func(Row) bool) error {
	switch {
	case r.thread:
		return r.threadRows(ctx, emit)
	case r.req.Surface == SurfaceQuery:
		return r.queryRows(ctx, emit)
	case r.Search:
		return r.searchREQ(ctx, r.budget.wrap(-1, emit))
	default:
		return r.history(ctx, emit)
	}
}

// history serves a REQ's stored events, with up to historyParallelism
// queries in flight and the results handed over in filter order.
func (r *Read) history(ctx context.Context, emit func(Row) bool) error {
	type result struct {
		rows []Row
		err  error
		done chan struct{}
	}
	filters := r.req.Filters
	// The read's own share runs one query; each further one in flight
	// needs a share of its own, taken only while one is free and given
	// back once every query has returned.
	parallel := 1
	for parallel < min(historyParallelism, len(filters)) && r.grant.more() {
		parallel++
	}
	qctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for range parallel - 1 {
			r.grant.less()
		}
	}()
	results := make([]result, len(filters))
	r.budget.holdFilters(len(filters))
	slots := make(chan struct{}, parallel)
	for i := range filters {
		results[i].done = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(results[i].done)
			f := &filters[i]
			if r.yieldsNothing(f) {
				return
			}
			select {
			case slots <- struct{}{}:
			case <-qctx.Done():
				results[i].err = qctx.Err()
				return
			}
			defer func() { <-slots }()
			rows, ok, err := r.fromHot(qctx, f, r.budget.fetchCap(i))
			if !ok && err == nil {
				rows, err = r.plain(qctx, f, "", r.budget.fetchCap(i))
			}
			results[i].rows, results[i].err = rows, err
			r.budget.hold(i, results[i].rows)
		}()
	}
	seen := make(map[string]struct{})
	for i := range results {
		res := &results[i]
		select {
		case <-res.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if res.err != nil {
			return fmt.Errorf("read history filter %d: %w", i, res.err)
		}
		if !emitNew(res.rows, seen, r.budget.wrap(i, emit)) {
			return nil
		}
		r.budget.release(i)
	}
	return nil
}

// searchREQ serves a one-shot search REQ (docs/PROTOCOL.md §12.6): each filter's
// accepted hits in rank order, an id sent for an earlier filter neither
// sent again nor counted, all under SearchDeadline.
func (r *Read) searchREQ(ctx context.Context, emit func(Row) bool) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, SearchDeadline)
	defer cancel()
	seen := make(map[string]struct{})
	for i := range r.req.Filters {
		f := &r.req.Filters[i]
		if r.yieldsNothing(f) {
			continue
		}
		chans, named := r.channelScope(f)
		// searchFilter de-duplicates after acceptance through seen.
		rows, err := r.search(ctx, f, chans, named, searchOptions{Seen: seen, ContinueFunc: r.req.ContinueFunc})
		for j := range rows {
			if !emit(rows[j]) {
				return nil
			}
		}
		if err != nil {
			if parent.Err() != nil {
				return parent.Err()
			}
			attrs := []any{slog.String("transport", "ws"), slog.Int("filter", i), slog.Int("text_len", len(*f.Search))}
			var se *SearchError
			if errors.As(err, &se) {
				attrs = append(attrs, slog.Int64("page", se.Page))
			}
			r.log.Warn(err.Error(), attrs...)
			if ctx.Err() != nil {
				break // the REQ deadline passed: EOSE with what was sent
			}
		}
		if r.req.ContinueFunc != nil && !r.req.ContinueFunc() {
			return nil
		}
	}
	return nil
}

// queryRows serves POST /query: each filter through its route
// (docs/PROTOCOL.md §8.4, first match wins), rows de-duplicated across filters except a
// window's own events, which are handed over complete (docs/NIP-CW.md §1).
func (r *Read) queryRows(ctx context.Context, emit func(Row) bool) error {
	seen := make(map[string]struct{})
	window := emit
	emit = r.budget.wrap(-1, emit)
	for i := range r.req.Filters {
		f := &r.req.Filters[i]
		if r.budget.isSpent() {
			return nil // the answer ended at the budget: no further filter is read
		}
		route := routeOf(f)
		if route == routeResolveRoots || route == routeChannelWindow {
			rows, err := r.windowRows(ctx, r.opts[i].window)
			if err != nil {
				return fmt.Errorf("window filter %d: %w", i, err)
			}
			for j := range rows {
				r.budget.charge(len(rows[j].JSON))
				if !window(rows[j]) {
					return nil
				}
			}
			continue
		}
		if r.yieldsNothing(f) {
			continue
		}
		chans, named := r.channelScope(f)
		var (
			rows []Row
			err  error
		)
		switch route {
		case routeSearch:
			if rows, err = r.search(ctx, f, chans, named, parseSearchOptions(f)); err != nil {
				return fmt.Errorf("search filter %d (text length %d): %w", i, len(*f.Search), err)
			}
		case routeLegacyThread:
			tp, perr := parseLegacyThread(f, chans, named)
			if perr != nil {
				return perr
			}
			tp.MaxBytes = r.budget.fetchCap(-1)
			if rows, err = r.e.threadReplies(ctx, r.req.Scope, r.acc, tp); err != nil {
				return fmt.Errorf("thread read filter %d: %w", i, err)
			}
			if tp.IncludeAux {
				if rows, err = r.legacyAux(ctx, tp.Root, rows); err != nil {
					return fmt.Errorf("thread read filter %d: %w", i, err)
				}
			}
		default:
			if rows, err = r.plain(ctx, f, r.opts[i].beforeID, r.budget.fetchCap(-1)); err != nil {
				return fmt.Errorf("query filter %d: %w", i, err)
			}
		}
		if !emitNew(rows, seen, emit) {
			return nil
		}
	}
	return nil
}

// emitNew hands over the rows whose id is not in seen, recording each; it
// reports false when emit asked to stop.
func emitNew(rows []Row, seen map[string]struct{}, emit func(Row) bool) bool {
	for i := range rows {
		if _, dup := seen[rows[i].Event.ID]; dup {
			continue
		}
		if !emit(rows[i]) {
			return false
		}
		seen[rows[i].Event.ID] = struct{}{}
	}
	return true
}

// Count executes a count (COUNT, /count): the per-filter counts summed. A
// filter that matches nothing or names no accessible channel counts 0;
// limit is ignored. It returns a *Refusal when the fallback would need more
// than CountFallbackMaximum candidates, and any other error for a database
// failure.
func (r *Read) Count(ctx context.Context) (int64, error) {
	dctx, cancel := withDeadline(ctx, r.deadline)
	defer cancel()
	n, err := r.count(dctx)
	return n, r.finish(ctx, err)
}

// count is Count under the read's deadline.
func (r *Read) count(ctx context.Context) (int64, error) {
	var total int64
	for i := range r.req.Filters {
		f := &r.req.Filters[i]
		if f.MatchesNothing() {
			continue
		}
		chans, named := r.channelScope(f)
		if named && len(chans) == 0 {
			continue
		}
		n, hit, err := r.countHot(ctx, f)
		if !hit && err == nil {
			n, err = r.e.count(ctx, r.req.Scope, r.acc, f, chans, named)
		}
		if errors.Is(err, errCountTooBroad) {
			return 0, refuse(CodeCountTooBroad, wire.MsgCountTooBroad)
		}
		if err != nil {
			return 0, fmt.Errorf("count filter %d: %w", i, err)
		}
		total += n
	}
	return total, nil
}
