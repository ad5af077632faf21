package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ThreadRow is a thread_metadata row.
type ThreadRow struct {
	EventID         string
	CreatedAt       int64
	Channel         string
	ParentID        string
	ParentCreatedAt int64
	RootID          string
	RootCreatedAt   int64
	Depth           int
	ReplyCount      int
	DescendantCount int
	Broadcast       bool
}

// ThreadGet returns the thread row of an event; found is false when it has none.
func (s *Store) ThreadGet(ctx context.Context, communityID, eventID string) (r ThreadRow, found bool, err error) {
	q := s.q
	var (
		ts, pts, rts *time.Time
		pid, rid     []byte
	)
	err = q.QueryRow(ctx, `SELECT event_created_at, channel_id::text, parent_event_id, parent_event_created_at,
			root_event_id, root_event_created_at, depth, reply_count, descendant_count, broadcast
		FROM thread_metadata WHERE community_id = $1 AND event_id = $2 LIMIT 1`, communityID, hexOne(eventID)).
		Scan(&ts, &r.Channel, &pid, &pts, &rid, &rts, &r.Depth, &r.ReplyCount, &r.DescendantCount, &r.Broadcast)
	if errors.Is(err, pgx.ErrNoRows) {
		return ThreadRow{}, false, nil
	}
	if err != nil {
		return ThreadRow{}, false, fmt.Errorf("thread row: %w", err)
	}
	r.EventID = eventID
	r.CreatedAt = unix(ts)
	r.ParentID, r.ParentCreatedAt = hexOrEmpty(pid), unix(pts)
	r.RootID, r.RootCreatedAt = hexOrEmpty(rid), unix(rts)
	return r, true, nil
}

// ThreadReplyParams describe a new reply.
type ThreadReplyParams struct {
	CommunityID     string
	Channel         string
	EventID         string
	CreatedAt       int64
	ParentID        string
	ParentCreatedAt int64
	RootID          string
	RootCreatedAt   int64
	Depth           int
	Broadcast       bool
}

