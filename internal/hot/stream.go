package hot

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// Committed takes a stored event from the committed stream: a commit of
// this process, before its OK and its live fan-out. A window kind is added; a NIP-09 deletion (kind
// 5) takes its e target out when the target is its author's, exactly what
// the deletion did in PostgreSQL; a NIP-29 admin deletion (kind 9005)
// resets the community. Other kinds change nothing the window holds.
func (w *Window) Committed(communityID, channel string, ev *event.Event, js []byte) {
	if w == nil || event.IsEphemeral(ev.Kind) {
		return
	}
	if ev.Kind == event.KindDeleteEvent {
		w.Reset(communityID, "admin_deletion")
		return
	}
	c := w.existing(communityID)
	if c == nil {
		return
	}
	c.changes.Add(1) // before any early return: a stamp covers every kind
	if at, present, ok := ev.Expiration(); present && ok {
		c.mu.Lock()
		if c.expiryKnown && at < c.nextExpiry {
			c.nextExpiry = at
		}
		c.mu.Unlock()
	}
	c.mu.RLock()
	st := c.state
	c.mu.RUnlock()
	if st == cold {
		return // a warm reads what this committed
	}
	var o op
	switch {
	case ev.Kind == event.KindDeletion:
		if t := ev.Tags.First("e"); t != nil {
			// The pipeline takes the target id in either case.
			o.del, o.by = strings.ToLower(t.Value()), ev.PubKey
		} // an a-tag deletion: addressable kinds are not held
		o.add = NewEntry(ev, channel, js)
	case IsWindowKind(ev.Kind):
		o.add = NewEntry(ev, channel, js)
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case warming:
		c.pending = append(c.pending, o)
	case ready:
		w.apply(c, o)
	}
}

// apply is one stream change on a ready window (the caller holds c.mu).
func (w *Window) apply(c *community, o op) {
	if o.del != "" {
		if e := c.ids[o.del]; e != nil && e.Event.PubKey == o.by {
			c.drop(e, false)
			w.events.Add(-1)
			w.bytes.Add(-e.cost())
		}
	}
	if o.add != nil && c.add(o.add) {
		w.events.Add(1)
		w.bytes.Add(o.add.cost())
		n, b := c.trim(w.cfg.Events, w.cfg.Bytes)
		w.events.Add(-int64(n))
		w.bytes.Add(-b)
	}
	w.gauges()
}

// get is the community's window, made (cold) when it has none.
func (w *Window) get(communityID string) *community {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.comms[communityID]
	if c == nil {
		c = newCommunity(communityID)
		w.comms[communityID] = c
	}
	return c
}

// existing is the community's window when it has one.
func (w *Window) existing(communityID string) *community {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.comms[communityID]
}

// Reset makes the community's window cold: what it held is dropped and a
// warm in flight is thrown away. reason labels
// buzz_hot_window_resets_total.
func (w *Window) Reset(communityID, reason string) {
	if w == nil {
		return
	}
	c := w.existing(communityID)
	if c == nil {
		return
	}
	w.m.HotWindow.Resets.WithLabelValues(reason).Inc()
	c.mu.Lock()
	w.resetLocked(c)
	c.mu.Unlock()
	w.gauges()
}

// coldLocked ends a warm that holds nothing yet (the caller holds c.mu).
func (w *Window) coldLocked(c *community) {
	c.state, c.pending = cold, nil
	w.unfollowLocked(c)
}

// unfollowLocked undoes c's Follow, if it has one (the caller holds c.mu).
func (w *Window) unfollowLocked(c *community) {
	if c.followed {
		c.followed = false
		w.cfg.Unfollow(c.id)
	}
}

// resetLocked is Reset with c.mu held.
func (w *Window) resetLocked(c *community) {
	n, b := c.clear()
	c.state = cold
	c.gen++
	w.unfollowLocked(c)
	w.events.Add(-int64(n))
	w.bytes.Add(-b)
}

