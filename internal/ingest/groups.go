package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// groupKinds are the NIP-29 commands of spec 10 §5; their state change
// commits with the event under the channel row's lock.
var groupKinds = event.KindSet{9000: {}, 9001: {}, 9002: {}, 9005: {}, 9007: {}, 9008: {}, 9021: {}, 9022: {}}

var validRoles = map[string]bool{"owner": true, "admin": true, "member": true, "guest": true, "bot": true}

func elevated(role string) bool { return role == "owner" || role == "admin" }

// groupPlan is what the NIP-29 step decided, applied in the transaction.
type groupPlan struct {
	name, visibility, channelType, about string // 9007
	target, role                         string // 9000, 9001
	hasRole                              bool
	meta                                 store.ChannelUpdateParams // 9002
	metaElevated                         bool                      // 9002 touches name/about/archived/visibility/ttl
	unarchive                            bool
	targetEvent                          string // 9005
}

// canonicalName strips leading '#' and whitespace and trailing whitespace.
func canonicalName(s string) string {
	s = strings.TrimLeftFunc(s, func(r rune) bool { return r == '#' || unicode.IsSpace(r) })
	return strings.TrimRightFunc(s, unicode.IsSpace)
}

// checkGroupShape runs the stateless part of step 16: tags and values.
func checkGroupShape(ev *event.Event, pl *plan) error {
	g := &groupPlan{}
	pl.group = g
	switch ev.Kind {
	case event.KindCreateGroup:
		t := ev.Tags.First("name")
		g.name = canonicalName(t.Value())
		if g.name == "" {
			return invalid("channel name is required")
		}
		if utf8.RuneCountInString(g.name) > 255 {
			return invalid("channel name exceeds 255 characters")
		}
		g.visibility = "open"
		if t := ev.Tags.First("visibility"); t != nil {
			if v := t.Value(); v == "open" || v == "private" {
				g.visibility = v
			} else {
				return &refusal{Result{Code: Rejected, Message: "invalid visibility: " + v}}
			}
		}
		g.channelType = "stream"
		if t := ev.Tags.First("channel_type"); t != nil {
			if v := t.Value(); v == "stream" || v == "forum" {
				g.channelType = v
			} else {
				return &refusal{Result{Code: Rejected, Message: "invalid channel_type: " + v}}
			}
		}
		g.about = ev.Tags.First("about").Value()
	case event.KindPutUser, event.KindRemoveUser:
		p := ev.Tags.First("p")
		if p == nil || !event.IsHexAnyCase64(p.Value()) {
			return invalid("missing p tag")
		}
		g.target = strings.ToLower(p.Value())
		if ev.Kind == event.KindPutUser {
			if t := ev.Tags.First("role"); t != nil {
				if !validRoles[t.Value()] {
					return invalid("invalid role: %s", t.Value())
				}
				g.role, g.hasRole = t.Value(), true
			}
		}
	case event.KindJoinRequest:
		if pl.channel == "" {
			return invalid("join request must include an h tag")
		}
	case event.KindEditMetadata:
		return checkMetadata(ev, g)
	case event.KindDeleteEvent:
		e := ev.Tags.First("e")
		if e == nil {
			return invalid("missing e tag for target event")
		}
		if !event.IsHexAnyCase64(e.Value()) {
			return invalid("malformed deletion target id")
		}
		g.targetEvent = strings.ToLower(e.Value())
	}
	return nil
}

func checkMetadata(ev *event.Event, g *groupPlan) error {
	found := false
	for _, name := range []string{"name", "about", "archived", "topic", "purpose", "visibility", "ttl"} {
		if ev.Tags.First(name) != nil {
			found = true
		}
	}
	if !found {
		return invalid("kind:9002 must include at least one metadata tag (name, about, archived, topic, purpose, visibility, ttl)")
	}
	if t := ev.Tags.First("name"); t != nil {
		n := canonicalName(t.Value())
		if n == "" {
			return invalid("channel name is required")
		}
		if utf8.RuneCountInString(n) > 255 {
			return invalid("channel name exceeds 255 characters")
		}
		g.meta.Name, g.metaElevated = &n, true
	}
	if t := ev.Tags.First("about"); t != nil {
		v := t.Value()
		g.meta.Description, g.metaElevated = &v, true
	}
	if t := ev.Tags.First("topic"); t != nil {
		v := t.Value()
		g.meta.Topic = &v
	}
	if t := ev.Tags.First("purpose"); t != nil {
		v := t.Value()
		g.meta.Purpose = &v
	}
	if t := ev.Tags.First("visibility"); t != nil {
		if len(t) < 2 {
			return invalid("visibility tag must have a value")
		}
		if v := t[1]; v != "open" && v != "private" {
			return invalid(`invalid visibility value: %s (must be "open" or "private")`, v)
		}
		v := t[1]
		g.meta.Visibility, g.metaElevated = &v, true
	}
	if t := ev.Tags.First("archived"); t != nil {
		if len(t) < 2 {
			return invalid("archived tag must have a value")
		}
		if v := t[1]; v != "true" && v != "false" {
			return invalid(`invalid archived value: %s (must be "true" or "false")`, v)
		}
		a := t[1] == "true"
		g.meta.Archived, g.metaElevated, g.unarchive = &a, true, !a
	}
	if ev.Tags.First("ttl") != nil {
		g.metaElevated = true
	}
	return nil
}

