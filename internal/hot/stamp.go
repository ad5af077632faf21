package hot

import (
	"context"
	"time"
)

// Stamp marks a moment of one community's stored events as its window
// follows them (docs/ARCHITECTURE.md "Search cache"). A later stamp
// vouches for it (Vouches) when the window has seen no change to those
// events since: no commit of any kind but ephemeral, from this process or
// from another over the bus, no reset (an admin deletion, an ambiguous
// commit, a bus gap, a write by another program, the window turned off or
// evicted), and no NIP-40 expiration passed. A stamp exists only while the
// window is ready, that is while it follows every commit of the community;
// the zero Stamp vouches for nothing.
type Stamp struct {
	c       *community
	gen     uint64
	changes uint64
	// until is the community's next expiration when the stamp was taken:
	// from then on a search may no longer match what it matched.
	until int64
}

// Vouches reports whether cur, a stamp of the same community taken later,
// still vouches for what s was taken over, at now (unix seconds): same
// window, no commit since, and no expiration reached.
func (s Stamp) Vouches(cur Stamp, now int64) bool {
	return s.c != nil && s.c == cur.c && s.gen == cur.gen && s.changes == cur.changes && now < s.until
}

// Watch returns a stamp of the community's stored events, and false when
// its window is not ready to vouch for them: the window is off or cold
// (a cold one starts warming, as a REQ's read does) or still warming, or
// the community's next expiration could not be read. With other
// processes (Config.Barrier) it first waits for every event they
// acknowledged before the call, as Query does; a failed wait gives false.
// The next expiration is read from PostgreSQL (Config.NextExpiry) the
// first time and again each time it has passed; a commit meanwhile
// leaves it unknown until the next Watch.
func (w *Window) Watch(ctx context.Context, communityID string) (Stamp, bool) {
	if w == nil || w.cfg.NextExpiry == nil {
		return Stamp{}, false
	}
	c := w.readyLocked(ctx, communityID, true)
	if c == nil {
		return Stamp{}, false
	}
	s := Stamp{c: c, gen: c.gen, changes: c.changes.Load(), until: c.nextExpiry}
	known := c.expiryKnown
	c.mu.RUnlock()
	now := time.Now().Unix()
	if known && now < s.until {
		return s, true
	}
	next, err := w.cfg.NextExpiry(ctx, communityID)
	if err != nil {
		return Stamp{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != ready || c.gen != s.gen || c.changes.Load() != s.changes {
		return Stamp{}, false // a commit may carry an expiration the read did not see
	}
	c.nextExpiry, c.expiryKnown = next, true
	s.until = next
	return s, now < next
}

// Unchanged reports whether nothing the window follows has changed in the
// stamp's community since Watch gave it: the window is still ready, has
// not been reset, has taken no commit, and no expiration was reached. A
// change counts from the moment it is given to Committed, which is before
// its OK (this process) or before the bus barrier returns (another
// process), so nothing a client was told is stored can be missing from
// what an unchanged stamp vouches for.
func (w *Window) Unchanged(s Stamp) bool {
	if w == nil || s.c == nil {
		return false
	}
	c := s.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state == ready && s.Vouches(Stamp{c: c, gen: c.gen, changes: c.changes.Load()}, time.Now().Unix())
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
