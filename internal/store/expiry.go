package store

import (
	"context"
	"fmt"
)

// unexpired is the NIP-40 read predicate on the events alias e
// (docs/PROTOCOL.md §6.6): a row whose expires_at is not after the
// statement's transaction time is never returned, whether or not
// ExpiredPurge has removed it yet. Every statement that returns stored
// events, or decides from them what a reader sees, carries it next to
// deleted_at IS NULL; an expired row is treated as absent, never as a
// tombstone.
const unexpired = "(e.expires_at IS NULL OR e.expires_at > now())"

// expiredPurgeSQL removes up to $1 expired events, oldest expiration first,
// with what refers to them: their event_mentions rows and thread_metadata
// rows; a live expired reply takes one off its parent's reply_count and
// its root's descendant_count (as a deletion does, docs/PROTOCOL.md §6.4),
// unless that parent or root goes in the same batch; a live expired
// reaction marks its reactions row removed. Rows locked by a writer are
// skipped and taken by a later pass. The operator-listener outbox is left
// to its own reaper (docs/PROTOCOL.md §15.8), and the audit chain keeps
// every entry (docs/PROTOCOL.md §13.1).
const expiredPurgeSQL = `
WITH doomed AS (
  SELECT community_id, created_at, id, kind, deleted_at IS NULL AS live
  FROM events
  WHERE expires_at IS NOT NULL AND expires_at <= now()
  ORDER BY expires_at
  LIMIT $1
  FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM events e USING doomed d
  WHERE e.community_id = d.community_id AND e.created_at = d.created_at AND e.id = d.id
  RETURNING e.community_id, e.created_at, e.id, d.kind, d.live
), mentions AS (
  DELETE FROM event_mentions m USING gone g
  WHERE m.community_id = g.community_id AND m.event_id = g.id AND m.event_created_at = g.created_at
), threads AS (
  DELETE FROM thread_metadata t USING gone g
  WHERE t.community_id = g.community_id AND t.event_created_at = g.created_at AND t.event_id = g.id
  RETURNING t.community_id, t.parent_event_id, t.root_event_id, g.live
), counts AS (
  SELECT community_id, event_id, sum(replies) AS replies, sum(descendants) AS descendants
  FROM (SELECT community_id, parent_event_id AS event_id, 1 AS replies, 0 AS descendants
          FROM threads WHERE live AND parent_event_id IS NOT NULL
        UNION ALL
        SELECT community_id, root_event_id, 0, 1
          FROM threads WHERE live AND parent_event_id IS NOT NULL AND root_event_id IS NOT NULL) x
  GROUP BY community_id, event_id
), counters AS (
  UPDATE thread_metadata p
  SET reply_count = GREATEST(p.reply_count - c.replies, 0),
      descendant_count = GREATEST(p.descendant_count - c.descendants, 0)
  FROM counts c
  WHERE p.community_id = c.community_id AND p.event_id = c.event_id
    AND NOT EXISTS (SELECT 1 FROM gone g WHERE g.community_id = p.community_id AND g.id = p.event_id)
), reactions AS (
  UPDATE reactions r SET removed_at = now()
  FROM gone g
  WHERE g.live AND g.kind = 7 AND r.community_id = g.community_id AND r.reaction_event_id = g.id
    AND r.removed_at IS NULL
)
SELECT count(*) FROM gone`

// ExpiredPurge deletes up to limit events whose NIP-40 expiration has
// passed (docs/PROTOCOL.md §6.6), in every community, with their mention
// and thread rows, and returns how many it deleted. Run it inside a
// transaction (store.New(tx)): read-state rows may be deleted only by a
// transaction that opted in to hard deletes (docs/PROTOCOL.md §14.3), and
// it does so for itself, transaction-locally.
func (s *Store) ExpiredPurge(ctx context.Context, limit int) (int64, error) {
	if _, err := s.q.Exec(ctx, `SELECT set_config('buzz.nip_rs_hard_delete', 'on', true)`); err != nil {
		return 0, fmt.Errorf("purge expired events: opt in to hard deletes: %w", err)
	}
	var n int64
	if err := s.q.QueryRow(ctx, expiredPurgeSQL, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("purge expired events: %w", err)
	}
	return n, nil
}
