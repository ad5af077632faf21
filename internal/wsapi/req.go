package wsapi

import (
	"errors"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// subscription is one REQ of one connection. Its mutable fields are guarded
// by conn.mu; keys also by index.mu.
type subscription struct {
	conn    *conn
	id      string
	filters []event.Filter
	// channels is the scope of a channel subscription; nil for a global one.
	channels map[string]struct{}
	// search marks a one-shot NIP-50 REQ: never registered in the index.
	search     bool
	closed     bool
	registered bool
	// registeredAt is when it was registered: a gap announced for an
	// earlier time closes it (InterruptCommunity).
	registeredAt time.Time
	// keys, match and bytes are set at registration (planSub): the index
	// keys it holds, its compiled filters (live matching), and the filter
	// bytes it counts against its connection.
	keys  []indexKey
	match []*event.Matcher
	bytes int
}

// handleReq runs step 1 of docs/PROTOCOL.md §7.5 on the read loop, so that
// a later CLOSE or REQ with the same id supersedes this one, then the rest
// in a handler goroutine.
func (c *conn) handleReq(id string, filters []event.Filter) {
	pubkey, ok := c.identity()
	if !ok {
		c.mu.Lock()
		c.enqueueLocked(wire.Notice(wire.MsgAuthBeforeSub), false)
		c.enqueueLocked(wire.Closed(id, wire.MsgNotAuthenticated), false)
		c.mu.Unlock()
		return
	}
	if msg := c.chargeFrame(pubkey); msg != "" {
		c.refuseReq(id, msg)
		return
	}
	if !c.srv.acquire() {
		c.auditRateLimited()
		c.reply(wire.Closed(id, wire.MsgRateLimited))
		return
	}
	c.mu.Lock()
	old := c.subs[id]
	if old == nil && len(c.subs) >= MaxSubscriptions {
		c.enqueueLocked(wire.Closed(id, wire.MsgTooManySubs), false)
		c.mu.Unlock()
		c.srv.releasePermit()
		return
	}
	if old != nil {
		c.dropLocked(old) // replaced silently
	}
	sub := &subscription{conn: c, id: id, filters: filters}
	c.subs[id] = sub
	c.mu.Unlock()
	c.goHandler(func() { c.runReq(sub, pubkey) })
}

// current reports whether sub is still the connection's subscription of its
// id and not closed. c.mu must be held.
func (c *conn) currentLocked(sub *subscription) bool {
	return !sub.closed && c.subs[sub.id] == sub
}

// dropLocked removes sub from the connection and the index. c.mu must be held.
func (c *conn) dropLocked(sub *subscription) {
	sub.closed = true
	if c.subs[sub.id] == sub {
		delete(c.subs, sub.id)
	}
	if sub.registered {
		c.indexKeys -= len(sub.keys)
		c.filterBytes -= sub.bytes
		c.srv.idx.remove(sub)
		c.srv.releaseLocked(sub)
		c.srv.gap.forget(sub)
		sub.registered = false
		c.srv.subRemoved()
	}
}

// closeSub ends sub with ["CLOSED",id,msg] unless a CLOSE or a newer REQ
// already replaced it.
func (c *conn) closeSub(sub *subscription, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) {
		return
	}
	c.dropLocked(sub)
	c.enqueueLocked(wire.Closed(sub.id, msg), false)
}

// sendSub queues frame for sub if it is still current; it reports whether
// the frame was queued.
func (c *conn) sendSub(sub *subscription, frame []byte, ephemeral bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) {
		return false
	}
	return c.enqueueLocked(frame, ephemeral)
}

// runReq is steps 2–6 of docs/PROTOCOL.md §7.5: the read door decides, the
// subscription is registered for live delivery, the history is sent, EOSE.
func (c *conn) runReq(sub *subscription, pubkey string) {
	log := c.log.With(slog.String("pubkey", pubkey), slog.String("sub_id", sub.id))
	current := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.currentLocked(sub)
	}
	rd, err := c.srv.cfg.Reader.Open(c.ctx, read.Request{
		Scope:   read.Scope{CommunityID: c.tenant.CommunityID, Reader: pubkey},
		Surface: read.SurfaceREQ, Filters: sub.filters, Log: log, ContinueFunc: current, Conn: "ws " + c.id,
	})
	if err != nil {
		c.closeSub(sub, c.readFailure(log, err))
		return
	}
	defer rd.Close()
	// What registration adds is computed before any lock: the keys, the
	// compiled filters and the bytes, refused past the subscription cap.
	var p plan
	if !rd.Search {
		var refusal, which string
		if p, refusal, which = c.srv.planSub(sub, rd.Channels); refusal != "" {
			c.srv.m.FilterCapRefusals.WithLabelValues(which).Inc()
			c.closeSub(sub, refusal)
			return
		}
	}

	// Register before reading history, so an event committed meanwhile is
	// delivered live rather than lost.
	c.mu.Lock()
	if !c.currentLocked(sub) {
		c.mu.Unlock()
		return
	}
	sub.search = rd.Search
	var waits []<-chan struct{}
	if !sub.search {
		if refusal, which := c.admitLocked(&p); refusal != "" {
			c.srv.m.FilterCapRefusals.WithLabelValues(which).Inc()
			c.dropLocked(sub)
			c.enqueueLocked(wire.Closed(sub.id, refusal), false)
			c.mu.Unlock()
			return
		}
		sub.channels, sub.keys, sub.match, sub.bytes = p.channels, p.keys, p.match, p.bytes
		c.srv.idx.add(sub)
		sub.registered, sub.registeredAt = true, time.Now()
		c.srv.subAdded()
		waits = c.srv.retainLocked(sub)
	}
	c.mu.Unlock()
	awaitTopics(c.ctx, waits) // another process's commit after the snapshot arrives live

	err = rd.Rows(c.ctx, func(row read.Row) bool {
		return c.sendSub(sub, wire.EventFrame(sub.id, row.JSON), false)
	})
	rd.Close() // the share is the database's: the barrier below waits on Redis
	if err != nil {
		if c.ctx.Err() == nil {
			c.closeSub(sub, c.readFailure(log, err))
		}
		return
	}
	c.barrier(sub)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) {
		return
	}
	c.enqueueLocked(wire.EOSE(sub.id), false)
	if sub.search {
		delete(c.subs, sub.id) // one-shot: done
		sub.closed = true
	}
}

// readFailure returns the CLOSED message of a failed read: the read door's
// refusal as it spelled it, or, logged here, the database error.
func (c *conn) readFailure(log *slog.Logger, err error) string {
	var ref *read.Refusal
	if errors.As(err, &ref) {
		return ref.Reason
	}
	if c.ctx.Err() != nil {
		return wire.MsgDatabaseError // the connection is closing: nobody reads the answer
	}
	log.Error("read failed", slog.Any("err", err))
	return wire.MsgDatabaseError
}
