package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// reactionFamily is kind 7 (docs/PROTOCOL.md §6.3): one active reactions row per
// (target, reactor, emoji), written with the event.
type reactionFamily struct{}

// route is step 10: a reaction takes its target's channel; the last e tag
// with an event id names the target, which must be stored and live.
func (reactionFamily) route(ctx context.Context, p *Pipeline, req *Request) (route, error) {
	var target string
	for _, t := range req.Event.Tags {
		if len(t) > 1 && t[0] == "e" && event.IsHexAnyCase64(t[1]) {
			target = strings.ToLower(t[1])
		}
	}
	if target == "" {
		return route{}, invalid("reaction must reference a target event via e tag")
	}
	ref, err := p.st.EventLookup(ctx, req.Tenant.CommunityID, target)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return route{}, invalid("reaction target event not found")
	}
	if err != nil {
		return route{}, fmt.Errorf("look up reaction target %s: %w", target, err)
	}
	return route{channel: ref.Channel, target: &ref}, nil
}

// authorize is step 18 for kind 7: the emoji (content, "+" when empty).
func (reactionFamily) authorize(_ context.Context, _ *Pipeline, req *Request, rt route) (change, error) {
	emoji := req.Event.Content
	if emoji == "" {
		emoji = "+"
	}
	if n := utf8.RuneCountInString(emoji); n > MaxEmojiChars {
		return nil, invalid("reaction emoji exceeds %d characters (got %d)", MaxEmojiChars, n)
	}
	return reactionChange{channel: rt.channel, target: rt.target, emoji: emoji}, nil
}

type reactionChange struct {
	channel string
	target  *store.EventRef
	emoji   string
}

// apply adds the reaction row first: an identical active reaction answers
// duplicate: with OK false and stores nothing.
func (c reactionChange) apply(ctx context.Context, w writer) (outcome, error) {
	ev := w.ev()
	fresh, err := w.store().ReactionAdd(ctx, store.ReactionAddParams{
		CommunityID: w.cid(), Target: c.target.ID, TargetCreatedAt: c.target.CreatedAt,
		Pubkey: ev.PubKey, Emoji: c.emoji, ReactionEventID: ev.ID,
	})
	if err != nil {
		return outcome{}, fmt.Errorf("add reaction to %s: %w", c.target.ID, err)
	}
	if !fresh {
		return outcome{}, conflict(wire.Reason(wire.Duplicate, "reaction already exists"))
	}
	if err := w.insertEvent(ctx, c.channel, nil); err != nil {
		return outcome{}, err
	}
	return outcome{channel: c.channel}, nil
}
