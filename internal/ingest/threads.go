package ingest

import (
	"context"
	"errors"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// MaxThreadDepth is the deepest reply accepted (spec 10 §6.1).
const MaxThreadDepth = 100

// markedRefs returns the last valid root and reply markers of NIP-10 marked
// e tags: ["e", <64 hex>, <relay url>, "root"|"reply"].
func markedRefs(tags event.Tags) (root, reply string) {
	for _, t := range tags {
		if len(t) >= 4 && t[0] == "e" && event.IsHexAnyCase64(t[1]) {
			switch t[3] {
			case "root":
				root = strings.ToLower(t[1])
			case "reply":
				reply = strings.ToLower(t[1])
			}
		}
	}
	return root, reply
}

// resolveThread is step 19 for thread kinds: find the parent and root of a
// reply and check them. A top-level event gets no thread plan.
func (p *Pipeline) resolveThread(ctx context.Context, cid string, ev *event.Event, pl *plan) error {
	root, reply := markedRefs(ev.Tags)
	if reply == "" {
		return nil
	}
	if root == "" {
		root = reply
	}
	s := p.cfg.Store
	parent, err := s.EventLookup(ctx, p.cfg.Pool, cid, reply)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && parent.Deleted) {
		return invalid("reply parent not found")
	}
	if err != nil {
		return err
	}
	if parent.Channel == "" {
		return invalid("parent event has no channel association")
	}
	if parent.Channel != pl.channel {
		return invalid("parent event belongs to a different channel")
	}
	row, hasRow, err := s.ThreadGet(ctx, p.cfg.Pool, cid, parent.ID)
	if err != nil {
		return err
	}
	expected, depth := parent.ID, 1
	switch {
	case hasRow && row.RootID != "":
		expected, depth = row.RootID, row.Depth+1
	case hasRow:
		expected, depth = parent.ID, row.Depth+1
	default:
		pr, prReply := markedRefs(parent.Tags)
		if pr == "" {
			pr = prReply
		}
		if pr != "" {
			expected, depth = pr, 2
		}
	}
	if root != expected {
		return invalid("root tag does not match thread ancestry")
	}
	if depth > MaxThreadDepth {
		return invalid("thread depth limit exceeded")
	}
	rootCreated := parent.CreatedAt
	if expected != parent.ID {
		if hasRow && row.RootCreatedAt != 0 {
			rootCreated = row.RootCreatedAt
		} else {
			r, err := s.EventLookup(ctx, p.cfg.Pool, cid, expected)
			if errors.Is(err, pg.ErrNotFound) {
				return invalid("root tag does not match thread ancestry")
			}
			if err != nil {
				return err
			}
			rootCreated = r.CreatedAt
		}
	}
	pl.thread = &store.ThreadReplyParams{
		CommunityID: cid, Channel: pl.channel, EventID: ev.ID, CreatedAt: ev.CreatedAt,
		ParentID: parent.ID, ParentCreatedAt: parent.CreatedAt, RootID: expected, RootCreatedAt: rootCreated,
		Depth: depth, Broadcast: ev.Tags.HasValue("broadcast", "1"),
	}
	return nil
}

// checkEdit applies spec 10 §6.2 to kind 40003.
func (p *Pipeline) checkEdit(ctx context.Context, cid string, ev *event.Event, pl *plan) error {
	target := firstHex64(ev.Tags, "e")
	if target == "" {
		return invalid("missing e tag for edit target")
	}
	ref, err := p.cfg.Store.EventLookup(ctx, p.cfg.Pool, cid, target)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return invalid("edit target event not found")
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
	if ref.PubKey != ev.PubKey {
		return invalid("must be event author to edit")
	}
	st, err := p.cfg.Store.ChannelStateGet(ctx, p.cfg.Pool, cid, pl.channel, ev.PubKey)
	if err != nil {
		return err
	}
	if !st.CanPost() {
		return reject(wire.Restricted, "not a channel member")
	}
	if st.Archived {
		return invalid("channel is archived")
	}
	return nil
}

// checkVote applies spec 10 §6.2 to kind 45002.
func (p *Pipeline) checkVote(ctx context.Context, cid string, ev *event.Event, pl *plan) error {
	target := firstHex64(ev.Tags, "e")
	if target == "" {
		return invalid("missing e tag for vote target")
	}
	ref, err := p.cfg.Store.EventLookup(ctx, p.cfg.Pool, cid, target)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return invalid("vote target event not found")
	}
	if err != nil {
		return err
	}
	if ref.Kind != event.KindForumPost && ref.Kind != event.KindForumComment {
		return invalid("vote target must be a forum post or comment")
	}
	if ref.Channel != pl.channel {
		return invalid("target event belongs to a different channel")
	}
	return nil
}