// Hold resets the community's window and keeps it cold until until: a
// program writing to the community's events outside this process's
// stream (an import) holds it for as long as it writes.
func (w *Window) Hold(communityID string, until time.Time) {
	if w == nil {
		return
	}
	c := w.get(communityID)
	w.m.HotWindow.Resets.WithLabelValues("external").Inc()
	c.mu.Lock()
	c.heldUntil.Store(until.UnixNano())
	w.resetLocked(c)
	c.mu.Unlock()
	w.gauges()
}

// Holds reports whether the community's window is warm or warming and
// would take an event of kind k: the caller then encodes the event once
// for it and for fan-out.
func (w *Window) Holds(communityID string, k int) bool {
	if w == nil || !IsWindowKind(k) {
		return false
	}
	c := w.existing(communityID)
	if c == nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state != cold
}

// ResetAll makes every window cold.
func (w *Window) ResetAll(reason string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.epoch.Add(1)
	comms := make([]*community, 0, len(w.comms))
	for _, c := range w.comms {
		comms = append(comms, c)
	}
	w.mu.Unlock()
	w.m.HotWindow.Resets.WithLabelValues(reason).Inc()
	for _, c := range comms {
		c.mu.Lock()
		w.resetLocked(c)
		c.mu.Unlock()
	}
	w.gauges()
}

// SetEnabled turns answering and warming on or off for every community.
// Turned off, every window is reset: while it is off the caller may miss
// writes it must follow. Turned on, windows warm again on their next
// read.
func (w *Window) SetEnabled(on bool, reason string) {
	if w == nil {
		return
	}
	w.enabled.Store(on)
	if !on {
		w.ResetAll(reason)
	}
	w.onGauge()
}

// onGauge sets buzz_hot_window_on from the two switches.
func (w *Window) onGauge() {
	v := 0.0
	if w.enabled.Load() && w.linked.Load() {
		v = 1
	}
	w.m.HotWindow.On.Set(v)
}

// SetLinked records a gap in the bus that carries other processes'
// commits (down) and its end (up): at a gap every window is reset, since a
// commit may have been missed, and none warms until the bus is whole
// again.
func (w *Window) SetLinked(up bool) {
	if w == nil {
		return
	}
	w.linked.Store(up)
	if !up {
		w.ResetAll("bus_gap")
	}
	w.onGauge()
}

// warm starts a warm of c if it is cold and the window is enabled; at most
// cfg.Communities windows are warm or warming at once, the one read least
// recently reset to make room, at most once per cfg.EvictEvery: until
// then c stays cold and its reads go to PostgreSQL.
func (w *Window) warm(communityID string, c *community) {
	// The epoch is read first: a ResetAll after the check below makes
	// this warm stale.
	epoch := w.epoch.Load()
	if !w.enabled.Load() || !w.linked.Load() {
		return
	}
	w.mu.Lock()
	var victim *community
	live := 0
	for id, o := range w.comms {
		if o == c || id == communityID {
			continue
		}
		o.mu.RLock()
		st := o.state
		o.mu.RUnlock()
		if st == cold {
			continue
		}
		live++
		if victim == nil || o.lastRead.Load() < victim.lastRead.Load() {
			victim = o
		}
	}
	w.mu.Unlock()
	evict := live >= w.cfg.Communities && victim != nil
	c.mu.Lock()
	now := time.Now().UnixNano()
	if c.state != cold || now < c.heldUntil.Load() {
		c.mu.Unlock()
		return
	}
	if evict {
		last := w.lastEvict.Load()
		if now < last+int64(w.cfg.EvictEvery) || !w.lastEvict.CompareAndSwap(last, now) {
			c.mu.Unlock()
			w.m.HotWindow.Warms.WithLabelValues("deferred").Inc()
			return
		}
	}
	c.state = warming
	gen := c.gen
	c.mu.Unlock()
	if evict {
		w.m.HotWindow.Resets.WithLabelValues("communities").Inc()
		victim.mu.Lock()
		w.resetLocked(victim)
		victim.mu.Unlock()
	}
	go w.load(communityID, c, gen, epoch)
}

