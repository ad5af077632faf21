package ingest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// plan is what authorize decided about an event, carried into commit.
type plan struct {
	channel string
	dTag    *string
	// deletion: an e target (kind 5) or an a coordinate.
	delTarget *store.EventRef
	delCoord  *coordinate
	// reaction: its target and emoji.
	reactTarget *store.EventRef
	emoji       string
	// profile side effects.
	nip05     *string
	setNIP05  bool
	addPolicy string
	// forget lists readers whose cached access the commit changes;
	// forgetAll drops the whole community's cached access.
	forget    []string
	forgetAll bool
	// group is the NIP-29 command's decision (kinds 9000–9022).
	group *groupPlan
	// state: re-publish 39000–39002; notices: 44100/44101 to send.
	state          bool
	notices        []notice
	channelCreated bool
	// evictions after the answer (spec 10 §5.5).
	evictPubkey     string
	evictNonMembers bool
	evictAll        bool
	// thread is the reply's thread row (NIP-10).
	thread *store.ThreadReplyParams
}

// simple reports whether the event's write transaction holds nothing but
// the event row and its mentions (no lock, no other row).
func (pl *plan) simple(kind int) bool {
	return !event.IsReplaceable(kind) && !event.IsAddressable(kind) && pl.dTag == nil && pl.delTarget == nil && pl.delCoord == nil && pl.reactTarget == nil &&
		!pl.setNIP05 && pl.addPolicy == "" && pl.group == nil && pl.thread == nil
}

type coordinate struct {
	kind   int
	pubkey string
	d      string
}

// channelExempt kinds skip step 14: their own rules decide.
var channelExempt = event.KindSet{9002: {}, 9005: {}, 9007: {}, 9008: {}, 9021: {}, 40003: {}}

