package ingest

import (
	"context"
	"errors"

	"fmt"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// The audit intents of docs/PROTOCOL.md §13.3 that an event's transaction writes. The
// actor is always the authenticated principal (req.Author), never the
// event's declared author: for relay-signed follow-ups that would be the
// relay key and erase the human behind the action (docs/PROTOCOL.md §13.4).

// auditOn reports whether intents are written (BUZZ_AUDIT_ENABLED).
func (p *Pipeline) auditOn() bool { return p.cfg.AuditEnabled }

// eventIntent is the event_created intent carried by the event insert
// itself, or nil when audit is off.
func (p *Pipeline) eventIntent(req *Request, ev *event.Event, channel string) *store.OutboxIntent {
	if !p.auditOn() {
		return nil
	}
	in := audit.NewEventCreated(req.Tenant.CommunityID, req.Author, ev.ID, ev.Kind, channel)
	return &store.OutboxIntent{DedupeKey: in.DedupeKey, Action: string(in.Action), Actor: in.ActorBytes(), ObjectID: in.ObjectID, Detail: in.Detail}
}

// appendIntent writes one intent inside the write transaction q when audit
// is on.
func (p *Pipeline) appendIntent(ctx context.Context, q pg.Querier, in audit.Intent) error {
	if !p.auditOn() {
		return nil
	}
	if err := audit.Append(ctx, q, in); err != nil {
		return fmt.Errorf("audit %s: %w", in.Action, err)
	}
	return nil
}

// deletedIntent records one event soft-deleted by ev (kind 5 or 9005).
func (p *Pipeline) deletedIntent(ctx context.Context, q pg.Querier, req *Request, target store.EventRef) error {
	ev := &req.Event
	return p.appendIntent(ctx, q, audit.NewEventDeleted(req.Tenant.CommunityID, req.Author, target.ID, target.Kind, target.Channel, ev.ID, ev.Kind))
}

// followUpIntents records the relay-signed events stored with ev.
func (p *Pipeline) followUpIntents(ctx context.Context, w writer, channel string, follow []*event.Event) error {
	for _, fe := range follow {
		fchannel := channel
		if isNotice(fe.Kind) {
			fchannel = ""
		}
		if err := p.appendIntent(ctx, w.q, audit.NewEventCreated(w.cid(), w.req.Author, fe.ID, fe.Kind, fchannel)); err != nil {
			return err
		}
	}
	return nil
}

// memberState is a member's role before a NIP-29 command changed it.
type memberState struct {
	role   string
	active bool
}

// groupTarget is the member whose membership a group command changes.
func groupTarget(ev *event.Event, c groupChange) string {
	switch ev.Kind {
	case event.KindPutUser, event.KindRemoveUser:
		return c.cmd.target
	case event.KindJoinRequest, event.KindLeaveRequest:
		return ev.PubKey
	}
	return ""
}

// groupBefore reads, inside tx and before the command is applied, what the
// group intents need to know about the previous state.
func (p *Pipeline) groupBefore(ctx context.Context, w writer, c groupChange) (memberState, error) {
	target := groupTarget(w.ev(), c)
	if !p.auditOn() || target == "" || c.channel == "" {
		return memberState{}, nil
	}
	role, active, err := w.store().ChannelMemberRole(ctx, w.cid(), c.channel, target)
	if err != nil {
		return memberState{}, fmt.Errorf("role before: %w", err)
	}
	return memberState{role: role, active: active}, nil
}

// groupIntents records what a NIP-29 command changed, after its run.
func (p *Pipeline) groupIntents(ctx context.Context, w writer, c groupChange, before memberState) error {
	if !p.auditOn() {
		return nil
	}
	ev, tx, channel := w.ev(), w.q, c.channel
	cid, actor, g := w.cid(), w.req.Author, &c.cmd
	switch ev.Kind {
	case event.KindCreateGroup:
		if err := p.appendIntent(ctx, tx, audit.NewChannelCreated(cid, actor, channel, g.channelType, g.visibility, ev.ID)); err != nil {
			return err
		}
		return p.appendIntent(ctx, tx, audit.NewMemberAdded(cid, actor, audit.MemberChange{
			Scope: "channel", Channel: channel, Member: ev.PubKey, Role: "owner", EventID: ev.ID}))
	case event.KindEditMetadata:
		return p.appendIntent(ctx, tx, audit.NewChannelUpdated(cid, actor, channel, metaChanges(g.meta), ev.ID))
	case event.KindDeleteGroup:
		return p.appendIntent(ctx, tx, audit.NewChannelDeleted(cid, actor, channel, ev.ID))
	case event.KindPutUser, event.KindJoinRequest:
		target := groupTarget(ev, c)
		role, active, err := store.New(tx).ChannelMemberRole(ctx, cid, channel, target)
		if err != nil {
			return fmt.Errorf("role after: %w", err)
		}
		if !active || (before.active && before.role == role) {
			return nil // nothing changed (a join by a member, a put with the same role)
		}
		prev := ""
		if before.active {
			prev = before.role
		}
		return p.appendIntent(ctx, tx, audit.NewMemberAdded(cid, actor, audit.MemberChange{
			Scope: "channel", Channel: channel, Member: target, Role: role, PreviousRole: prev, EventID: ev.ID}))
	case event.KindRemoveUser, event.KindLeaveRequest:
		if !before.active {
			return nil
		}
		reason := "removed"
		if ev.Kind == event.KindLeaveRequest {
			reason = "left"
		}
		return p.appendIntent(ctx, tx, audit.NewMemberRemoved(cid, actor, audit.MemberChange{
			Scope: "channel", Channel: channel, Member: groupTarget(ev, c), Reason: reason, EventID: ev.ID}))
	}
	return nil
}

// metaChanges names the fields a 9002 sets, never their values.
func metaChanges(m store.ChannelUpdateParams) []string {
	var out []string
	for name, set := range map[string]bool{
		"name": m.Name != nil, "about": m.Description != nil, "topic": m.Topic != nil,
		"purpose": m.Purpose != nil, "visibility": m.Visibility != nil, "archived": m.Archived != nil,
	} {
		if set {
			out = append(out, name)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// countIntentError counts an intent write that failed inside the event's
// transaction (docs/PROTOCOL.md §13.5): buzz_audit_send_errors_total.
func (p *Pipeline) countIntentError(err error) {
	if err == nil || !audit.IsIntentError(err) {
		return
	}
	var r *refusal
	if errors.As(err, &r) {
		return
	}
	p.cfg.Metrics.AuditSendErrors.Inc()
}
