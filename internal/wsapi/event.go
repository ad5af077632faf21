package wsapi

import (
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Messages of the WebSocket door (docs/PROTOCOL.md §1.1, W2 and W3).
const (
	rejectAuth         = "auth"
	rejectInvalid      = "invalid"
	rejectRateLimited  = "rate-limited"
	transportWebSocket = "ws"
)

// handleEvent runs the WebSocket door's checks W1–W3, then hands the event
// to the Submitter. The pipeline fans the event out to this connection's
// subscriptions through Broadcast before it returns, so the OK is queued
// after the event's EVENT frames on this connection.
func (c *conn) handleEvent(ev event.Event) {
	pubkey, ok := c.identity()
	if !ok {
		c.rejected(rejectAuth)
		c.reply(wire.OK(ev.ID, false, wire.MsgNotAuthenticated))
		return
	}
	if msg := c.chargeFrame(pubkey); msg != "" {
		c.rejected(rejectRateLimited)
		c.reply(wire.OK(ev.ID, false, msg))
		return
	}
	if !c.srv.acquire() {
		c.auditRateLimited()
		c.reply(wire.OK(ev.ID, false, wire.MsgRateLimited))
		return
	}
	c.goHandler(func() {
		if ev.Kind == event.KindAuth {
			c.rejected(rejectInvalid)
			c.reply(wire.OK(ev.ID, false, wire.MsgAuthViaEvent))
			return
		}
		if ev.PubKey != pubkey && ev.Kind != event.KindGiftWrap {
			c.rejected(rejectInvalid)
			c.reply(wire.OK(ev.ID, false, wire.MsgPubkeyMismatch))
			return
		}
		res := c.srv.cfg.Submitter.Submit(c.ctx, ingest.Request{
			Tenant: c.tenant,
			Author: pubkey,
			Source: ingest.SourceWebSocket,
			Event:  ev,
			Origin: c.id,
		})
		c.reply(wire.OK(ev.ID, res.OK(), res.Message))
		if res.After != nil {
			res.After() // dispatch after the answer: evictions
		}
	})
}

func (c *conn) rejected(reason string) {
	c.srv.m.EventsRejected.WithLabelValues(reason, transportWebSocket).Inc()
}