// applyGroup runs the stateful part of step 16 inside the write transaction
// and applies the state change. It returns the relay-signed follow-ups to
// store and dispatch with the event.
func (p *Pipeline) applyGroup(ctx context.Context, tx pgx.Tx, req Request, pl *plan) error {
	ev := &req.Event
	cid := req.Tenant.CommunityID
	s := p.cfg.Store
	g := pl.group
	if ev.Kind == event.KindCreateGroup {
		if pl.channel != "" {
			exists, err := s.ChannelExists(ctx, tx, cid, pl.channel)
			if err != nil {
				return err
			}
			if exists {
				return conflict(wire.Reason(wire.Duplicate, "channel already exists"))
			}
		} else {
			pl.channel = uuid.NewString()
		}
		err := s.ChannelCreate(ctx, tx, store.ChannelCreateParams{CommunityID: cid, ID: pl.channel, Name: g.name,
			Type: g.channelType, Visibility: g.visibility, Description: g.about, CreatedBy: ev.PubKey})
		if errors.Is(err, pg.ErrDuplicate) {
			return conflict(wire.Reason(wire.Duplicate, "channel already exists"))
		}
		if err != nil {
			return err
		}
		pl.state, pl.forgetAll, pl.channelCreated = true, g.visibility == "open", true
		pl.forget = append(pl.forget, ev.PubKey)
		pl.notices = append(pl.notices, notice{kind: event.KindMemberAdded, target: ev.PubKey})
		return nil
	}

	ch, found, err := s.ChannelLock(ctx, tx, cid, pl.channel)
	if err != nil {
		return err
	}
	if !found || ch.Deleted {
		switch ev.Kind {
		case event.KindEditMetadata, event.KindDeleteEvent, event.KindDeleteGroup, event.KindJoinRequest:
			return invalid("channel not found")
		}
		return reject(wire.Restricted, "not a channel member")
	}
	if ch.Archived && !(ev.Kind == event.KindEditMetadata && g.unarchive) { // 15
		return invalid("channel is archived")
	}
	actorRole, actorActive, err := s.ChannelMemberRole(ctx, tx, cid, pl.channel, ev.PubKey)
	if err != nil {
		return err
	}
	private := ch.Visibility == "private"
	switch ev.Kind {
	case event.KindPutUser:
		return p.putUser(ctx, tx, cid, ev, pl, private, actorRole)
	case event.KindRemoveUser:
		return p.removeUser(ctx, tx, cid, ev, pl, g.target, actorRole, actorActive)
	case event.KindLeaveRequest:
		return p.removeUser(ctx, tx, cid, ev, pl, ev.PubKey, actorRole, actorActive)
	case event.KindJoinRequest:
		if actorActive {
			return nil // already a member: stored, nothing changes
		}
		if private {
			return reject(wire.Restricted, "channel is private")
		}
		if err := s.ChannelMemberUpsert(ctx, tx, cid, pl.channel, ev.PubKey, "member", ev.PubKey); err != nil {
			return err
		}
		pl.state = true
		pl.forget = append(pl.forget, ev.PubKey)
		pl.notices = append(pl.notices, notice{kind: event.KindMemberAdded, target: ev.PubKey})
	case event.KindEditMetadata:
		if g.metaElevated && !elevated(actorRole) {
			return invalid("actor not authorized for name/about/archived/visibility/ttl changes")
		}
		if !actorActive {
			return invalid("not a member")
		}
		g.meta.CommunityID, g.meta.ID, g.meta.Actor = cid, pl.channel, ev.PubKey
		if err := s.ChannelUpdate(ctx, tx, g.meta); err != nil {
			return err
		}
		pl.state = true
		if v := g.meta.Visibility; v != nil && *v != ch.Visibility {
			pl.forgetAll = true
			if *v == "private" {
				pl.evictNonMembers = true
			}
		}
		if g.unarchive && ch.Archived {
			members, err := s.ChannelMembers(ctx, tx, cid, pl.channel)
			if err != nil {
				return err
			}
			for _, m := range members {
				pl.notices = append(pl.notices, notice{kind: event.KindMemberAdded, target: m.Pubkey})
			}
		}
	case event.KindDeleteEvent:
		return p.adminDelete(ctx, tx, cid, ev, pl, private, actorRole, actorActive)
	case event.KindDeleteGroup:
		if actorRole != "owner" {
			return invalid("only owner can delete group")
		}
		if err := s.ChannelUpdate(ctx, tx, store.ChannelUpdateParams{CommunityID: cid, ID: pl.channel, Actor: ev.PubKey, Deleted: true}); err != nil {
			return err
		}
		if err := s.ChannelStateEventsDelete(ctx, tx, cid, pl.channel); err != nil {
			return err
		}
		pl.forgetAll, pl.evictAll = true, true
	}
	return nil
}

