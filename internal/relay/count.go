package relay

import (
	"errors"
	"log/slog"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// handleCount answers ["COUNT",id,<filter>…] with the sum of the per-filter
// counts (spec 10 §7.8). COUNT registers nothing and takes no subscription slot.
func (c *conn) handleCount(id string, filters []event.Filter) {
	pubkey, ok := c.identity()
	if !ok {
		c.reply(wire.Closed(id, wire.MsgNotAuthenticated))
		return
	}
	if !c.srv.acquire() {
		c.auditRateLimited()
		c.reply(wire.Closed(id, wire.MsgRateLimited))
		return
	}
	c.goHandler(func() {
		if n, msg := c.count(pubkey, filters); msg != "" {
			c.reply(wire.Closed(id, msg))
		} else {
			c.reply(wire.Count(id, n))
		}
	})
}

// count returns the total, or the CLOSED message that refuses the request.
func (c *conn) count(pubkey string, filters []event.Filter) (int64, string) {
	if read.ExplicitChannels(filters) > read.MaxExplicitChannels {
		return 0, wire.MsgTooManyChannels
	}
	if msg := read.Gate(pubkey, filters, read.SurfaceCount); msg != "" {
		return 0, msg
	}
	for i := range filters {
		if filters[i].Search != nil {
			return 0, wire.MsgSearchInCount
		}
	}
	log := c.log.With(slog.String("pubkey", pubkey))
	sc := read.Scope{CommunityID: c.tenant.CommunityID, Reader: pubkey}
	rd := c.srv.cfg.Reader
	acc, err := rd.Accessible(c.ctx, sc)
	if err != nil {
		log.Error("resolve accessible channels", slog.Any("err", err))
		return 0, wire.MsgDatabaseError
	}
	if requested := requestedChannels(filters); len(requested) > 0 {
		confirmed, err := rd.Confirm(c.ctx, sc, acc, requested)
		if err != nil {
			log.Error("confirm channels", slog.Any("err", err))
			return 0, wire.MsgDatabaseError
		}
		acc = widen(acc, confirmed)
	}
	var total int64
	for i := range filters {
		f := &filters[i]
		if f.MatchesNothing() || !anyAccessible(f.Tags["h"], acc) {
			continue
		}
		n, err := rd.Count(c.ctx, sc, acc, f)
		if errors.Is(err, read.ErrCountTooBroad) {
			return 0, wire.MsgCountTooBroad
		}
		if err != nil {
			log.Error("count", slog.Any("err", err))
			return 0, wire.MsgDatabaseError
		}
		total += n
	}
	return total, ""
}

// anyAccessible reports whether a filter's "#h" (when it has one) names an
// accessible channel; a filter without "#h" always passes.
func anyAccessible(hs []string, acc *read.Access) bool {
	if len(hs) == 0 {
		return true
	}
	for _, h := range hs {
		if acc.Has(h) {
			return true
		}
	}
	return false
}
