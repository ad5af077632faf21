package wsapi

import (
	"sync"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// anyKind marks an index key of a filter without kinds.
const anyKind = -1

// indexKey is one bucket of the subscription index (docs/PROTOCOL.md §7.6). Channel
// subscriptions use (community, channel, kind|anyKind); global ones use
// (community, "", kind, #p value), (community, "", kind, "") or
// (community, "", anyKind, "").
type indexKey struct {
	community string
	channel   string
	kind      int
	p         string
}

type channelKey struct{ community, channel string }

// index finds the subscriptions an event may match without visiting all of
// them. Lock order: conn.mu, then index.mu. Nothing that grows with a
// filter runs under index.mu: keys are computed before (budget.go), and
// a lookup costs the event's tags.
type index struct {
	mu      sync.RWMutex
	buckets map[indexKey]map[*subscription]struct{}
	// byChannel lists the channel subscriptions whose scope holds a channel,
	// for eviction.
	byChannel map[channelKey]map[*subscription]struct{}
}

func newIndex() *index {
	return &index{
		buckets:   make(map[indexKey]map[*subscription]struct{}),
		byChannel: make(map[channelKey]map[*subscription]struct{}),
	}
}

// add indexes sub under the keys and scope already set on it (planSub
// computed them before any lock): the index lock is held only to insert
// them. sub.conn.mu must be held.
func (x *index) add(sub *subscription) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range sub.keys {
		set := x.buckets[k]
		if set == nil {
			set = make(map[*subscription]struct{})
			x.buckets[k] = set
		}
		set[sub] = struct{}{}
	}
	for ch := range sub.channels {
		ck := channelKey{sub.conn.tenant.CommunityID, ch}
		set := x.byChannel[ck]
		if set == nil {
			set = make(map[*subscription]struct{})
			x.byChannel[ck] = set
		}
		set[sub] = struct{}{}
	}
}

// remove drops sub from every bucket. sub.conn.mu must be held.
func (x *index) remove(sub *subscription) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeKeysLocked(sub, sub.keys)
	sub.keys = nil
	for ch := range sub.channels {
		x.removeChannelLocked(sub, ch)
	}
}

// removeChannel drops one channel from sub's scope. sub.conn.mu must be held.
func (x *index) removeChannel(sub *subscription, ch string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var gone, kept []indexKey
	for _, k := range sub.keys {
		if k.channel == ch {
			gone = append(gone, k)
		} else {
			kept = append(kept, k)
		}
	}
	x.removeKeysLocked(sub, gone)
	sub.keys = kept
	x.removeChannelLocked(sub, ch)
}

func (x *index) removeKeysLocked(sub *subscription, keys []indexKey) {
	for _, k := range keys {
		if set := x.buckets[k]; set != nil {
			delete(set, sub)
			if len(set) == 0 {
				delete(x.buckets, k)
			}
		}
	}
}

func (x *index) removeChannelLocked(sub *subscription, ch string) {
	ck := channelKey{sub.conn.tenant.CommunityID, ch}
	if set := x.byChannel[ck]; set != nil {
		delete(set, sub)
		if len(set) == 0 {
			delete(x.byChannel, ck)
		}
	}
}

