package hot

import (
	"container/heap"
	"context"
	"math"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// Servable reports whether the window may answer f at all: a filter that
// names kinds, all of them window kinds, and no ids or search. Any other
// filter could match rows the window does not hold.
func Servable(f *event.Filter) bool {
	if len(f.Kinds) == 0 || len(f.IDs) > 0 || f.Search != nil {
		return false
	}
	for _, k := range f.Kinds {
		if !IsWindowKind(k) {
			return false
		}
	}
	return true
}

// Query answers a REQ filter from the window: the entries keep accepts
// among f's candidates, newest first (created_at descending, id
// ascending), at most limit, ending after the entry whose JSON takes the
// total past maxBytes when it is above 0. keep is the reader's whole
// visibility decision (the filter's exact match, the channel scope,
// per-event visibility); expired entries (now is unix seconds) are never
// offered to it.
//
// ok is false, and the caller reads PostgreSQL, unless the answer is
// provably what PostgreSQL would give: the community's window is ready,
// f is Servable, and the walk ended on its limit or byte bound, on f's
// since at or after the horizon, or at the end of a window that holds
// the whole community. A cold window starts warming. With other
// processes (Config.Barrier), a ready window first waits for every event
// they acknowledged before the call, and a failed wait reads PostgreSQL.
func (w *Window) Query(ctx context.Context, communityID string, f *event.Filter, limit, maxBytes int, now int64, keep func(*Entry) bool) (out []*Entry, ok bool) {
	if w == nil {
		return nil, false
	}
	if limit <= 0 {
		w.m.HotWindow.Reads.WithLabelValues("unservable").Inc()
		return nil, false
	}
	c := w.open(ctx, communityID, f, true)
	if c == nil {
		return nil, false
	}
	defer c.mu.RUnlock()
	out, ok = c.walk(f, limit, maxBytes, now, keep)
	w.proved(ok)
	return out, ok
}

// Count answers a COUNT filter from the window: how many of f's
// candidates keep accepts (keep is, as for Query, the reader's whole
// visibility decision, and expired entries are never offered). ok is
// false, and the caller counts in PostgreSQL, unless the count is
// provably PostgreSQL's: the window is ready, f is Servable, and the
// window holds every event f can match, because it holds the whole
// community or f's since is at or after the horizon. Same wait as
// Query, but a cold window stays cold: REQs warm windows, a COUNT (the
// cheap request a flood repeats) never starts a warm read.
func (w *Window) Count(ctx context.Context, communityID string, f *event.Filter, now int64, keep func(*Entry) bool) (n int64, ok bool) {
	c := w.open(ctx, communityID, f, false)
	if c == nil {
		return 0, false
	}
	defer c.mu.RUnlock()
	if ok = c.holdsAllFrom(f.Since) || c.noOlderMatch(f); ok {
		it := c.candidates(f)
		for e := it.next(); e != nil; e = it.next() {
			if f.Since != nil && e.Event.CreatedAt < *f.Since {
				break
			}
			if inRange(f, e, now) && keep(e) {
				n++
			}
		}
	}
	w.proved(ok)
	return n, ok
}

// open is the community's window, ready and read-locked, for a Servable
// f; nil (counted) when f is not Servable or the window is not ready,
// which starts a warm of a cold one when warm is true. With Config.Barrier it first waits
// for the other processes' acknowledged events.
func (w *Window) open(ctx context.Context, communityID string, f *event.Filter, warm bool) *community {
	if w == nil {
		return nil
	}
	if !Servable(f) {
		w.m.HotWindow.Reads.WithLabelValues("unservable").Inc()
		return nil
	}
	c := w.readyLocked(ctx, communityID, warm)
	if c == nil {
		w.m.HotWindow.Reads.WithLabelValues("cold").Inc()
	}
	return c
}

// readyLocked is the community's window, read-locked, when it is ready;
// nil when it is not, after starting a warm of a cold one when warm is
// true, or when the wait for the other processes' acknowledged events
// (Config.Barrier) failed.
func (w *Window) readyLocked(ctx context.Context, communityID string, warm bool) *community {
	c := w.get(communityID)
	c.lastRead.Store(time.Now().UnixNano())
	if w.cfg.Barrier != nil && w.isReady(c) {
		// Outside the lock: the barrier's events are applied under it.
		if err := w.cfg.Barrier(ctx); err != nil {
			return nil
		}
	}
	c.mu.RLock()
	if c.state != ready {
		st := c.state
		c.mu.RUnlock()
		if st == cold && warm {
			w.warm(communityID, c)
		}
		return nil
	}
	return c
}

// proved counts a walk's outcome.
func (w *Window) proved(ok bool) {
	if ok {
		w.m.HotWindow.Reads.WithLabelValues("hit").Inc()
	} else {
		w.m.HotWindow.Reads.WithLabelValues("beyond_horizon").Inc()
	}
}

// walk is Query on a ready window (the caller holds c.mu for reading).
func (c *community) walk(f *event.Filter, limit, maxBytes int, now int64, keep func(*Entry) bool) ([]*Entry, bool) {
	var out []*Entry
	bytes := 0
	it := c.candidates(f)
	for e := it.next(); e != nil; e = it.next() {
		if f.Since != nil && e.Event.CreatedAt < *f.Since {
			return out, true
		}
		if !inRange(f, e, now) || !keep(e) {
			continue
		}
		out = append(out, e)
		bytes += len(e.JSON)
		if len(out) >= limit || (maxBytes > 0 && bytes > maxBytes) {
			return out, true
		}
	}
	return out, c.holdsAllFrom(f.Since) || c.noOlderMatch(f)
}

// holdsAllFrom reports whether the window holds every live event of a
// window kind from since on (nil: from the beginning): it holds the whole
// community, or since is at or after the horizon.
func (c *community) holdsAllFrom(since *int64) bool {
	return c.horizon == math.MinInt64 || (since != nil && *since >= c.horizon)
}

// inRange reports whether e is within f's until and not expired at now;
// since, and everything else f asks, the caller and keep decide.
func inRange(f *event.Filter, e *Entry, now int64) bool {
	if f.Until != nil && e.Event.CreatedAt > *f.Until {
		return false
	}
	return e.Expires == 0 || e.Expires > now
}

// candidates is the merge, newest first, of the lookup lists of f's most
// selective indexed constraint: its kinds, its authors, or the values of
// one of its indexed tags, whichever lists hold the fewest entries. Every
// entry f can match is in them.
func (c *community) candidates(f *event.Filter) *merge {
	best := make([]*list, 0, len(f.Kinds))
	size := 0
	for _, k := range f.Kinds {
		if l := c.kinds[k]; l != nil {
			best = append(best, l)
			size += l.len()
		}
	}
	consider := func(lists []*list, n int) {
		if n < size {
			best, size = lists, n
		}
	}
	if len(f.Authors) > 0 {
		var lists []*list
		n := 0
		for _, a := range f.Authors {
			if l := c.authors[a]; l != nil {
				lists = append(lists, l)
				n += l.len()
			}
		}
		consider(lists, n)
	}
	for name, values := range f.Tags {
		if len(values) == 0 || !isIndexed(name) {
			continue
		}
		var lists []*list
		n := 0
		for _, v := range values {
			if l := c.tags[tagKey{name[0], v}]; l != nil {
				lists = append(lists, l)
				n += l.len()
			}
		}
		consider(lists, n)
	}
	m := &merge{}
	seen := make(map[*list]bool, len(best))
	for _, l := range best {
		if l.len() > 0 && !seen[l] {
			seen[l] = true
			m.h = append(m.h, cursor{l: l, i: len(l.items) - 1})
		}
	}
	heap.Init(&m.h)
	return m
}

// merge walks several lists newest first, each entry once (an entry is in
// at most one list of a constraint, save a tag repeated with two values of
// the same name, which the last check drops).
type merge struct {
	h    cursors
	last *Entry
}

type cursor struct {
	l *list
	i int
}

type cursors []cursor

func (h cursors) Len() int           { return len(h) }
func (h cursors) Less(i, j int) bool { return less(h[j].l.items[h[j].i], h[i].l.items[h[i].i]) }
func (h cursors) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursors) Push(x any)        { *h = append(*h, x.(cursor)) }
func (h *cursors) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// next is the newest entry not yet returned, nil at the end.
func (m *merge) next() *Entry {
	for len(m.h) > 0 {
		top := &m.h[0]
		e := top.l.items[top.i]
		top.i--
		if top.i < top.l.head {
			heap.Pop(&m.h)
		} else {
			heap.Fix(&m.h, 0)
		}
		if e != m.last {
			m.last = e
			return e
		}
	}
	return nil
}

func (w *Window) isReady(c *community) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state == ready
}
