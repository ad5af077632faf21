package httpapi

import (
	"context"
	"net/http"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wire"
)

// chargeCall charges a bridge call (POST /events, /query, /count) to its
// signer's api_calls quota once the signer is known, before the route
// parses the body (docs/OPERATIONS.md "Per-user quotas"): past it, a 429
// with Retry-After. POST /events also pays the messages quota in the
// pipeline.
func (s *Server) chargeCall(ctx context.Context, t tenant.Tenant, pubkey string) error {
	d := s.cfg.Admission.Charge(ctx, admission.Charge{
		Limit: admission.APICalls, CommunityID: t.CommunityID, Pubkey: pubkey, Transport: "http",
	})
	if d.Allowed {
		return nil
	}
	ae := refuse(http.StatusTooManyRequests, wire.QuotaExceeded(d.RetryAfter))
	ae.retryAfter = d.RetryAfter
	return ae
}
