package window

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
)

// resolveSQL finds the distinct roots of the target replies: each
// target's retained thread_metadata row (a soft-deleted reply keeps its
// row) names its root; a row without a root is not a reply. The target's
// row and the root's event must both be in the channel. The root's own
// row gives the counters; none means zero counts.
const resolveSQL = `SELECT t.event_id, t.root_event_id, rm.reply_count, rm.descendant_count, rm.last_reply_at
FROM thread_metadata t
JOIN LATERAL (
  SELECT 1 FROM events r
  WHERE r.community_id = t.community_id AND r.id = t.root_event_id AND r.channel_id = $3
  LIMIT 1) r ON true
LEFT JOIN LATERAL (
  SELECT m.reply_count, m.descendant_count, m.last_reply_at FROM thread_metadata m
  WHERE m.community_id = t.community_id AND m.event_id = t.root_event_id AND m.channel_id = $3
  LIMIT 1) rm ON true
WHERE t.community_id = $1 AND t.event_id = ANY($2::bytea[]) AND t.channel_id = $3
  AND t.root_event_id IS NOT NULL`

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
	rs, err := q.Query(ctx, resolveSQL, communityID, ids, r.Channel)
	if err != nil {
		return nil, fmt.Errorf("select target roots: %w", err)
	}
	defer rs.Close()
	byTarget := map[string]summary{}
	for rs.Next() {
		var (
			target, root        []byte
			replies, descendant *int
			lastReply           *time.Time
		)
		if err := rs.Scan(&target, &root, &replies, &descendant, &lastReply); err != nil {
			return nil, fmt.Errorf("scan target root: %w", err)
		}
		s := summary{root: hex.EncodeToString(root)}
		if replies != nil {
			s.replyCount = *replies
		}
		if descendant != nil {
			s.descendantCount = *descendant
		}
		if lastReply != nil {
			t := lastReply.Unix()
			s.lastReplyAt = &t
		}
		byTarget[hex.EncodeToString(target)] = s
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read target roots: %w", err)
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
