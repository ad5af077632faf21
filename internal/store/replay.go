package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"
)

// NIP98Use records a NIP-98 event id as used in a community. fresh is false
// when the id was used before (a replay). Shared by every process.
func (s *Store) NIP98Use(ctx context.Context, communityID, eventID string) (fresh bool, err error) {
	id, err := hex.DecodeString(eventID)
	if err != nil {
		return false, fmt.Errorf("nip98 replay: bad id: %w", err)
	}
	tag, err := s.q.Exec(ctx, `INSERT INTO nip98_replay (community_id, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, communityID, id)
	if err != nil {
		return false, fmt.Errorf("nip98 replay: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// NIP98Purge deletes replay rows older than maxAge (180 s in production).
func (s *Store) NIP98Purge(ctx context.Context, maxAge time.Duration) (int64, error) {
	tag, err := s.q.Exec(ctx, `DELETE FROM nip98_replay WHERE seen_at < now() - make_interval(secs => $1)`, maxAge.Seconds())
	if err != nil {
		return 0, fmt.Errorf("purge nip98 replay: %w", err)
	}
	return tag.RowsAffected(), nil
}
