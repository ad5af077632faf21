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
	return quotaRefusal(s.cfg.Admission.Charge(ctx, callCharge(t, pubkey)))
}

// refusedCall is the 429 of a signer this process already knows to be past
// its api_calls quota for the rest of the window, told before the NIP-98
// replay row is written: a flood of calls from an exhausted key then costs
// a signature check and a map lookup each, and nothing in PostgreSQL or
// Redis. It charges nothing; a call it lets through pays in chargeCall.
func (s *Server) refusedCall(t tenant.Tenant, pubkey string) error {
	return quotaRefusal(s.cfg.Admission.Refused(callCharge(t, pubkey)))
}

func callCharge(t tenant.Tenant, pubkey string) admission.Charge {
	return admission.Charge{Limit: admission.APICalls, CommunityID: t.CommunityID, Pubkey: pubkey, Transport: "http"}
}

func quotaRefusal(d admission.Decision) error {
	if d.Allowed {
		return nil
	}
	ae := refuse(http.StatusTooManyRequests, wire.QuotaExceeded(d.RetryAfter))
	ae.retryAfter = d.RetryAfter
	return ae
}
