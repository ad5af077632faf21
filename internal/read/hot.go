package read

import (
	"context"
	"slices"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/hot"
)

// fromHot answers one REQ history filter from the hot window when the
// window can prove the answer (docs/ARCHITECTURE.md "Hot window"): the
// rows PostgreSQL would give, in its order, decided by the same
// visibility as its rows (rowFilter.visibleEvent) in the same channel
// scope (channelScope). ok false sends the filter to PostgreSQL.
func (r *Read) fromHot(ctx context.Context, f *event.Filter, maxBytes int) (rows []Row, ok bool, err error) {
	w := r.e.cfg.Hot
	if w == nil || r.req.Surface != SurfaceREQ || r.Search {
		return nil, false, nil
	}
	if hook := r.e.cfg.QueryHookFunc; hook != nil {
		if err := hook(ctx, f); err != nil {
			return nil, false, err
		}
	}
	limit := MaxLimit
	if f.Limit != nil {
		limit = min(*f.Limit, MaxLimit)
	}
	entries, ok := w.Query(ctx, r.req.CommunityID, f, limit, maxBytes, time.Now().Unix(), r.hotKeep(f))
	if !ok {
		return nil, false, nil
	}
	rows = make([]Row, len(entries))
	for i, e := range entries {
		rows[i] = Row{Event: e.Event, Channel: e.Channel, JSON: e.JSON}
	}
	return rows, true, nil
}

// countHot answers one COUNT filter over the WebSocket from the hot window
// when the window holds every event it can match and COUNT(*) is exact
// for it in PostgreSQL (fastPath): then both count the same rows. ok false
// counts in PostgreSQL.
func (r *Read) countHot(ctx context.Context, f *event.Filter) (n int64, ok bool, err error) {
	w := r.e.cfg.Hot
	if w == nil || r.req.Surface != SurfaceCOUNT || !fastPath(r.req.Scope, f) {
		return 0, false, nil
	}
	if hook := r.e.cfg.QueryHookFunc; hook != nil {
		if err := hook(ctx, f); err != nil {
			return 0, false, err
		}
	}
	n, ok = w.Count(ctx, r.req.CommunityID, f, time.Now().Unix(), r.hotKeep(f))
	return n, ok, nil
}

// hotKeep is the reader's visibility of a window entry for f: the same
// channel scope (channelScope) and the same decision (rowFilter.visibleEvent)
// as PostgreSQL's rows get.
func (r *Read) hotKeep(f *event.Filter) func(*hot.Entry) bool {
	chans, named := r.channelScope(f)
	sc, acc := r.req.Scope, r.acc
	rf := newRowFilter(f)
	return func(e *hot.Entry) bool {
		if named && !slices.Contains(chans, e.Channel) {
			return false // a named scope holds its channels only, never a global event
		}
		return rf.visibleEvent(sc, acc, &e.Event, e.Channel)
	}
}
