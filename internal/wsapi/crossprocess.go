package wsapi

import (
	"context"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/wire"
)

// The WebSocket side of scale-out (docs/PROTOCOL.md §16.1): which Redis topics a live
// subscription holds, waiting for them before its history, the delivery
// barrier before EOSE, events arriving from other processes, and closing
// the subscriptions a gap in that delivery may have cost events. Every
// function here is a no-op when Config.Bus is nil (a single process).

// CrossProcess is what the server asks of the link to the other relay
// processes; *pubsub.Bus implements it. Events the other processes commit
// come back the other way, through DeliverRemote and LinkChanged.
type CrossProcess interface {
	// Retain takes a reference on topic t and returns a channel closed
	// once Redis has confirmed the SUBSCRIBE (at once when it already had).
	Retain(t pubsub.Topic) <-chan struct{}
	// Release gives back a reference taken by Retain.
	Release(t pubsub.Topic)
	// Barrier returns once every event published before the call has been
	// delivered here, or with an error after its own bound.
	Barrier(ctx context.Context) error
	// ClearPresence deletes the pubkey's presence key in the community.
	ClearPresence(ctx context.Context, community, pubkey string)
}

// interruptSpread is the time over which interrupted subscriptions are
// closed once the link is back, so clients do not all re-query at once.
const interruptSpread = 5 * time.Second

// topicsOf returns the topics a registered live subscription holds: one
// per channel of a channel subscription's scope, or the community's global
// topic (docs/PROTOCOL.md §16.1). c.mu must be held.
func topicsOf(sub *subscription) []pubsub.Topic {
	community := sub.conn.tenant.CommunityID
	if sub.channels == nil {
		return []pubsub.Topic{pubsub.GlobalTopic(community)}
	}
	out := make([]pubsub.Topic, 0, len(sub.channels))
	for ch := range sub.channels {
		out = append(out, pubsub.ChannelTopic(community, ch))
	}
	return out
}

// retainLocked takes sub's topics and returns what its history must wait
// for: the confirmations of the SUBSCRIBEs Redis has not acknowledged yet.
// It also marks sub interrupted when a gap is open. c.mu must be held.
func (s *Server) retainLocked(sub *subscription) []<-chan struct{} {
	bus := s.cfg.Bus
	if bus == nil {
		return nil
	}
	var waits []<-chan struct{}
	for _, t := range topicsOf(sub) {
		waits = append(waits, bus.Retain(t))
	}
	s.gap.markIfOpen(sub)
	return waits
}

// releaseLocked gives back every topic of sub. c.mu must be held.
func (s *Server) releaseLocked(sub *subscription) {
	if bus := s.cfg.Bus; bus != nil {
		for _, t := range topicsOf(sub) {
			bus.Release(t)
		}
	}
}

// releaseChannelLocked gives back the topic of one channel evicted from
// sub's scope. c.mu must be held.
func (s *Server) releaseChannelLocked(sub *subscription, channel string) {
	if bus := s.cfg.Bus; bus != nil {
		bus.Release(pubsub.ChannelTopic(sub.conn.tenant.CommunityID, channel))
	}
}

// awaitTopics returns once every SUBSCRIBE in waits is confirmed, so that
// an event another process commits after the history snapshot is
// delivered live (docs/PROTOCOL.md §16.1). The Bus bounds each wait by 1 s itself.
func awaitTopics(ctx context.Context, waits []<-chan struct{}) {
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
}

// barrier runs the delivery barrier before sub's EOSE when its connection
// holds other live subscriptions (docs/PROTOCOL.md §1.3, §16.2): every
// event acknowledged on another process, or on another connection of this
// one, before this REQ read storage is then queued ahead of the EOSE. The
// Bus gives up after 1 s and counts it; the dispatcher's queue is then
// waited for, as events of other processes reach it through the Bus.
func (c *conn) barrier(sub *subscription) {
	if !c.hasOtherLive(sub) {
		return
	}
	if bus := c.srv.cfg.Bus; bus != nil {
		_ = bus.Barrier(c.ctx) // a timeout or a down link sends EOSE anyway
	}
	c.srv.inOrder(func() {})
}

// hasOtherLive reports whether the connection holds a registered live
// subscription other than sub.
func (c *conn) hasOtherLive(sub *subscription) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, other := range c.subs {
		if other != sub && other.registered {
			return true
		}
	}
	return false
}

