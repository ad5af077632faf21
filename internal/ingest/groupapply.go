package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// groupEffect is what the stateful part of step 16 changed.
type groupEffect struct {
	// state re-publishes 39000–39002; notices are the 44100/44101 to send.
	state   bool
	notices []notice
	// deleted is the event a 9005 soft-deletes.
	deleted *store.EventRef
	// after is the after-commit part: forget, evict, created.
	after outcome
}

// apply is the group command in the write transaction: the state change
// under the channel lock and its audit intents, the event, a 9005's
// deletion, then the relay-signed follow-ups and their intents.
func (c groupChange) apply(ctx context.Context, w writer) (outcome, error) {
	before, err := w.p.groupBefore(ctx, w, c)
	if err != nil {
		return outcome{}, err
	}
	eff, err := c.run(ctx, w)
	if err != nil {
		return outcome{}, err
	}
	if err := w.p.groupIntents(ctx, w, c, before); err != nil {
		return outcome{}, err
	}
	if err := w.insertEvent(ctx, c.channel, nil); err != nil {
		return outcome{}, err
	}
	if eff.deleted != nil {
		if err := w.softDelete(ctx, *eff.deleted); err != nil {
			return outcome{}, err
		}
	}
	follow, err := w.followUps(ctx, c.channel, eff.state, eff.notices)
	if err != nil {
		return outcome{}, err
	}
	if err := w.p.followUpIntents(ctx, w, c.channel, follow); err != nil {
		return outcome{}, err
	}
	out := eff.after
	out.channel, out.follow = c.channel, follow
	return out, nil
}

// run is the stateful part of step 16: the rules that read the channel's
// state, under its row lock, and the state change they allow.
func (c groupChange) run(ctx context.Context, w writer) (groupEffect, error) {
	ev, cid, s, g := w.ev(), w.cid(), w.store(), &c.cmd
	if ev.Kind == event.KindCreateGroup {
		return c.create(ctx, w)
	}
	ch, found, err := s.ChannelLock(ctx, cid, c.channel)
	if err != nil {
		return groupEffect{}, fmt.Errorf("lock channel %s: %w", c.channel, err)
	}
	if !found || ch.Deleted {
		switch ev.Kind {
		case event.KindEditMetadata, event.KindDeleteEvent, event.KindDeleteGroup, event.KindJoinRequest:
			return groupEffect{}, invalid("channel not found")
		}
		return groupEffect{}, reject(wire.Restricted, "not a channel member")
	}
	if ch.Archived && (ev.Kind != event.KindEditMetadata || !g.unarchive) { // 15
		return groupEffect{}, invalid("channel is archived")
	}
	actorRole, actorActive, err := s.ChannelMemberRole(ctx, cid, c.channel, ev.PubKey)
	if err != nil {
		return groupEffect{}, fmt.Errorf("actor role: %w", err)
	}
	private := ch.Visibility == "private"
	switch ev.Kind {
	case event.KindPutUser:
		return c.putUser(ctx, w, actorRole)
	case event.KindRemoveUser:
		return c.removeUser(ctx, w, g.target, actorRole, actorActive)
	case event.KindLeaveRequest:
		return c.removeUser(ctx, w, ev.PubKey, actorRole, actorActive)
	case event.KindJoinRequest:
		if actorActive {
			return groupEffect{}, nil // already a member: stored, nothing changes
		}
		if private {
			return groupEffect{}, reject(wire.Restricted, "channel is private")
		}
		if err := s.ChannelMemberUpsert(ctx, cid, c.channel, ev.PubKey, "member", ev.PubKey); err != nil {
			return groupEffect{}, fmt.Errorf("add member: %w", err)
		}
		return groupEffect{state: true, notices: []notice{{kind: event.KindMemberAdded, target: ev.PubKey}},
			after: outcome{forget: []string{ev.PubKey}}}, nil
	case event.KindEditMetadata:
		return c.editMetadata(ctx, w, ch, actorRole, actorActive)
	case event.KindDeleteEvent:
		return c.adminDelete(ctx, w, private, actorRole, actorActive)
	case event.KindDeleteGroup:
		if actorRole != "owner" {
			return groupEffect{}, invalid("only owner can delete group")
		}
		if err := s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: cid, ID: c.channel, Actor: ev.PubKey, Deleted: true}); err != nil {
			return groupEffect{}, fmt.Errorf("delete channel: %w", err)
		}
		if err := s.ChannelStateEventsDelete(ctx, cid, c.channel); err != nil {
			return groupEffect{}, fmt.Errorf("delete channel state events: %w", err)
		}
		return groupEffect{after: outcome{forgetAll: true, evict: eviction{all: true}}}, nil
	}
	return groupEffect{}, nil
}