func (p *Pipeline) putUser(ctx context.Context, tx pgx.Tx, cid string, ev *event.Event, pl *plan, private bool, actorRole string) error {
	s := p.cfg.Store
	g := pl.group
	if private && (g.role == "owner" || g.role == "admin") && !elevated(actorRole) {
		return invalid("only owners/admins may grant elevated roles")
	}
	curRole, curActive, err := s.ChannelMemberRole(ctx, tx, cid, pl.channel, g.target)
	if err != nil {
		return err
	}
	role := "member"
	switch {
	case curActive && (!g.hasRole || g.role == curRole):
		role = curRole
	case curActive:
		if !elevated(actorRole) {
			return invalid("only owners/admins may change an active member's role")
		}
		if curRole == "owner" {
			if n, err := p.ownerCount(ctx, tx, cid, pl.channel); err != nil {
				return err
			} else if n <= 1 {
				return invalid("cannot demote the last owner — transfer ownership first")
			}
		}
		role = g.role
	case g.hasRole:
		role = g.role
	}
	if g.target != ev.PubKey && !curActive { // third-party add: the target's policy
		policy, owner, err := s.UserAddPolicy(ctx, tx, cid, g.target)
		if err != nil {
			return err
		}
		switch policy {
		case "owner_only":
			if owner == "" {
				return invalid("policy:owner_only — agent has no owner set")
			}
			if owner != ev.PubKey {
				return invalid("policy:owner_only — only the agent owner can add this agent")
			}
		case "nobody":
			return invalid("policy:nobody — this agent has disabled external channel additions")
		}
	}
	if err := s.ChannelMemberUpsert(ctx, tx, cid, pl.channel, g.target, role, ev.PubKey); err != nil {
		return err
	}
	pl.state = true
	pl.forget = append(pl.forget, g.target)
	pl.notices = append(pl.notices, notice{kind: event.KindMemberAdded, target: g.target})
	return nil
}

func (p *Pipeline) removeUser(ctx context.Context, tx pgx.Tx, cid string, ev *event.Event, pl *plan, target, actorRole string, actorActive bool) error {
	s := p.cfg.Store
	if target == ev.PubKey {
		if !actorActive {
			return invalid("actor is not an active member")
		}
		if actorRole == "owner" {
			if n, err := p.ownerCount(ctx, tx, cid, pl.channel); err != nil {
				return err
			} else if n <= 1 {
				return invalid("cannot remove the last owner")
			}
		}
	} else {
		if !elevated(actorRole) {
			return invalid("actor not authorized")
		}
		role, active, err := s.ChannelMemberRole(ctx, tx, cid, pl.channel, target)
		if err != nil {
			return err
		}
		if active && role == "owner" {
			if n, err := p.ownerCount(ctx, tx, cid, pl.channel); err != nil {
				return err
			} else if n <= 1 {
				return invalid("cannot remove the last owner")
			}
		}
	}
	if err := s.ChannelMemberRemove(ctx, tx, cid, pl.channel, target, ev.PubKey); err != nil {
		return err
	}
	pl.state = true
	pl.forget = append(pl.forget, target)
	pl.evictPubkey = target
	pl.notices = append(pl.notices, notice{kind: event.KindMemberRemoved, target: target})
	return nil
}

func (p *Pipeline) adminDelete(ctx context.Context, tx pgx.Tx, cid string, ev *event.Event, pl *plan, private bool, actorRole string, actorActive bool) error {
	s := p.cfg.Store
	ref, err := s.EventLookup(ctx, tx, cid, pl.group.targetEvent)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return invalid("target event not found")
	}
	if err != nil {
		return err
	}
	if ref.Channel == "" {
		return invalid("target event has no channel")
	}
	if ref.Channel != pl.channel {
		return invalid("target event belongs to a different channel")
	}
	authorMayPost := ref.PubKey == ev.PubKey && (!private || actorActive)
	if !authorMayPost && !elevated(actorRole) {
		return invalid("must be event author or channel owner/admin")
	}
	pl.delTarget = &ref
	return nil
}

