package window

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// Resolve serves one summary-recovery filter (docs/NIP-CW.md §4) on the
// writer: one signed 39005 per distinct root of the target replies, in the
// order of the first target naming each, zero counts included. Missing
// targets, targets that are not replies, and targets or roots outside the
// channel yield nothing; nothing of a target itself is returned, and there are
// no bounds. An inaccessible channel yields nothing and no error. Errors are
// as Window's.
func (e *Engine) Resolve(ctx context.Context, sc Scope, r ResolveRequest) ([]Item, error) {
	if !sc.Accessible(r.Channel) {
		e.count("resolve_roots", "ok")
		return nil, nil
	}
	var sums []summary
	err := e.onWriter(ctx, channelSession, func(q pg.Querier) error {
		var err error
		sums, err = resolveRoots(ctx, q, sc.CommunityID, r)
		return err
	})
	if err != nil {
		return nil, e.fail(ctx, "resolve_roots", "summary recovery", err, slog.String("community", sc.CommunityID), slog.String("channel", r.Channel))
	}
	now := time.Now().Unix()
	items := make([]Item, 0, len(sums))
	for _, s := range sums {
		it, err := e.signSummary(r.Channel, s, now)
		if err != nil {
			return nil, e.fail(ctx, "resolve_roots", "summary recovery", err, slog.String("community", sc.CommunityID), slog.String("channel", r.Channel))
		}
		items = append(items, it)
	}
	e.count("resolve_roots", "ok")
	return items, nil
}

// resolveRoots returns the summaries of the targets' distinct roots, in
// the order of the first target naming each.
func resolveRoots(ctx context.Context, q pg.Querier, communityID string, r ResolveRequest) ([]summary, error) {
	ids := make([][]byte, len(r.Targets))
	for i, t := range r.Targets {
		id, err := hex.DecodeString(t)
		if err != nil {
			return nil, fmt.Errorf("decode target id: %w", err)
		}
		ids[i] = id
	}
	roots, err := store.New(q).WindowThreadRoots(ctx, communityID, r.Channel, ids)
	if err != nil {
		return nil, err
	}
	byTarget := map[string]summary{}
	for _, rt := range roots {
		s := summary{root: hex.EncodeToString(rt.Root)}
		if rt.ReplyCount != nil {
			s.replyCount = *rt.ReplyCount
		}
		if rt.DescendantCount != nil {
			s.descendantCount = *rt.DescendantCount
		}
		if rt.LastReplyAt != nil {
			t := rt.LastReplyAt.Unix()
			s.lastReplyAt = &t
		}
		byTarget[hex.EncodeToString(rt.Target)] = s
	}
	var sums []summary
	seen := map[string]struct{}{}
	for _, t := range r.Targets {
		s, ok := byTarget[t]
		if !ok {
			continue
		}
		if _, dup := seen[s.root]; dup {
			continue
		}
		seen[s.root] = struct{}{}
		sums = append(sums, s)
	}
	if err := fillParticipants(ctx, q, communityID, sums); err != nil {
		return nil, err
	}
	return sums, nil
}