// create is kind 9007: the channel row, its creator as owner.
func (c groupChange) create(ctx context.Context, w writer) (groupEffect, error) {
	ev, cid, s, g := w.ev(), w.cid(), w.store(), &c.cmd
	if c.chosen {
		exists, err := s.ChannelExists(ctx, cid, c.channel)
		if err != nil {
			return groupEffect{}, fmt.Errorf("channel exists: %w", err)
		}
		if exists {
			return groupEffect{}, conflict(wire.Reason(wire.Duplicate, "channel already exists"))
		}
	}
	err := s.ChannelCreate(ctx, store.ChannelCreateParams{CommunityID: cid, ID: c.channel, Name: g.name,
		Type: g.channelType, Visibility: g.visibility, Description: g.about, CreatedBy: ev.PubKey})
	if errors.Is(err, pg.ErrDuplicate) {
		return groupEffect{}, conflict(wire.Reason(wire.Duplicate, "channel already exists"))
	}
	if err != nil {
		return groupEffect{}, fmt.Errorf("create channel %s: %w", c.channel, err)
	}
	return groupEffect{state: true, notices: []notice{{kind: event.KindMemberAdded, target: ev.PubKey}},
		after: outcome{forgetAll: g.visibility == "open", forget: []string{ev.PubKey}, created: g.channelType}}, nil
}

// editMetadata is kind 9002.
func (c groupChange) editMetadata(ctx context.Context, w writer, ch store.Channel, actorRole string, actorActive bool) (groupEffect, error) {
	ev, cid, s, g := w.ev(), w.cid(), w.store(), &c.cmd
	if g.metaElevated && !elevated(actorRole) {
		return groupEffect{}, invalid("actor not authorized for name/about/archived/visibility/ttl changes")
	}
	if !actorActive {
		return groupEffect{}, invalid("not a member")
	}
	meta := g.meta // a copy: the command is not modified
	meta.CommunityID, meta.ID, meta.Actor = cid, c.channel, ev.PubKey
	if err := s.ChannelUpdate(ctx, meta); err != nil {
		return groupEffect{}, fmt.Errorf("update channel: %w", err)
	}
	eff := groupEffect{state: true}
	if v := meta.Visibility; v != nil && *v != ch.Visibility {
		eff.after.forgetAll = true
		if *v == "private" {
			eff.after.evict.nonMembers = true
		}
	}
	if g.unarchive && ch.Archived {
		members, err := s.ChannelMembers(ctx, cid, c.channel)
		if err != nil {
			return groupEffect{}, fmt.Errorf("members: %w", err)
		}
		for _, m := range members {
			eff.notices = append(eff.notices, notice{kind: event.KindMemberAdded, target: m.Pubkey})
		}
	}
	return eff, nil
}

