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
	chans, named := r.channelScope(f)
	sc, acc := r.req.Scope, r.acc
	rf := newRowFilter(f)
	entries, ok := w.Query(ctx, sc.CommunityID, f, limit, maxBytes, time.Now().Unix(), func(e *hot.Entry) bool {
		if named && !slices.Contains(chans, e.Channel) {
			return false // a named scope holds its channels only, never a global event
		}
		return rf.visibleEvent(sc, acc, &e.Event, e.Channel)
	})
	if !ok {
		return nil, false, nil
	}
	rows = make([]Row, len(entries))
	for i, e := range entries {
		rows[i] = Row{Event: e.Event, Channel: e.Channel, JSON: e.JSON}
	}
	return rows, true, nil
}