func (p *Pipeline) ownerCount(ctx context.Context, tx pgx.Tx, cid, channel string) (int, error) {
	members, err := p.cfg.Store.ChannelMembers(ctx, tx, cid, channel)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range members {
		if m.Role == "owner" {
			n++
		}
	}
	return n, nil
}

// notice is a 44100/44101 membership notification to send.
type notice struct {
	kind   int
	target string
}

// noticeContent is the content of a 44100/44101, fields in wire order.
type noticeContent struct {
	Type      string `json:"type"`
	ChannelID string `json:"channel_id"`
	Actor     string `json:"actor"`
}

// followUps builds, signs and stores the relay-signed events of spec 10
// §5.4 for the channel's new state, inside the transaction.
func (p *Pipeline) followUps(ctx context.Context, tx pgx.Tx, req Request, pl *plan) ([]*event.Event, error) {
	if !pl.state && len(pl.notices) == 0 {
		return nil, nil
	}
	cid := req.Tenant.CommunityID
	s := p.cfg.Store
	relayPub := event.PubKey(p.cfg.RelayKey)
	var out []*event.Event
	if pl.state {
		ch, _, err := s.ChannelLock(ctx, tx, cid, pl.channel)
		if err != nil {
			return nil, err
		}
		members, err := s.ChannelMembers(ctx, tx, cid, pl.channel)
		if err != nil {
			return nil, err
		}
		for _, kind := range []int{event.KindGroupMetadata, event.KindGroupAdmins, event.KindGroupMembers} {
			out = append(out, &event.Event{Kind: kind, Tags: stateTags(kind, ch, members), Content: ""})
		}
	}
	for _, n := range pl.notices {
		typ := "member_added"
		if n.kind == event.KindMemberRemoved {
			typ = "member_removed"
		}
		// A struct, not a map: the fields keep the order of spec 10 §5.4.
		content, _ := json.Marshal(noticeContent{Type: typ, ChannelID: pl.channel, Actor: req.Event.PubKey})
		out = append(out, &event.Event{Kind: n.kind, Tags: event.Tags{{"p", n.target}, {"h", pl.channel}}, Content: string(content)})
	}
	last := map[int]int64{}
	for _, fe := range out {
		global := fe.Kind == event.KindMemberAdded || fe.Kind == event.KindMemberRemoved
		prev, ok := last[fe.Kind]
		if !ok {
			var err error
			if prev, err = s.LatestSignedAt(ctx, tx, cid, fe.Kind, relayPub, pl.channel, global); err != nil {
				return nil, err
			}
		}
		fe.CreatedAt = max(p.cfg.NowFunc().Unix(), prev+1)
		last[fe.Kind] = fe.CreatedAt
		if err := p.sign(fe); err != nil {
			return nil, err
		}
		channel := pl.channel
		var dTag *string
		if global {
			channel = ""
		} else {
			d := pl.channel
			dTag = &d
			if err := s.ReplaceableSupersede(ctx, tx, store.ReplaceableKey{CommunityID: cid, Kind: fe.Kind, Pubkey: relayPub, DTag: dTag}); err != nil {
				return nil, err
			}
		}
		if _, err := s.EventInsert(ctx, tx, store.EventInsertParams{CommunityID: cid, Event: fe, Channel: channel, DTag: dTag}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *Pipeline) sign(ev *event.Event) error {
	if p.cfg.SignFunc != nil {
		return p.cfg.SignFunc(ev)
	}
	return ev.Sign(p.cfg.RelayKey)
}

// stateTags lays out 39000/39001/39002 exactly as spec 10 §5.4 lists them.
func stateTags(kind int, ch store.Channel, members []store.Member) event.Tags {
	tags := event.Tags{{"d", ch.ID}}
	switch kind {
	case event.KindGroupMetadata:
		tags = append(tags, event.Tag{"name", ch.Name})
		if ch.Description != "" {
			tags = append(tags, event.Tag{"about", ch.Description})
		}
		if ch.Visibility == "private" {
			tags = append(tags, event.Tag{"private"})
		} else {
			tags = append(tags, event.Tag{"public"})
		}
		tags = append(tags, event.Tag{"closed"}, event.Tag{"t", ch.Type})
		if ch.Topic != "" {
			tags = append(tags, event.Tag{"topic", ch.Topic})
		}
		if ch.Purpose != "" {
			tags = append(tags, event.Tag{"purpose", ch.Purpose})
		}
		if ch.Archived {
			tags = append(tags, event.Tag{"archived", "true"})
		}
	case event.KindGroupAdmins:
		for _, m := range members {
			if elevated(m.Role) {
				tags = append(tags, event.Tag{"p", m.Pubkey, m.Role})
			}
		}
	case event.KindGroupMembers:
		for _, m := range members {
			tags = append(tags, event.Tag{"p", m.Pubkey, "", m.Role})
		}
	}
	return tags
}
