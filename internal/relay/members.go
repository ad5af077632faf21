package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/wire"
)

// Run runs the background loops: with RequireRelayMembership, the relay
// membership of every authenticated connection is re-checked every
// MembershipRecheck and connections whose row is gone are closed (spec 10
// §2.5). It returns nil when ctx ends; call it once.
func (s *Server) Run(ctx context.Context) error {
	if !s.cfg.RequireRelayMembership || s.cfg.Members == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.cfg.MembershipRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.recheckMembers(ctx)
		}
	}
}

type memberKey struct{ community, pubkey string }

// recheckMembers checks each authenticated (community, pubkey) once. A
// lookup error keeps the connection: it is retried at the next tick.
func (s *Server) recheckMembers(ctx context.Context) {
	groups := make(map[memberKey][]*conn)
	for _, c := range s.snapshot() {
		if pk, ok := c.identity(); ok {
			k := memberKey{c.tenant.CommunityID, pk}
			groups[k] = append(groups[k], c)
		}
	}
	for k, conns := range groups {
		if ctx.Err() != nil {
			return
		}
		ok, err := s.cfg.Members.IsRelayMember(ctx, k.community, k.pubkey)
		if err != nil {
			s.log.Error("relay membership recheck failed", slog.String("pubkey", k.pubkey), slog.Any("err", err))
			continue
		}
		if !ok {
			for _, c := range conns {
				c.revokeMembership()
			}
		}
	}
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
