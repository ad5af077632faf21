package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// The operator-listener registration API (docs/PROTOCOL.md §15.3): a configured
// listener registers, renews and removes the target pubkeys it wants
// mention notifications for. The route is deployment-wide: no community is
// bound from the Host header, and the NIP-98 u tag must name the canonical
// RELAY_OPERATOR_API_ORIGIN.

// ListenerRegistry stores operator-listener registrations.
type ListenerRegistry interface {
	// ListenerRegister inserts or renews (listener, target) rows.
	ListenerRegister(ctx context.Context, listener string, targets []string) error
	// ListenerUnregister deletes them; deleting nothing is fine.
	ListenerUnregister(ctx context.Context, listener string, targets []string) error
}

// The route's texts (docs/PROTOCOL.md §15.3).
const (
	operatorPath           = "/operator/listener/pubkeys"
	msgPayloadRequired     = "NIP-98: missing payload tag"
	msgNotListener         = "actor not authorized: not a configured operator listener"
	msgListenerJSON        = "invalid operator-listener pubkeys JSON: "
	msgListenerCount       = "pubkeys must contain between 1 and 1000 entries"
	msgListenerPubkey      = "pubkeys must contain 64-char hex public keys"
	maxListenerRegistrants = 1000
)

// operatorPubkeys serves POST and DELETE /operator/listener/pubkeys.
func (s *Server) operatorPubkeys(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodDelete {
		w.Header().Set("Allow", "POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	ctx := r.Context()
	err := s.registerTargets(ctx, w, r)
	if err != nil {
		s.writeFailure(w, r, err)
		return
	}
	writeRaw(w, http.StatusOK, json.RawMessage(`{}`))
}

func (s *Server) registerTargets(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	registry := s.cfg.Listeners
	if s.cfg.Settings.OperatorAPIOrigin == "" || registry == nil { // 1
		return errors.New("RELAY_OPERATOR_API_ORIGIN is not set")
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	signer, err := s.authenticateOperator(ctx, r, body) // 2, 3
	if err != nil {
		return err
	}
	if !s.listeners[signer] { // 4
		return refuse(http.StatusForbidden, msgNotListener)
	}
	targets, err := parseTargets(body) // 5
	if err != nil {
		return err
	}
	if r.Method == http.MethodPost { // 6
		err = registry.ListenerRegister(ctx, signer, targets)
	} else {
		err = registry.ListenerUnregister(ctx, signer, targets)
	}
	if err != nil {
		return fmt.Errorf("operator listener %s: %w", strings.ToLower(r.Method), err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "operator-listener registrations changed",
		slog.String("listener", signer), slog.String("method", r.Method), slog.Int("pubkeys", len(targets)))
	return nil
}

// authenticateOperator verifies the NIP-98 token against the canonical
// origin, requires its payload tag, and spends its id in the deployment
// community's replay namespace. X-Pubkey is never accepted here.
func (s *Server) authenticateOperator(ctx context.Context, r *http.Request, body []byte) (string, error) {
	origin, err := url.Parse(s.cfg.Settings.OperatorAPIOrigin)
	if err != nil {
		return "", fmt.Errorf("RELAY_OPERATOR_API_ORIGIN: %w", err)
	}
	m := s.cfg.Metrics
	m.AuthAttempts.WithLabelValues("nip98").Inc()
	ev, err := auth.VerifyNIP98(auth.NIP98Request{
		Header: r.Header.Get("Authorization"), Method: r.Method, Path: operatorPath, Body: body,
		TenantHost: tenant.Normalize(origin.Host), Secure: origin.Scheme == "https", Now: s.now(),
	})
	if err != nil {
		m.AuthFailures.WithLabelValues("nip98_invalid").Inc()
		var ne *auth.NIP98Error
		if errors.As(err, &ne) {
			return "", refuse(http.StatusUnauthorized, ne.Message)
		}
		return "", fmt.Errorf("verify NIP-98: %w", err)
	}
	if ev.Tags.First("payload") == nil {
		m.AuthFailures.WithLabelValues("nip98_invalid").Inc()
		return "", refuse(http.StatusUnauthorized, msgPayloadRequired)
	}
	deployment, err := s.cfg.Resolver.Resolve(ctx, s.cfg.Settings.RelayHost)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "NIP-98 replay check failed: no deployment community",
			slog.String("host", s.cfg.Settings.RelayHost))
		return "", refuse(http.StatusUnauthorized, auth.MsgNIP98ReplayUnavailable)
	}
	fresh, err := s.cfg.Replay.NIP98Use(ctx, deployment.CommunityID, ev.ID)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "NIP-98 replay check failed", slog.Any("err", err))
		return "", refuse(http.StatusUnauthorized, auth.MsgNIP98ReplayUnavailable)
	}
	if !fresh {
		m.AuthFailures.WithLabelValues("nip98_replay").Inc()
		return "", refuse(http.StatusUnauthorized, auth.MsgNIP98Replay)
	}
	return ev.PubKey, nil
}

// parseTargets reads {"pubkeys":[…]}: 1–1000 64-hex entries, lowercased
// and de-duplicated in order; unknown fields are ignored.
func parseTargets(body []byte) ([]string, error) {
	var req struct {
		Pubkeys *[]string `json:"pubkeys"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, refuse(http.StatusBadRequest, msgListenerJSON+err.Error())
	}
	if req.Pubkeys == nil {
		return nil, refuse(http.StatusBadRequest, msgListenerJSON+"missing field `pubkeys`")
	}
	pubkeys := *req.Pubkeys
	if n := len(pubkeys); n < 1 || n > maxListenerRegistrants {
		return nil, refuse(http.StatusBadRequest, msgListenerCount)
	}
	seen := make(map[string]bool, len(pubkeys))
	out := make([]string, 0, len(pubkeys))
	for _, p := range pubkeys {
		if !event.IsHexAnyCase64(p) {
			return nil, refuse(http.StatusBadRequest, msgListenerPubkey)
		}
		p = strings.ToLower(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}
