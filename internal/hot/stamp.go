package hot

import "context"

// Stamp marks a moment of one community's stored events as its window
// follows them (docs/ARCHITECTURE.md "Search cache"). Unchanged reports
// whether the window has seen no change to those events since: no commit
// of any kind but ephemeral, from this process or from another over the
// bus, and no reset (an admin deletion, an ambiguous commit, a bus gap, a
// write by another program, the window turned off or evicted). A stamp
// exists only while the window is ready, that is while it follows every
// commit of the community; the zero Stamp is never unchanged.
type Stamp struct {
	c       *community
	gen     uint64
	changes uint64
}

// Watch returns a stamp of the community's stored events, and false when
// its window is not ready to vouch for them: the window is off or cold
// (a cold one starts warming, as a REQ's read does) or still warming. With
// other processes (Config.Barrier) it first waits for every event they
// acknowledged before the call, as Query does; a failed wait gives false.
func (w *Window) Watch(ctx context.Context, communityID string) (Stamp, bool) {
	if w == nil {
		return Stamp{}, false
	}
	c := w.readyLocked(ctx, communityID, true)
	if c == nil {
		return Stamp{}, false
	}
	defer c.mu.RUnlock()
	return Stamp{c: c, gen: c.gen, changes: c.changes.Load()}, true
}

// Unchanged reports whether nothing the window follows has changed in the
// stamp's community since Watch gave it: the window is still ready, has
// not been reset, and has taken no commit. A change counts from the moment
// it is given to Committed, which is before its OK (this process) or
// before the bus barrier returns (another process), so nothing a client
// was told is stored can be missing from what an unchanged stamp vouches
// for.
func (w *Window) Unchanged(s Stamp) bool {
	if w == nil || s.c == nil {
		return false
	}
	c := s.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state == ready && c.gen == s.gen && c.changes.Load() == s.changes
}

// Lookup returns the held, unexpired entries of ids in the community, by
// id, while its window is ready: events the window holds are live in
// PostgreSQL as far as the window knows (docs/ARCHITECTURE.md "Hot
// window"). ok is false when the window is not ready; ids it does not
// hold are absent and are read from PostgreSQL by the caller.
func (w *Window) Lookup(communityID string, ids []string, now int64) (map[string]*Entry, bool) {
	if w == nil {
		return nil, false
	}
	c := w.existing(communityID)
	if c == nil {
		return nil, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state != ready {
		return nil, false
	}
	out := make(map[string]*Entry, len(ids))
	for _, id := range ids {
		if e := c.ids[id]; e != nil && (e.Expires == 0 || e.Expires > now) {
			out[id] = e
		}
	}
	return out, true
}
