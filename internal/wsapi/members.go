package wsapi

import (
	"context"
	"errors"
	"log/slog"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
	"github.com/buzz-relay/buzz/internal/wire"
)

// MembershipTestSignals are emitted by the membership service. Tests only.
type MembershipTestSignals struct {
	// Rechecked carries, after each pass, how many (community, pubkey)
	// pairs it looked up.
	Rechecked testsignal.Signal[int]
}

// Init initialises every signal.
func (ts *MembershipTestSignals) Init() { ts.Rechecked.Init() }

// MembershipService revalidates relay membership (docs/PROTOCOL.md §2.5): with
// RequireRelayMembership, the membership of every authenticated connection
// is re-checked every MembershipRecheck, and connections whose row is gone
// are closed like DisconnectMember closes them.
type MembershipService struct {
	service.Base
	s *Server

	TestSignals MembershipTestSignals
}

// NewMembershipService returns the revalidation service of s's
// connections; call Start to run it. One per Server.
func NewMembershipService(s *Server) *MembershipService {
	return &MembershipService{s: s}
}

// Start re-checks every MembershipRecheck until ctx ends or Stop. Without
// RequireRelayMembership (or a MemberChecker) it runs nothing. Safe to
// call twice.
func (m *MembershipService) Start(ctx context.Context) error {
	if !m.s.set.RequireRelayMembership || m.s.cfg.Members == nil {
		return nil
	}
	return m.StartLoop(ctx, func(ctx context.Context) {
		service.Tick(ctx, m.s.set.MembershipRecheck, nil, func(ctx context.Context) {
			n, err := m.runOnce(ctx)
			for _, f := range memberFailures(err) {
				m.s.log.Error("relay membership recheck failed", slog.String("pubkey", f.pubkey), slog.Any("err", f.err))
			}
			m.TestSignals.Rechecked.Signal(n)
		})
	})
}

type memberKey struct{ community, pubkey string }

// memberCheckError is one failed lookup of a pass.
type memberCheckError struct {
	pubkey string
	err    error
}

func (e *memberCheckError) Error() string {
	return "relay membership of " + e.pubkey + ": " + e.err.Error()
}
func (e *memberCheckError) Unwrap() error { return e.err }

// memberFailures splits runOnce's error into its failed lookups.
func memberFailures(err error) []*memberCheckError {
	if err == nil {
		return nil
	}
	var out []*memberCheckError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, memberFailures(e)...)
		}
		return out
	}
	var f *memberCheckError
	if errors.As(err, &f) {
		return []*memberCheckError{f}
	}
	return []*memberCheckError{{err: err}}
}

// runOnce checks each authenticated (community, pubkey) once and closes the
// connections of those no longer relay members. It returns how many pairs
// it looked up and the failed lookups, joined: a lookup error keeps the
// connections, and the pair is retried at the next tick.
func (m *MembershipService) runOnce(ctx context.Context) (int, error) {
	s := m.s
	groups := make(map[memberKey][]*conn)
	for _, c := range s.snapshot() {
		if c.closing.Load() {
			continue // already on its way out: nothing to re-check
		}
		if pk, ok := c.identity(); ok {
			k := memberKey{c.tenant.CommunityID, pk}
			groups[k] = append(groups[k], c)
		}
	}
	var (
		errs   []error
		looked int
	)
	for k, conns := range groups {
		if ctx.Err() != nil {
			break
		}
		looked++
		ok, err := s.cfg.Members.IsRelayMember(ctx, k.community, k.pubkey)
		if err != nil {
			errs = append(errs, &memberCheckError{pubkey: k.pubkey, err: err})
			continue
		}
		if !ok {
			for _, c := range conns {
				c.revokeMembership()
			}
		}
	}
	return looked, errors.Join(errs...)
}

// DisconnectMember closes every connection of pubkey in communityID with
// ["NOTICE","restricted: not a relay member"] then close code 1008. Used
// when a relay member is removed; safe to call for a pubkey with no
// connection.
func (s *Server) DisconnectMember(communityID, pubkey string) {
	for _, c := range s.snapshot() {
		if pk, ok := c.identity(); ok && pk == pubkey && c.tenant.CommunityID == communityID {
			c.revokeMembership()
		}
	}
}

func (c *conn) revokeMembership() {
	if c.closeWith(websocket.StatusPolicyViolation, "not a relay member", wire.Notice(wire.MsgNotRelayMember), false) {
		pk, _ := c.identity()
		c.log.Info("relay membership revoked", slog.String("pubkey", pk))
	}
}