// candidates returns the subscriptions an event may match: channel
// subscriptions of its channel, or global ones for a channel-less event.
func (x *index) candidates(d ingest.Delivery) []*subscription {
	kind := d.Event.Kind
	keys := []indexKey{
		{community: d.CommunityID, channel: d.Channel, kind: anyKind},
		{community: d.CommunityID, channel: d.Channel, kind: kind},
	}
	if d.Channel == "" {
		var ps map[string]struct{}
		for _, t := range d.Event.Tags {
			if len(t) < 2 || t[0] != "p" || t[1] == "" {
				continue
			}
			if ps == nil {
				ps = make(map[string]struct{})
			}
			if _, dup := ps[t[1]]; !dup { // a repeated p is looked up once
				ps[t[1]] = struct{}{}
				keys = append(keys, indexKey{community: d.CommunityID, kind: kind, p: t[1]})
			}
		}
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []*subscription
	var seen map[*subscription]struct{}
	for _, k := range keys {
		for sub := range x.buckets[k] {
			if seen == nil {
				seen = make(map[*subscription]struct{})
			}
			if _, dup := seen[sub]; !dup {
				seen[sub] = struct{}{}
				out = append(out, sub)
			}
		}
	}
	return out
}

// Broadcast offers a committed or ephemeral event to live subscriptions
// (docs/PROTOCOL.md §7.6): an event with a channel only to channel subscriptions
// whose scope holds it, a channel-less event only to global subscriptions.
// Each recipient is checked at send time (exact filter match, channel
// access, per-event visibility). The subscriptions of the connection the
// event came through (d.Origin) are served before it returns, the others
// by the dispatcher (dispatch.go). It never blocks on a client: frames go
// on bounded queues, and a full queue closes that client instead.
func (s *Server) Broadcast(d ingest.Delivery) {
	if d.Event == nil {
		return
	}
	subs := s.idx.candidates(d)
	sent := 0
	if d.Origin != "" {
		// The event is encoded once, for the first recipient: none when
		// no subscription here takes it (d.JSON is set when it came
		// encoded).
		js := d.JSON
		rest := subs[:0]
		for _, sub := range subs {
			if sub.conn.id != d.Origin {
				rest = append(rest, sub)
			} else if s.deliver(sub, d, &js) {
				sent++
			}
		}
		subs, d.JSON = rest, js
	}
	if len(subs) == 0 {
		s.m.FanoutRecipients.Observe(float64(sent))
		return
	}
	s.push(dispatchJob{d: d, subs: subs, sent: sent})
}

// deliver sends d to sub when it matches and its holder may see it; *js
// is the event's encoding, made here on first use.
func (s *Server) deliver(sub *subscription, d ingest.Delivery, js *[]byte) bool {
	c := sub.conn
	if c.tenant.CommunityID != d.CommunityID {
		return false
	}
	matched := false
	for _, m := range sub.match {
		if m.Match(d.Event, d.Channel) {
			matched = true
			break
		}
	}
	if !matched {
		return false
	}
	pubkey, ok := c.identity()
	if !ok || !s.cfg.Reader.Visible(c.ctx, read.Scope{CommunityID: d.CommunityID, Reader: pubkey}, d.Event, d.Channel) {
		return false
	}
	if *js == nil {
		*js = d.Event.AppendJSON(nil)
	}
	frame := wire.EventFrame(sub.id, *js)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) || !sub.registered {
		return false
	}
	if d.Channel != "" {
		if _, ok := sub.channels[d.Channel]; !ok {
			return false
		}
	}
	return c.enqueueLocked(frame, event.IsEphemeral(d.Event.Kind))
}

// Evict removes channel from the scope of the live channel subscriptions of
// communityID that hold it (docs/PROTOCOL.md §5.5): those of pubkey only, or of
// everyone when pubkey is "". When nonMembersOnly is not nil, only
// subscriptions whose reader it reports true for are touched; it is called
// without locks held and may do I/O. A subscription left with no channel is
// deleted and gets ["CLOSED",id,"restricted: channel access revoked"]; one
// with channels left keeps running silently. It runs after the deliveries
// handed to the dispatcher before it, and returns when done. Safe to call
// concurrently.
func (s *Server) Evict(communityID, channel string, pubkey string, nonMembersOnly func(pubkey string) bool) {
	s.inOrder(func() { s.evict(communityID, channel, pubkey, nonMembersOnly) })
}

func (s *Server) evict(communityID, channel string, pubkey string, nonMembersOnly func(pubkey string) bool) {
	s.idx.mu.RLock()
	var subs []*subscription
	for sub := range s.idx.byChannel[channelKey{communityID, channel}] {
		subs = append(subs, sub)
	}
	s.idx.mu.RUnlock()
	judged := make(map[string]bool)
	for _, sub := range subs {
		reader, ok := sub.conn.identity()
		if !ok || (pubkey != "" && reader != pubkey) {
			continue
		}
		if nonMembersOnly != nil {
			evict, done := judged[reader]
			if !done {
				evict = nonMembersOnly(reader)
				judged[reader] = evict
			}
			if !evict {
				continue
			}
		}
		sub.conn.evict(sub, channel)
	}
}

func (c *conn) evict(sub *subscription, channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) || !sub.registered {
		return
	}
	if _, ok := sub.channels[channel]; !ok {
		return
	}
	before := len(sub.keys)
	c.srv.idx.removeChannel(sub, channel)
	c.indexKeys -= before - len(sub.keys)
	delete(sub.channels, channel)
	c.srv.releaseChannelLocked(sub, channel)
	if len(sub.channels) == 0 {
		c.dropLocked(sub)
		c.enqueueLocked(wire.Closed(sub.id, wire.MsgAccessRevoked), false)
	}
}

func (s *Server) subAdded() {
	s.nsubs.Add(1)
	s.m.SubscriptionsActive.Inc()
}

func (s *Server) subRemoved() {
	s.nsubs.Add(-1)
	s.m.SubscriptionsActive.Dec()
}
