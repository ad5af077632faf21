package httpapi

import (
	"strings"

	"github.com/buzz-relay/buzz/internal/auth"
)

// auditAuthFailure reports a refused NIP-98 request of a resolved community.
// actor is set only for a policy refusal of a valid token (docs/PROTOCOL.md §13.4).
func (s *Server) auditAuthFailure(communityID, actor, reason string) {
	if a := s.cfg.Audit; a != nil {
		a.AuthFailure(communityID, actor, "nip98", reason)
	}
}

func (s *Server) auditAuthSuccess(communityID, pubkey string) {
	if a := s.cfg.Audit; a != nil {
		a.AuthSuccess(communityID, pubkey, "nip98")
	}
}

// nip98Reason maps a NIP-98 verification failure to an auth_failure reason.
func nip98Reason(ne *auth.NIP98Error) string {
	if strings.Contains(ne.Message, "timestamp outside") {
		return "expired"
	}
	return "invalid"
}
