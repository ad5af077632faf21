package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// MaxThreadDepth is the deepest reply accepted (docs/PROTOCOL.md §6.1).
const MaxThreadDepth = 100

// threadFamily is the NIP-10 thread kinds (9, 40002, 45001, 45003). A
// top-level message is a plainChange, the hot path; a reply also writes its
// thread row and the counters of its parent and root.
type threadFamily struct{ byTag }

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

// authorize is step 19: find the parent and root of a reply and check them.
func (threadFamily) authorize(ctx context.Context, p *Pipeline, req *Request, rt route) (change, error) {
	ev := &req.Event
	cid := req.Tenant.CommunityID
	root, reply := markedRefs(ev.Tags)
	if reply == "" {
		return plainChange{channel: rt.channel}, nil
	}
	if root == "" {
		root = reply
	}

	parent, err := p.st.EventLookup(ctx, cid, reply)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && parent.Deleted) {
		return nil, invalid("reply parent not found")
	}
	if err != nil {
		return nil, fmt.Errorf("look up reply parent %s: %w", reply, err)
	}
	if parent.Channel == "" {
		return nil, invalid("parent event has no channel association")
	}
	if parent.Channel != rt.channel {
		return nil, invalid("parent event belongs to a different channel")
	}
	row, hasRow, err := p.st.ThreadGet(ctx, cid, parent.ID)
	if err != nil {
		return nil, fmt.Errorf("thread row of %s: %w", parent.ID, err)
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
		return nil, invalid("root tag does not match thread ancestry")
	}
	if depth > MaxThreadDepth {
		return nil, invalid("thread depth limit exceeded")
	}
	rootCreated := parent.CreatedAt
	if expected != parent.ID {
		if hasRow && row.RootCreatedAt != 0 {
			rootCreated = row.RootCreatedAt
		} else {
			r, err := p.st.EventLookup(ctx, cid, expected)
			if errors.Is(err, pg.ErrNotFound) {
				return nil, invalid("root tag does not match thread ancestry")
			}
			if err != nil {
				return nil, fmt.Errorf("look up thread root %s: %w", expected, err)
			}
			rootCreated = r.CreatedAt
		}
	}
	return replyChange{channel: rt.channel, thread: store.ThreadReplyParams{
		CommunityID: cid, Channel: rt.channel, EventID: ev.ID, CreatedAt: ev.CreatedAt,
		ParentID: parent.ID, ParentCreatedAt: parent.CreatedAt, RootID: expected, RootCreatedAt: rootCreated,
		Depth: depth, Broadcast: ev.Tags.HasValue("broadcast", "1"),
	}}, nil
}

// replyChange is a reply: the event and its thread row, with the counters.
type replyChange struct {
	channel string
	thread  store.ThreadReplyParams
}

func (c replyChange) apply(ctx context.Context, w writer) (outcome, error) {
	if err := w.insertEvent(ctx, c.channel, nil); err != nil {
		return outcome{}, err
	}
	if err := w.store().ThreadReplyAdd(ctx, c.thread); err != nil {
		return outcome{}, fmt.Errorf("thread row under %s: %w", c.thread.ParentID, err)
	}
	return outcome{channel: c.channel}, nil
}

// editFamily is kind 40003 (docs/PROTOCOL.md §6.2): the author edits their own live
// message of the same channel. Step 14 is skipped for it; this is its own.
type editFamily struct{ byTag }

func (editFamily) authorize(ctx context.Context, p *Pipeline, req *Request, rt route) (change, error) {
	ev := &req.Event
	target := firstHex64(ev.Tags, "e")
	if target == "" {
		return nil, invalid("missing e tag for edit target")
	}
	ref, err := p.st.EventLookup(ctx, req.Tenant.CommunityID, target)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return nil, invalid("edit target event not found")
	}
	if err != nil {
		return nil, fmt.Errorf("look up edit target %s: %w", target, err)
	}
	if ref.Channel == "" {
		return nil, invalid("target event has no channel")
	}
	if ref.Channel != rt.channel {
		return nil, invalid("target event belongs to a different channel")
	}
	if ref.PubKey != ev.PubKey {
		return nil, invalid("must be event author to edit")
	}
	if err := p.mayPost(ctx, req, rt.channel); err != nil { // its own 14 and 15
		return nil, err
	}
	return plainChange{channel: rt.channel}, nil
}

// voteFamily is kind 45002 (docs/PROTOCOL.md §6.2): a vote on a forum post or
// comment of the same channel.
type voteFamily struct{ byTag }

func (voteFamily) authorize(ctx context.Context, p *Pipeline, req *Request, rt route) (change, error) {
	target := firstHex64(req.Event.Tags, "e")
	if target == "" {
		return nil, invalid("missing e tag for vote target")
	}
	ref, err := p.st.EventLookup(ctx, req.Tenant.CommunityID, target)
	if errors.Is(err, pg.ErrNotFound) || (err == nil && ref.Deleted) {
		return nil, invalid("vote target event not found")
	}
	if err != nil {
		return nil, fmt.Errorf("look up vote target %s: %w", target, err)
	}
	if ref.Kind != event.KindForumPost && ref.Kind != event.KindForumComment {
		return nil, invalid("vote target must be a forum post or comment")
	}
	if ref.Channel != rt.channel {
		return nil, invalid("target event belongs to a different channel")
	}
	return plainChange{channel: rt.channel}, nil
}
