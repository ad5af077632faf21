package ingest

import (
	"context"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Per-user admission in the pipeline (docs/OPERATIONS.md "Per-user
// quotas"). Messages are charged here rather than at the WebSocket door,
// so POST /events pays the same quota as EVENT: a flood cannot move to
// the bridge for a larger budget. The charge comes after check (steps
// 1–8), once the signature is verified and the event's pubkey is the
// authenticated one, and is made to the authenticated principal
// (req.Author), so nobody spends another user's quota; a refused event
// costs no write. A channel creation is charged once its tags are valid
// (groups.go), before its transaction.

// admit charges req's author one unit of limit, and refuses the event
// past the quota.
func (p *Pipeline) admit(ctx context.Context, req *Request, limit admission.Limit) error {
	d := p.cfg.Admission.Charge(ctx, admission.Charge{
		Limit: limit, CommunityID: req.Tenant.CommunityID, Pubkey: req.Author, Transport: req.Source.String(),
	})
	if d.Allowed {
		return nil
	}
	return &refusal{Result{Code: RateLimited, Message: wire.QuotaExceeded(d.RetryAfter), RetryAfter: d.RetryAfter}}
}

// countPTags is the number of tags named p, whatever their value.
func countPTags(ev *event.Event) int {
	n := 0
	for _, t := range ev.Tags {
		if len(t) > 0 && t[0] == "p" {
			n++
		}
	}
	return n
}
