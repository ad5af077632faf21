package wsapi

import (
	"log/slog"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// handleCount answers ["COUNT",id,<filter>…] with the sum of the per-filter
// counts (docs/PROTOCOL.md §7.8). COUNT registers nothing and takes no subscription slot.
func (c *conn) handleCount(id string, filters []event.Filter) {
	pubkey, ok := c.identity()
	if !ok {
		c.reply(wire.Closed(id, wire.MsgNotAuthenticated))
		return
	}
	if msg := c.chargeFrame(pubkey); msg != "" {
		c.reply(wire.Closed(id, msg))
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
	log := c.log.With(slog.String("pubkey", pubkey))
	rd, err := c.srv.cfg.Reader.Open(c.ctx, read.Request{
		Scope:   read.Scope{CommunityID: c.tenant.CommunityID, Reader: pubkey},
		Surface: read.SurfaceCOUNT, Filters: filters, Log: log, Conn: "ws " + c.id,
	})
	if err != nil {
		return 0, c.readFailure(log, err)
	}
	defer rd.Close()
	n, err := rd.Count(c.ctx)
	if err != nil {
		return 0, c.readFailure(log, err)
	}
	return n, ""
}