// putUser is kind 9000.
func (c groupChange) putUser(ctx context.Context, w writer, actorRole string) (groupEffect, error) {
	ev, cid, s, g := w.ev(), w.cid(), w.store(), &c.cmd
	// Granting an elevated role needs an elevated actor in every channel,
	// open ones too: otherwise anyone could self-add as owner of an open
	// channel and delete it (docs/OPERATIONS.md "Channels, roles and
	// policies"). A self-add without a role makes a member.
	if elevated(g.role) && !elevated(actorRole) {
		return groupEffect{}, invalid("only owners/admins may grant elevated roles")
	}
	curRole, curActive, err := s.ChannelMemberRole(ctx, cid, c.channel, g.target)
	if err != nil {
		return groupEffect{}, fmt.Errorf("target role: %w", err)
	}
	role := "member"
	switch {
	case curActive && (!g.hasRole || g.role == curRole):
		role = curRole
	case curActive:
		if !elevated(actorRole) {
			return groupEffect{}, invalid("only owners/admins may change an active member's role")
		}
		if curRole == "owner" {
			if n, err := c.ownerCount(ctx, w); err != nil {
				return groupEffect{}, err
			} else if n <= 1 {
				return groupEffect{}, invalid("cannot demote the last owner — transfer ownership first")
			}
		}
		role = g.role
	case g.hasRole:
		role = g.role
	}
	if g.target != ev.PubKey && !curActive { // third-party add: the target's policy
		policy, owner, err := s.UserAddPolicy(ctx, cid, g.target)
		if err != nil {
			return groupEffect{}, fmt.Errorf("add policy of %s: %w", g.target, err)
		}
		switch policy {
		case "owner_only":
			if owner == "" {
				return groupEffect{}, invalid("policy:owner_only — agent has no owner set")
			}
			if owner != ev.PubKey {
				return groupEffect{}, invalid("policy:owner_only — only the agent owner can add this agent")
			}
		case "nobody":
			return groupEffect{}, invalid("policy:nobody — this agent has disabled external channel additions")
		}
	}
	if err := s.ChannelMemberUpsert(ctx, cid, c.channel, g.target, role, ev.PubKey); err != nil {
		return groupEffect{}, fmt.Errorf("put member %s: %w", g.target, err)
	}
	return groupEffect{state: true, notices: []notice{{kind: event.KindMemberAdded, target: g.target}},
		after: outcome{forget: []string{g.target}}}, nil
}

// removeUser is kinds 9001 (target named by the p tag) and 9022 (the actor).
func (c groupChange) removeUser(ctx context.Context, w writer, target, actorRole string, actorActive bool) (groupEffect, error) {
	ev, cid, s := w.ev(), w.cid(), w.store()
	if target == ev.PubKey {
		if !actorActive {
			return groupEffect{}, invalid("actor is not an active member")
		}
		if actorRole == "owner" {
			if n, err := c.ownerCount(ctx, w); err != nil {
				return groupEffect{}, err
			} else if n <= 1 {
				return groupEffect{}, invalid("cannot remove the last owner")
			}
		}
	} else {
		if !elevated(actorRole) {
			return groupEffect{}, invalid("actor not authorized")
		}
		role, active, err := s.ChannelMemberRole(ctx, cid, c.channel, target)
		if err != nil {
			return groupEffect{}, fmt.Errorf("target role: %w", err)
		}
		if active && role == "owner" {
			if n, err := c.ownerCount(ctx, w); err != nil {
				return groupEffect{}, err
			} else if n <= 1 {
				return groupEffect{}, invalid("cannot remove the last owner")
			}
		}
	}
	if err := s.ChannelMemberRemove(ctx, cid, c.channel, target, ev.PubKey); err != nil {
		return groupEffect{}, fmt.Errorf("remove member %s: %w", target, err)
	}
	return groupEffect{state: true, notices: []notice{{kind: event.KindMemberRemoved, target: target}},
		after: outcome{forget: []string{target}, evict: eviction{pubkey: target}}}, nil
}

// adminDelete is kind 9005: the author, or an owner or admin, deletes an
// event of the channel.
func (c groupChange) adminDelete(ctx context.Context, w writer, private bool, actorRole string, actorActive bool) (groupEffect, error) {
	ev := w.ev()
	ref, err := w.store().EventLookup(ctx, w.cid(), c.cmd.targetEvent)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return groupEffect{}, invalid("target event not found")
	}
	if err != nil {
		return groupEffect{}, fmt.Errorf("look up target %s: %w", c.cmd.targetEvent, err)
	}
	if ref.Channel == "" {
		return groupEffect{}, invalid("target event has no channel")
	}
	if ref.Channel != c.channel {
		return groupEffect{}, invalid("target event belongs to a different channel")
	}
	authorMayPost := ref.PubKey == ev.PubKey && (!private || actorActive)
	if !authorMayPost && !elevated(actorRole) {
		return groupEffect{}, invalid("must be event author or channel owner/admin")
	}
	return groupEffect{deleted: &ref}, nil
}

func (c groupChange) ownerCount(ctx context.Context, w writer) (int, error) {
	members, err := w.store().ChannelMembers(ctx, w.cid(), c.channel)
	if err != nil {
		return 0, fmt.Errorf("count owners: %w", err)
	}
	n := 0
	for _, m := range members {
		if m.Role == "owner" {
			n++
		}
	}
	return n, nil
}
