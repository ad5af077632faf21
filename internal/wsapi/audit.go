package wsapi

import (
	"strings"
)

// limitHandlerPool names the one limiter of docs/PROTOCOL.md §7.4 in audit entries.
const limitHandlerPool = "handler_pool"

// auditAuthFailure reports a refused NIP-42 AUTH. actor is set only for a
// policy refusal of a cryptographically valid, fresh event (docs/PROTOCOL.md §13.4).
func (c *conn) auditAuthFailure(actor, reason string) {
	if a := c.srv.cfg.Audit; a != nil {
		a.AuthFailure(c.tenant.CommunityID, actor, "nip42", reason)
	}
}

// auditRateLimited reports a "rate-limited:" reply of the handler pool.
func (c *conn) auditRateLimited() {
	a := c.srv.cfg.Audit
	if a == nil {
		return
	}
	pubkey, _ := c.identity()
	a.RateLimited(c.tenant.CommunityID, pubkey, limitHandlerPool, "ws")
}

// nip42Reason maps a NIP-42 verification error to an auth_failure reason:
// expired for the clock window, invalid for everything else.
func nip42Reason(err error) string {
	if strings.Contains(err.Error(), "created_at") {
		return "expired"
	}
	return "invalid"
}