// DeliverRemote hands an event published by another process to local
// fan-out, with the community and channel of its topic, never of its tags
// (docs/PROTOCOL.md §16.2). It is the Bus's DeliverFunc: Broadcast never blocks on a
// client.
func (s *Server) DeliverRemote(m pubsub.Message) {
	s.Broadcast(ingest.Delivery{CommunityID: m.Topic.Community, Channel: m.Topic.Channel, Event: m.Event, JSON: m.JSON})
}

// LinkChanged is the Bus's LinkFunc. When a gap in cross-process delivery
// opens, every live subscription, and every one registered until the gap
// closes, is marked interrupted; when it closes, each of them gets
// ["CLOSED",id,"error: live delivery interrupted; resubscribe"], spread
// over 5 s (docs/PROTOCOL.md §16.3). A subscription is never left open after it may have
// silently missed an event.
func (s *Server) LinkChanged(ev pubsub.LinkEvent) {
	if !ev.Up {
		s.gap.open()
		var live []*subscription
		for _, c := range s.snapshot() {
			c.mu.Lock()
			for _, sub := range c.subs {
				if sub.registered {
					live = append(live, sub)
				}
			}
			c.mu.Unlock()
		}
		s.gap.mark(live)
		return
	}
	s.interrupt(s.gap.close())
}

// InterruptCommunity closes, with the interruption message, every live
// subscription of the community registered up to until: another process
// announced that it failed to publish an event of the community then
// (pubsub.OpGap), so they may have missed it. Later ones read their
// history after that commit and hold it already.
func (s *Server) InterruptCommunity(communityID string, until time.Time) {
	var hit []*subscription
	for _, c := range s.snapshot() {
		if c.tenant.CommunityID != communityID {
			continue
		}
		c.mu.Lock()
		for _, sub := range c.subs {
			if sub.registered && !sub.registeredAt.After(until) {
				hit = append(hit, sub)
			}
		}
		c.mu.Unlock()
	}
	s.interrupt(hit)
}

// interrupt closes each of subs that is still live with
// ["CLOSED",id,"error: live delivery interrupted; resubscribe"], spread
// evenly over interruptSpread on a goroutine of its own: every
// interruptTick it closes those whose turn has come, so the spread holds
// however many there are. It stops early once the server has no
// connection left (a shutdown), and never sleeps for subscriptions that
// ended meanwhile.
func (s *Server) interrupt(subs []*subscription) {
	if len(subs) == 0 {
		return
	}
	s.interrupts.Add(1)
	go func() {
		defer s.interrupts.Done()
		start := time.Now()
		tick := time.NewTicker(interruptTick)
		defer tick.Stop()
		n := len(subs)
		for next := 0; ; {
			due := 1 + int(float64(n-1)*float64(time.Since(start))/float64(interruptSpread))
			for ; next < n && next < due; next++ {
				s.interruptOne(subs[next])
			}
			if next >= n || s.Connections() == 0 {
				return
			}
			<-tick.C
		}
	}()
}

// interruptTick is how often interrupt closes the subscriptions due.
const interruptTick = 10 * time.Millisecond

// interruptOne closes sub with the interruption message if it is still live.
func (s *Server) interruptOne(sub *subscription) {
	c := sub.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.currentLocked(sub) && sub.registered {
		c.dropLocked(sub)
		c.enqueueLocked(wire.Closed(sub.id, wire.MsgLiveInterrupted), false)
		s.m.PubSub.InterruptedSubscriptions.Inc()
	}
}

// gapState tracks an open gap in cross-process delivery and the
// subscriptions it touched. Lock order: conn.mu, then gapState.mu.
type gapState struct {
	mu          sync.Mutex
	isOpen      bool
	interrupted map[*subscription]struct{}
}

func (g *gapState) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.isOpen = true
	if g.interrupted == nil {
		g.interrupted = make(map[*subscription]struct{})
	}
}

func (g *gapState) mark(subs []*subscription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.isOpen {
		return // closed meanwhile: the next gap marks anew
	}
	for _, sub := range subs {
		g.interrupted[sub] = struct{}{}
	}
}

func (g *gapState) markIfOpen(sub *subscription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isOpen {
		g.interrupted[sub] = struct{}{}
	}
}

// forget drops sub, which ended, from an open gap: the gap holds only live
// subscriptions, so a long outage with churning clients does not keep
// every ended one (and its connection) in memory.
func (g *gapState) forget(sub *subscription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.interrupted, sub)
}

// close ends the gap and returns the subscriptions it touched.
func (g *gapState) close() []*subscription {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.isOpen = false
	out := make([]*subscription, 0, len(g.interrupted))
	for sub := range g.interrupted {
		out = append(out, sub)
	}
	g.interrupted = nil
	return out
}
