package wsapi

import (
	"time"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/wire"
)

// chargeFrame charges an EVENT, REQ or COUNT frame of an authenticated
// connection to its pubkey's WebSocket quota (docs/OPERATIONS.md "Per-user
// quotas"), on the read loop, before the frame takes a handler permit. It
// returns the refusal text, "" when the frame may go on. AUTH and CLOSE
// are never charged, nor frames before AUTH (they are refused anyway).
//
// A refused frame also quiets the read loop until the quota's window has
// reopened (at most one window): whatever else the client sends is left
// in the socket, where TCP slows the sender, rather than read, parsed and
// refused one frame at a time.
func (c *conn) chargeFrame(pubkey string) string {
	d := c.srv.cfg.Admission.Charge(c.ctx, admission.Charge{
		Limit: admission.WSEvents, CommunityID: c.tenant.CommunityID, Pubkey: pubkey, Transport: transportWebSocket,
	})
	if d.Allowed {
		return ""
	}
	c.quietUntil = time.Now().Add(min(time.Duration(d.RetryAfter)*time.Second, admission.WSEventsWindow))
	return wire.QuotaExceeded(d.RetryAfter)
}

// refuseReq closes a REQ refused before it started. A subscription the
// connection already holds under that id is dropped, so the CLOSED the
// client reads is true of its id.
func (c *conn) refuseReq(id, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.subs[id]; old != nil {
		c.dropLocked(old)
	}
	c.enqueueLocked(wire.Closed(id, msg), false)
}
