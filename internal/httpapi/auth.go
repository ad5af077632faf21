package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wire"
)

// bridgeRequest is a bridge request that passed every check before the body
// parse: its community, its signer and its body.
type bridgeRequest struct {
	tenant tenant.Tenant
	// pubkey is the authenticated signer, lowercase hex.
	pubkey string
	body   []byte
	// client is the request's client address (Config.WebSocket).
	client string
}

// shareKey names the request's connection for its share of concurrent
// reads: every request of one client address shares one.
func (rq *bridgeRequest) shareKey() string {
	if rq.client == "" {
		return ""
	}
	return "http " + rq.client
}

// routeFunc is the route logic of a bridge route. It returns the 200 body
// (a json.RawMessage is written as is), an *apiError for a refusal, or any
// other error for a 500.
type routeFunc func(ctx context.Context, rq *bridgeRequest) (any, error)

// bridge runs the checks every bridge request passes, in the order of
// docs/PROTOCOL.md §8.1: community from Host (404) → body ≤ 1 MiB (413) → NIP-98 (401) →
// replay (401) → relay membership (403) → the signer's bridge quota (429),
// then the route, which parses the body (400) and does its work. OPTIONS is
// the CORS preflight.
func (s *Server) bridge(route routeFunc) http.Handler {
	return s.bridgeLimited(anyBody, route)
}

// bodyLimit is a bridge route's largest body and the 413 refusal of a
// larger one, given the body's length as far as it is known.
type bodyLimit struct {
	max      int64
	tooLarge func(n int64) *apiError
}

// anyBody is the limit of every bridge route but POST /events.
var anyBody = bodyLimit{max: MaxBodyBytes, tooLarge: func(int64) *apiError {
	return refuse(http.StatusRequestEntityTooLarge, msgBodyTooLarge)
}}

// bridgeLimited is bridge with the body limit of the route.
func (s *Server) bridgeLimited(limit bodyLimit, route routeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			s.bridgePreflight(w, r)
			return
		}
		s.setBridgeCORS(w, r)
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST, OPTIONS")
			writeError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		if !s.enter() {
			s.cfg.Metrics.Reads.HTTPRejections.WithLabelValues("busy").Inc()
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, wire.MsgServerBusy)
			return
		}
		defer s.leave()
		rq, err := s.admit(w, r, limit)
		if err != nil {
			s.writeFailure(w, r, err)
			return
		}
		ctx := auth.WithIdentity(r.Context(), auth.Identity{Pubkey: rq.pubkey})
		out, err := route(ctx, rq)
		if err != nil {
			s.writeFailure(w, r, err)
			return
		}
		if raw, ok := out.(json.RawMessage); ok {
			writeRaw(w, http.StatusOK, raw)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// admit runs the checks before the body parse.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, limit bodyLimit) (*bridgeRequest, error) {
	ctx := r.Context()
	t, err := s.cfg.Resolver.Resolve(ctx, r.Host)
	if err != nil {
		return nil, refuse(http.StatusNotFound, tenant.MsgNoCommunity)
	}
	body, err := readBodyUpTo(w, r, limit)
	if err != nil {
		return nil, err
	}
	pubkey, err := s.authenticate(ctx, r, t, body)
	if err != nil {
		return nil, err
	}
	if err := s.requireMember(ctx, t, pubkey); err != nil {
		return nil, err
	}
	if err := s.chargeCall(ctx, t, pubkey); err != nil {
		return nil, err
	}
	return &bridgeRequest{tenant: t, pubkey: pubkey, body: body, client: s.clientAddr(r)}, nil
}

// readBody reads at most MaxBodyBytes; more is a 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBodyUpTo(w, r, anyBody)
}

// readBodyUpTo reads at most limit.max bytes; more is limit's 413, told
// the Content-Length or, without one, the bytes read before it stopped.
func readBodyUpTo(w http.ResponseWriter, r *http.Request, limit bodyLimit) ([]byte, error) {
	if r.ContentLength > limit.max {
		return nil, limit.tooLarge(r.ContentLength)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit.max))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, limit.tooLarge(limit.max + 1)
	}
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "could not read request body")
	}
	return body, nil
}

// authenticate establishes the signer: NIP-98 followed by the replay
// check, or, only when RequireAuthToken is false and no Authorization is
// sent, the X-Pubkey development shortcut (no replay check). A signer this
// process already knows to be past its bridge-call quota gets refusedCall's
// 429 between the two: its call writes no replay row. It never logs the
// header, the token or the X-Pubkey value.
func (s *Server) authenticate(ctx context.Context, r *http.Request, t tenant.Tenant, body []byte) (string, error) {
	authz := r.Header.Get("Authorization")
	if authz == "" && !s.cfg.Settings.RequireAuthToken {
		if xp := r.Header.Get("X-Pubkey"); xp != "" {
			if !event.IsHexAnyCase64(xp) {
				return "", refuse(http.StatusUnauthorized, msgBadXPubkey)
			}
			return strings.ToLower(xp), nil
		}
	}
	m := s.cfg.Metrics
	m.AuthAttempts.WithLabelValues("nip98").Inc()
	ev, err := auth.VerifyNIP98(auth.NIP98Request{
		Header:     authz,
		Method:     r.Method,
		Path:       r.URL.EscapedPath(),
		RawQuery:   r.URL.RawQuery,
		Body:       body,
		TenantHost: t.Host,
		Secure:     s.cfg.Settings.Secure(),
		Now:        s.now(),
	})
	if err != nil {
		m.AuthFailures.WithLabelValues("nip98_invalid").Inc()
		var ne *auth.NIP98Error
		if errors.As(err, &ne) {
			s.auditAuthFailure(t.CommunityID, "", nip98Reason(ne))
			return "", refuse(http.StatusUnauthorized, ne.Message)
		}
		return "", fmt.Errorf("verify NIP-98: %w", err)
	}
	if err := s.refusedCall(t, ev.PubKey); err != nil {
		return "", err
	}
	fresh, err := s.cfg.Replay.NIP98Use(ctx, t.CommunityID, ev.ID)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "NIP-98 replay check failed",
			slog.String("community", t.Host), slog.Any("err", err))
		return "", refuse(http.StatusUnauthorized, auth.MsgNIP98ReplayUnavailable)
	}
	if !fresh {
		m.AuthFailures.WithLabelValues("nip98_replay").Inc()
		s.auditAuthFailure(t.CommunityID, "", "replay")
		return "", refuse(http.StatusUnauthorized, auth.MsgNIP98Replay)
	}
	if !s.cfg.Settings.RequireRelayMembership {
		s.auditAuthSuccess(t.CommunityID, ev.PubKey)
	}
	return ev.PubKey, nil
}

// requireMember runs the relay-membership gate when it is on
// (docs/PROTOCOL.md §2.5): 403 for a non-member, 500 when the lookup fails.
func (s *Server) requireMember(ctx context.Context, t tenant.Tenant, pubkey string) error {
	if !s.cfg.Settings.RequireRelayMembership {
		return nil
	}
	ok, err := s.cfg.Members.IsRelayMember(ctx, t.CommunityID, pubkey)
	if err != nil {
		return fmt.Errorf("check relay membership: %w", err)
	}
	if !ok {
		s.cfg.Metrics.AuthFailures.WithLabelValues("not_relay_member").Inc()
		s.auditAuthFailure(t.CommunityID, pubkey, "not_relay_member")
		return &apiError{status: http.StatusForbidden, body: errorBody{Error: msgMembershipRequired, Message: msgMembershipDetail}}
	}
	s.auditAuthSuccess(t.CommunityID, pubkey)
	return nil
}