// load runs the warm read and, unless the community was reset meanwhile,
// makes its window ready: the rows, then the stream changes queued since
// the warm began.
func (w *Window) load(communityID string, c *community, gen, epoch uint64) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.WarmTimeout)
	defer cancel()
	if w.cfg.Follow != nil && !w.follow(ctx, c, gen) {
		return
	}
	// One row more than the window holds: when it comes back, the
	// community has more than the window, and the horizon starts after
	// that row's second, so a second is never half held.
	rows, err := w.cfg.Warm(ctx, communityID, w.cfg.Events+1)
	horizon := int64(math.MinInt64)
	if err == nil && len(rows) > w.cfg.Events {
		horizon = rows[w.cfg.Events].Event.CreatedAt + 1
	}
	// What the events below the horizon carry, read after the rows: any
	// event committed between the two reads is in this one or in the
	// stream changes queued meanwhile, which note what falls below the
	// horizon.
	var older Older
	olderKnown := horizon == math.MinInt64 // nothing is older
	if !olderKnown && w.cfg.Older != nil {
		var complete bool
		var oerr error
		older, complete, oerr = w.cfg.Older(ctx, communityID, horizon, olderRows*w.cfg.Events)
		if oerr != nil {
			w.log.Warn("hot window: what lies below the horizon not read", slog.String("community_id", communityID),
				slog.String("error", oerr.Error()))
		}
		olderKnown = oerr == nil && complete
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stale := w.epoch.Load() != epoch
	if c.gen != gen || stale || c.state != warming {
		if c.gen == gen && c.state == warming {
			w.coldLocked(c)
		}
		return
	}
	if err != nil {
		w.log.Warn("hot window warm failed", slog.String("community_id", communityID), slog.String("error", err.Error()))
		w.m.HotWindow.Warms.WithLabelValues("error").Inc()
		w.coldLocked(c)
		return
	}
	c.horizon = horizon
	if olderKnown {
		c.knowOlder(older, olderCap*w.cfg.Events)
	}
	added := 0
	var bytes int64
	for i := len(rows) - 1; i >= 0; i-- { // oldest first: every insert appends
		e := rows[i]
		if c.add(e) {
			added++
			bytes += e.cost()
		}
	}
	w.events.Add(int64(added))
	w.bytes.Add(bytes)
	c.state = ready
	pending := c.pending
	c.pending = nil
	for _, o := range pending {
		w.apply(c, o)
	}
	n, b := c.trim(w.cfg.Events, w.cfg.Bytes)
	w.events.Add(-int64(n))
	w.bytes.Add(-b)
	w.gauges()
	w.m.HotWindow.Warms.WithLabelValues("ok").Inc()
	w.log.Info("hot window warm", slog.String("community_id", communityID), slog.Int("events", c.all.len()),
		slog.Int64("bytes", c.bytes), slog.Duration("took", time.Since(start)))
}

func (w *Window) gauges() {
	w.m.HotWindow.Events.Set(float64(w.events.Load()))
	w.m.HotWindow.Bytes.Set(float64(w.bytes.Load()))
}

// follow subscribes to the other processes' commits of c before its warm
// read, so that every commit after the read's snapshot reaches the window
// (docs/ARCHITECTURE.md "Hot window"). It reports whether the warm may go
// on: false when the subscription is not confirmed (c goes cold) or c was
// reset meanwhile.
func (w *Window) follow(ctx context.Context, c *community, gen uint64) bool {
	ok := w.cfg.Follow(ctx, c.id)
	c.mu.Lock()
	defer c.mu.Unlock()
	current := c.gen == gen && c.state == warming
	switch {
	case ok && current:
		c.followed = true
		return true
	case ok:
		w.cfg.Unfollow(c.id) // reset meanwhile: nothing to hold
	case current:
		w.m.HotWindow.Warms.WithLabelValues("error").Inc()
		c.state, c.pending = cold, nil
	}
	return false
}
