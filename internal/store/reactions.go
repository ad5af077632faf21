package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// ReactionAddParams are the arguments of ReactionAdd.
type ReactionAddParams struct {
	CommunityID     string
	Target          string // target event id
	TargetCreatedAt int64
	Pubkey          string
	Emoji           string
	ReactionEventID string
}

// ReactionAdd records an active reaction, reactivating a removed one. fresh
// is false when the same (target, reactor, emoji) is already active.
func (s *Store) ReactionAdd(ctx context.Context, p ReactionAddParams) (fresh bool, err error) {
	q := s.q
	target, err := hex.DecodeString(p.Target)
	if err != nil {
		return false, fmt.Errorf("add reaction: target id: %w", err)
	}
	pub, err := hex.DecodeString(p.Pubkey)
	if err != nil {
		return false, fmt.Errorf("add reaction: pubkey: %w", err)
	}
	rid, err := hex.DecodeString(p.ReactionEventID)
	if err != nil {
		return false, fmt.Errorf("add reaction: reaction id: %w", err)
	}
	var one int
	err = q.QueryRow(ctx, `
		INSERT INTO reactions (community_id, event_created_at, event_id, pubkey, emoji, reaction_event_id)
		VALUES ($1, to_timestamp($2), $3, $4, $5, $6)
		ON CONFLICT (community_id, event_created_at, event_id, pubkey, emoji) DO UPDATE
		SET removed_at = NULL, reaction_event_id = EXCLUDED.reaction_event_id, created_at = now()
		WHERE reactions.removed_at IS NOT NULL
		RETURNING 1`, p.CommunityID, p.TargetCreatedAt, target, pub, p.Emoji, rid).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if errors.Is(pg.MapError(err), pg.ErrDuplicate) {
		return false, nil // the same kind 7 event already backs an active row
	}
	if err != nil {
		return false, fmt.Errorf("add reaction: %w", err)
	}
	return true, nil
}

// ReactionRemove marks the reaction backed by a deleted kind 7 event removed.
func (s *Store) ReactionRemove(ctx context.Context, communityID, reactionEventID string) error {
	q := s.q
	rid, err := hex.DecodeString(reactionEventID)
	if err != nil {
		return fmt.Errorf("remove reaction: reaction id: %w", err)
	}
	_, err = q.Exec(ctx, `UPDATE reactions SET removed_at = now()
		WHERE community_id = $1 AND reaction_event_id = $2 AND removed_at IS NULL`, communityID, rid)
	if err != nil {
		return fmt.Errorf("remove reaction: %w", err)
	}
	return nil
}
