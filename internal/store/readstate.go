package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NIP-RS read state (docs/PROTOCOL.md §14.3, §14.2). A read-state coordinate is an
// addressable key (ReplaceableKey with DTag) whose events are conforming
// (event.IsReadState). Its superseded versions are physically deleted, and
// parameterized_event_watermarks keeps the greatest accepted
// (created_at, id) so that no older version, deleted or not, can return.
// The database enforces the same rules with triggers (migrations 0006 and
// 0007), for every writer; these functions are the relay's own path, which
// meets them without ever tripping them.

// ReadStateWatermark returns the coordinate's watermark, or ok false when
// none was ever accepted. Call it under the coordinate's advisory lock.
func (s *Store) ReadStateWatermark(ctx context.Context, k ReplaceableKey) (h Head, ok bool, err error) {
	q := s.q
	if k.DTag == nil {
		return Head{}, false, errors.New("read-state watermark: a coordinate needs a d tag")
	}
	pub, err := hex.DecodeString(k.Pubkey)
	if err != nil {
		return Head{}, false, fmt.Errorf("read-state watermark: pubkey: %w", err)
	}
	var (
		id []byte
		ts time.Time
	)
	err = q.QueryRow(ctx, `SELECT event_id, created_at FROM parameterized_event_watermarks
		WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4`,
		k.CommunityID, k.Kind, pub, *k.DTag).Scan(&id, &ts)
	if errors.Is(err, pgx.ErrNoRows) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, fmt.Errorf("read-state watermark: %w", err)
	}
	return Head{ID: hex.EncodeToString(id), CreatedAt: ts.Unix()}, true, nil
}

// ReadStateRemoveHead physically deletes every live row of the coordinate
// and then their event_mentions rows, in that order (the lock order of
// docs/PROTOCOL.md §14.3), after opting this transaction in to the hard-delete fence
// (buzz.nip_rs_hard_delete, transaction-local). It returns how many event
// rows it deleted. q must be a transaction.
func (s *Store) ReadStateRemoveHead(ctx context.Context, k ReplaceableKey) (deleted int, err error) {
	q := s.q
	if k.DTag == nil {
		return 0, errors.New("read-state remove head: a coordinate needs a d tag")
	}
	pub, err := hex.DecodeString(k.Pubkey)
	if err != nil {
		return 0, fmt.Errorf("read-state remove head: pubkey: %w", err)
	}
	if _, err := q.Exec(ctx, `SELECT set_config('buzz.nip_rs_hard_delete', 'on', true)`); err != nil {
		return 0, fmt.Errorf("read-state hard-delete opt-in: %w", err)
	}
	rows, err := q.Query(ctx, `DELETE FROM events
		WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4 AND deleted_at IS NULL
		RETURNING id`, k.CommunityID, k.Kind, pub, *k.DTag)
	if err != nil {
		return 0, fmt.Errorf("read-state delete head: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return 0, fmt.Errorf("read-state delete head: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := q.Exec(ctx, `DELETE FROM event_mentions WHERE community_id = $1 AND event_id = ANY($2)`,
		k.CommunityID, ids); err != nil {
		return 0, fmt.Errorf("read-state delete head mentions: %w", err)
	}
	return len(ids), nil
}

// ReadStateAdvance sets the coordinate's watermark to (createdAt, id), the
// event just inserted (docs/PROTOCOL.md §14.2). The insert trigger has already
// advanced it; this keeps the relay's path explicit and complete on its own.
func (s *Store) ReadStateAdvance(ctx context.Context, k ReplaceableKey, id string, createdAt int64) error {
	q := s.q
	if k.DTag == nil {
		return errors.New("read-state advance: a coordinate needs a d tag")
	}
	pub, err := hex.DecodeString(k.Pubkey)
	if err != nil {
		return fmt.Errorf("read-state advance: pubkey: %w", err)
	}
	eid, err := hex.DecodeString(id)
	if err != nil {
		return fmt.Errorf("read-state advance: event id: %w", err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO parameterized_event_watermarks (community_id, kind, pubkey, d_tag, created_at, event_id)
		VALUES ($1, $2, $3, $4, to_timestamp($5), $6)
		ON CONFLICT (community_id, kind, pubkey, d_tag) DO UPDATE SET created_at = EXCLUDED.created_at, event_id = EXCLUDED.event_id`,
		k.CommunityID, k.Kind, pub, *k.DTag, createdAt, eid); err != nil {
		return fmt.Errorf("read-state advance: %w", err)
	}
	return nil
}

// ReadStateSnapshotRow is one stored row of a read-state snapshot, as
// stored: the read engine checks and encodes it.
type ReadStateSnapshotRow struct {
	ID, Pubkey, Sig []byte
	CreatedAt       time.Time
	Kind            int
	DTag            string
	Tags            []byte // raw JSON
	Content         string
	Channel         *string
}

// ReadStateSnapshotRows reads, in one statement (one MVCC snapshot), the
// live conforming read-state rows (nip_rs_read_state_row) of pubkey in the
// community, newest first (created_at DESC, id ASC), at most limit of them,
// and hands them to fn one at a time as they arrive; fn returns false to
// stop, which ends the statement. The caller holds one row at a time, so
// what it accumulates is its own bound, whatever the rows' sizes.
//
// The statement also stops early on size: content_before is the sum of the
// content bytes of the rows before each one, and a row's JSON is never
// shorter than its content, so once content_before passes maxBytes the
// caller's array is too large whatever follows; rows after that point are
// not sent.
func (s *Store) ReadStateSnapshotRows(ctx context.Context, communityID string, pubkey []byte, maxBytes, limit int,
	fn func(ReadStateSnapshotRow) bool) error {
	q := s.q
	rows, err := q.Query(ctx, `
		SELECT id, pubkey, created_at, kind, d_tag, tags, content, sig, channel_id::text
		FROM (
		  SELECT e.id, e.pubkey, e.created_at, e.kind, e.d_tag, e.tags, e.content, e.sig, e.channel_id,
		         COALESCE(sum(octet_length(e.content)) OVER (ORDER BY e.created_at DESC, e.id ASC
		           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS content_before
		  FROM events e
		  WHERE e.community_id = $1 AND e.pubkey = $2 AND e.kind = 30078 AND e.deleted_at IS NULL AND `+unexpired+`
		    AND e.d_tag LIKE 'read-state:%' AND nip_rs_read_state_row(e.kind, e.d_tag, e.tags)
		) s
		WHERE content_before <= $3
		ORDER BY created_at DESC, id ASC
		LIMIT $4`, communityID, pubkey, maxBytes, limit)
	if err != nil {
		return fmt.Errorf("query read-state snapshot: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var x ReadStateSnapshotRow
		if err := rows.Scan(&x.ID, &x.Pubkey, &x.CreatedAt, &x.Kind, &x.DTag, &x.Tags, &x.Content, &x.Sig, &x.Channel); err != nil {
			return fmt.Errorf("read read-state snapshot: %w", err)
		}
		if !fn(x) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read read-state snapshot: %w", err)
	}
	return nil
}