// authorize runs steps 9–19.
func (p *Pipeline) authorize(ctx context.Context, req Request) (*plan, error) {
	ev := &req.Event
	cid := req.Tenant.CommunityID
	if !event.IsAccepted(ev.Kind) { // 9
		return nil, reject(wire.Restricted, "unknown event kind")
	}
	pl := &plan{}
	// 10. Resolve the channel.
	switch {
	case event.GlobalOnly.Has(ev.Kind), ev.Kind == event.KindGiftWrap: // 11
	case ev.Kind == event.KindReaction:
		target, err := p.reactionTarget(ctx, cid, ev)
		if err != nil {
			return nil, err
		}
		pl.reactTarget, pl.channel = target, target.Channel
	case ev.Kind == event.KindDeletion:
		if e := firstHex64(ev.Tags, "e"); e != "" {
			ref, err := p.cfg.Store.EventLookup(ctx, p.cfg.Pool, cid, e)
			if err == nil {
				pl.channel = ref.Channel
			} else if !errors.Is(err, pg.ErrNotFound) {
				return nil, err
			}
		}
	default:
		pl.channel = channelFromTags(ev.Tags)
	}
	if event.RequiresH.Has(ev.Kind) && pl.channel == "" { // 12
		return nil, invalid("channel-scoped events must include an h tag")
	}
	if ev.Kind == event.KindDeletion || ev.Kind == event.KindDeleteEvent { // 13
		ne, na := ev.Tags.Count("e"), ev.Tags.Count("a")
		if ne+na != 1 {
			return nil, invalid("deletion events must reference exactly one target via e or a tag (got e=%d, a=%d)", ne, na)
		}
	}
	if pl.channel != "" && !channelExempt.Has(ev.Kind) { // 14, 15
		st, err := p.cfg.Store.ChannelStateGet(ctx, p.cfg.Pool, cid, pl.channel, ev.PubKey)
		if err != nil {
			return nil, err
		}
		if !st.CanPost() {
			return nil, reject(wire.Restricted, "not a channel member")
		}
		if st.Archived {
			return nil, invalid("channel is archived")
		}
	}
	if groupKinds.Has(ev.Kind) { // 16 (the stateful part runs under the channel lock in commit)
		if err := checkGroupShape(ev, pl); err != nil {
			return nil, err
		}
	}
	if ev.Kind == event.KindDeletion { // 17
		if err := p.deletion(ctx, req, pl); err != nil {
			return nil, err
		}
	}
	if err := p.validateKind(req, pl); err != nil { // 18
		return nil, err
	}
	switch { // 19 and the target rules of edits and votes
	case event.ThreadKinds.Has(ev.Kind):
		if err := p.resolveThread(ctx, cid, ev, pl); err != nil {
			return nil, err
		}
	case ev.Kind == event.KindMessageEdit:
		if err := p.checkEdit(ctx, cid, ev, pl); err != nil {
			return nil, err
		}
	case ev.Kind == event.KindForumVote:
		if err := p.checkVote(ctx, cid, ev, pl); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// reactionTarget applies spec 10 §6.3's target rules.
func (p *Pipeline) reactionTarget(ctx context.Context, cid string, ev *event.Event) (*store.EventRef, error) {
	var target string
	for _, t := range ev.Tags {
		if len(t) > 1 && t[0] == "e" && event.IsHexAnyCase64(t[1]) {
			target = strings.ToLower(t[1])
		}
	}
	if target == "" {
		return nil, invalid("reaction must reference a target event via e tag")
	}
	ref, err := p.cfg.Store.EventLookup(ctx, p.cfg.Pool, cid, target)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return nil, invalid("reaction target event not found")
	}
	if err != nil {
		return nil, err
	}
	return &ref, nil
}

// deletion applies the NIP-09 rule of spec 10 §6.4 (step 17).
func (p *Pipeline) deletion(ctx context.Context, req Request, pl *plan) error {
	ev := &req.Event
	if t := ev.Tags.First("e"); t != nil {
		id := t.Value()
		if !event.IsHexAnyCase64(id) {
			return invalid("malformed deletion target id")
		}
		ref, err := p.cfg.Store.EventLookup(ctx, p.cfg.Pool, req.Tenant.CommunityID, strings.ToLower(id))
		if errors.Is(err, pg.ErrNotFound) {
			return invalid("target event not found")
		}
		if err != nil {
			return err
		}
		if ref.PubKey != ev.PubKey {
			return invalid("must be event author")
		}
		pl.delTarget = &ref
		return nil
	}
	parts := strings.SplitN(ev.Tags.First("a").Value(), ":", 3)
	if len(parts) < 3 {
		return invalid("invalid a-tag format")
	}
	kind, err := strconv.Atoi(parts[0])
	if err != nil {
		return invalid("invalid a-tag format")
	}
	if strings.ToLower(parts[1]) != ev.PubKey {
		return invalid("must be event author")
	}
	pl.delCoord = &coordinate{kind: kind, pubkey: ev.PubKey, d: parts[2]}
	return nil
}

// validateKind runs the per-kind checks of step 18.
func (p *Pipeline) validateKind(req Request, pl *plan) error {
	ev := &req.Event
	if event.IsAddressable(ev.Kind) {
		d := ev.Tags.First("d").Value()
		if n := len(d); n > MaxDTagBytes {
			return invalid("d tag too long (%d bytes, max %d)", n, MaxDTagBytes)
		}
		pl.dTag = &d
	}
	switch ev.Kind {
	case event.KindProfile:
		var profile map[string]any
		if err := json.Unmarshal([]byte(ev.Content), &profile); err != nil || profile == nil {
			return invalid("kind:0 content must be valid JSON")
		}
		pl.setNIP05 = true
		if nip05, ok := profile["nip05"].(string); ok {
			if name, hostPart, found := strings.Cut(strings.ToLower(strings.TrimSpace(nip05)), "@"); found && name != "" && hostPart == req.Tenant.Host {
				h := name + "@" + hostPart
				pl.nip05 = &h
			}
		}
	case event.KindAgentProfile:
		var body struct {
			Policy string `json:"channel_add_policy"`
		}
		if json.Unmarshal([]byte(ev.Content), &body) != nil || (body.Policy != "anyone" && body.Policy != "owner_only" && body.Policy != "nobody") {
			return invalid("kind:10100 content must set channel_add_policy to anyone, owner_only or nobody")
		}
		pl.addPolicy = body.Policy
	case event.KindEmojiList, event.KindEmojiSet:
		for _, t := range ev.Tags {
			if len(t) > 0 && t[0] == "emoji" && (len(t) < 2 || t[1] == "") {
				return invalid("emoji tag must include a shortcode")
			}
		}
	case event.KindEngram:
		return validateEngram(ev)
	case event.KindReaction:
		pl.emoji = ev.Content
		if pl.emoji == "" {
			pl.emoji = "+"
		}
		if n := utf8.RuneCountInString(pl.emoji); n > MaxEmojiChars {
			return invalid("reaction emoji exceeds %d characters (got %d)", MaxEmojiChars, n)
		}
	}
	return nil
}

// validateEngram checks the NIP-AE envelope of kind 30174.
func validateEngram(ev *event.Event) error {
	if n := ev.Tags.Count("d"); n != 1 {
		return invalid("agent-engram event must have exactly one `d` tag (got %d)", n)
	}
	if n := ev.Tags.Count("p"); n != 1 {
		return invalid("agent-engram event must have exactly one `p` tag (got %d)", n)
	}
	if !event.IsHex64(ev.Tags.First("d").Value()) {
		return invalid("agent-engram `d` tag must be 64 lowercase hex chars")
	}
	if !event.IsHex64(ev.Tags.First("p").Value()) {
		return invalid("agent-engram `p` tag must be 64 lowercase hex chars (pubkey)")
	}
	if ev.Content == "" {
		return invalid("agent-engram content must not be empty (NIP-44 ciphertext)")
	}
	if len(ev.Content)%4 != 0 {
		return invalid("agent-engram content is not valid base64 (length)")
	}
	raw, err := base64.StdEncoding.DecodeString(ev.Content)
	if err != nil {
		return invalid("agent-engram content is not valid base64")
	}
	if len(raw) < 99 {
		return invalid("agent-engram content too short for NIP-44 v2")
	}
	if raw[0] != 0x02 {
		return invalid("agent-engram content is not NIP-44 v2 (expected 0x02 version prefix)")
	}
	return nil
}

// channelFromTags returns the first h value that is a hyphenated UUID,
// lowercased, or "".
func channelFromTags(tags event.Tags) string {
	for _, t := range tags {
		if len(t) > 1 && t[0] == "h" {
			if id, ok := event.ChannelID(t[1]); ok {
				return id
			}
		}
	}
	return ""
}

func firstHex64(tags event.Tags, name string) string {
	for _, t := range tags {
		if len(t) > 1 && t[0] == name && event.IsHexAnyCase64(t[1]) {
			return strings.ToLower(t[1])
		}
	}
	return ""
}
