package wsapi

import (
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// handleAuth answers ["AUTH",<event>] (docs/PROTOCOL.md §7.3). One attempt per
// connection; a database error in the membership gate leaves it pending.
// The event itself is never logged.
func (c *conn) handleAuth(ev event.Event) {
	c.mu.Lock()
	state := c.state
	c.mu.Unlock()
	switch state {
	case authDone:
		c.reply(wire.OK(ev.ID, false, wire.MsgAlreadyAuthed))
		return
	case authFailed:
		c.reply(wire.OK(ev.ID, false, wire.MsgAuthAlreadyFailed))
		return
	}
	c.srv.m.AuthAttempts.WithLabelValues("nip42").Inc()
	err := auth.VerifyNIP42(ev, auth.NIP42Params{
		Challenge:  c.challenge,
		TenantHost: c.tenant.Host,
		Secure:     c.srv.set.Secure(),
		Now:        time.Now(),
	})
	if err != nil {
		c.auditAuthFailure("", nip42Reason(err))
		c.failAuth("nip42_invalid")
		c.log.Debug("auth failed", slog.String("reason", err.Error()))
		c.reply(wire.OK(ev.ID, false, wire.MsgVerification))
		return
	}
	if c.srv.set.RequireRelayMembership {
		ok, err := c.srv.cfg.Members.IsRelayMember(c.ctx, c.tenant.CommunityID, ev.PubKey)
		if err != nil {
			c.log.Error("relay membership lookup failed", slog.String("pubkey", ev.PubKey), slog.Any("err", err))
			c.reply(wire.OK(ev.ID, false, wire.MsgInternal))
			return
		}
		if !ok {
			c.auditAuthFailure(ev.PubKey, "not_relay_member")
			c.failAuth("not_relay_member")
			c.log.Debug("auth failed", slog.String("pubkey", ev.PubKey), slog.String("reason", "not a relay member"))
			c.reply(wire.OK(ev.ID, false, wire.MsgNotRelayMember))
			return
		}
	}
	c.mu.Lock()
	c.state = authDone
	c.pubkey = ev.PubKey
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
	c.enqueueLocked(wire.OK(ev.ID, true, ""), false)
	c.mu.Unlock()
	if a := c.srv.cfg.Audit; a != nil {
		a.AuthSuccess(c.tenant.CommunityID, ev.PubKey, "nip42")
	}
	c.log.Debug("auth succeeded", slog.String("pubkey", ev.PubKey))
}

func (c *conn) failAuth(reason string) {
	c.mu.Lock()
	c.state = authFailed
	c.mu.Unlock()
	c.srv.m.AuthFailures.WithLabelValues(reason).Inc()
}