// ThreadReplyAdd writes a reply's row, ensures depth-0 rows for its parent
// and root, and bumps the parent's reply_count and the root's
// descendant_count. The parent's last_reply_at becomes the newest created_at
// of its direct replies (never the time of the write, so a community import
// keeps it: docs/PROTOCOL.md §6.1). A reply row that already exists changes
// nothing.
func (s *Store) ThreadReplyAdd(ctx context.Context, p ThreadReplyParams) error {
	q := s.q
	tag, err := q.Exec(ctx, `INSERT INTO thread_metadata (community_id, event_created_at, event_id, channel_id,
			parent_event_id, parent_event_created_at, root_event_id, root_event_created_at, depth, broadcast)
		VALUES ($1, to_timestamp($2), $3, $4, $5, to_timestamp($6), $7, to_timestamp($8), $9, $10)
		ON CONFLICT DO NOTHING`,
		p.CommunityID, p.CreatedAt, hexOne(p.EventID), p.Channel, hexOne(p.ParentID), p.ParentCreatedAt,
		hexOne(p.RootID), p.RootCreatedAt, p.Depth, p.Broadcast)
	if err != nil {
		return fmt.Errorf("insert thread row: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	for _, top := range [][2]any{{p.ParentID, p.ParentCreatedAt}, {p.RootID, p.RootCreatedAt}} {
		if _, err := q.Exec(ctx, `INSERT INTO thread_metadata (community_id, event_created_at, event_id, channel_id, depth)
			SELECT $1, to_timestamp($2), $3, $4, 0
			WHERE NOT EXISTS (SELECT 1 FROM thread_metadata WHERE community_id = $1 AND event_id = $3)
			ON CONFLICT DO NOTHING`, p.CommunityID, top[1], hexOne(top[0].(string)), p.Channel); err != nil {
			return fmt.Errorf("ensure thread top row: %w", err)
		}
	}
	if _, err := q.Exec(ctx, `UPDATE thread_metadata SET reply_count = reply_count + 1,
			last_reply_at = GREATEST(last_reply_at, to_timestamp($3))
		WHERE community_id = $1 AND event_id = $2`, p.CommunityID, hexOne(p.ParentID), p.CreatedAt); err != nil {
		return fmt.Errorf("bump parent: %w", err)
	}
	if _, err := q.Exec(ctx, `UPDATE thread_metadata SET descendant_count = descendant_count + 1
		WHERE community_id = $1 AND event_id = $2`, p.CommunityID, hexOne(p.RootID)); err != nil {
		return fmt.Errorf("bump root: %w", err)
	}
	return nil
}

// ThreadReplyRemoved decrements the counters a deleted reply contributed
// to, never below 0. It does nothing for an event without a reply row.
func (s *Store) ThreadReplyRemoved(ctx context.Context, communityID, eventID string) error {
	q := s.q
	r, found, err := s.ThreadGet(ctx, communityID, eventID)
	if err != nil || !found || r.ParentID == "" {
		return err
	}
	if _, err := q.Exec(ctx, `UPDATE thread_metadata SET reply_count = GREATEST(reply_count - 1, 0)
		WHERE community_id = $1 AND event_id = $2`, communityID, hexOne(r.ParentID)); err != nil {
		return fmt.Errorf("decrement parent: %w", err)
	}
	if _, err := q.Exec(ctx, `UPDATE thread_metadata SET descendant_count = GREATEST(descendant_count - 1, 0)
		WHERE community_id = $1 AND event_id = $2`, communityID, hexOne(r.RootID)); err != nil {
		return fmt.Errorf("decrement root: %w", err)
	}
	return nil
}

func unix(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.Unix()
}

func hexOrEmpty(b []byte) string {
	if b == nil {
		return ""
	}
	return hex.EncodeToString(b)
}

// ThreadRepliesParams describe a legacy thread read (docs/PROTOCOL.md §8.4).
type ThreadRepliesParams struct {
	CommunityID string
	Root        string
	// MaxDepth bounds the reply depth (1..MaxDepth).
	MaxDepth int
	// After continues strictly after (AfterTime, AfterID); AfterID "" means
	// strictly after that second; HasAfter false reads from the start.
	HasAfter  bool
	AfterTime int64
	AfterID   string
	Channels  []string
	Limit     int
	// MaxBytes, above 0, stops the read after the reply whose content and
	// tags take the total over it: a read's byte budget.
	MaxBytes int
}

// ThreadReplies returns live replies of a root, oldest first with ties by
// ascending id.
func (s *Store) ThreadReplies(ctx context.Context, p ThreadRepliesParams) ([]StoredEvent, error) {
	cursor := "true"
	args := []any{p.CommunityID, hexOne(p.Root), p.MaxDepth, p.Channels, p.Limit}
	if p.HasAfter {
		args = append(args, time.Unix(p.AfterTime, 0).UTC())
		if p.AfterID != "" {
			args = append(args, hexOne(p.AfterID))
			cursor = "(t.event_created_at, t.event_id) > ($6, $7)"
		} else {
			cursor = "t.event_created_at > $6"
		}
	}
	rows, err := s.q.Query(ctx, `SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text
		FROM thread_metadata t
		JOIN events e ON e.community_id = t.community_id AND e.id = t.event_id AND e.created_at = t.event_created_at
		WHERE t.community_id = $1 AND t.root_event_id = $2 AND t.depth BETWEEN 1 AND $3
		  AND t.channel_id = ANY($4::uuid[]) AND e.deleted_at IS NULL AND `+unexpired+` AND `+cursor+`
		ORDER BY t.event_created_at ASC, t.event_id ASC LIMIT $5`, args...)
	if err != nil {
		return nil, fmt.Errorf("thread replies: %w", err)
	}
	out, err := scanEventsUpTo(rows, p.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("thread replies: %w", err)
	}
	return out, nil
}
