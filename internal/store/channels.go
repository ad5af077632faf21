package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/event"
)

// ChannelState is what the pipeline and read engine need of a channel and
// one pubkey's membership in it.
type ChannelState struct {
	Exists   bool
	Open     bool
	Archived bool
	Deleted  bool
	// Role is the pubkey's role when it is an active member, "" otherwise.
	Role string
}

// ActiveMember reports whether the pubkey is an active member of a live channel.
func (c ChannelState) ActiveMember() bool { return c.Exists && !c.Deleted && c.Role != "" }

// CanPost reports whether the pubkey may post: active member or open channel.
func (c ChannelState) CanPost() bool {
	return c.Exists && !c.Deleted && (c.Open || c.Role != "")
}

// ChannelStateGet loads a channel's state and pubkey's membership. A missing
// channel gives Exists false, not an error.
func (s *Store) ChannelStateGet(ctx context.Context, communityID, channel, pubkey string) (ChannelState, error) {
	q := s.q
	pub, err := hex.DecodeString(pubkey)
	if err != nil {
		return ChannelState{}, fmt.Errorf("channel state: pubkey: %w", err)
	}
	var (
		st   ChannelState
		role *string
	)
	err = q.QueryRow(ctx, `
		SELECT c.visibility = 'open', c.archived_at IS NOT NULL, c.deleted_at IS NOT NULL, m.role::text
		FROM channels c
		LEFT JOIN channel_members m ON m.community_id = c.community_id AND m.channel_id = c.id
		     AND m.pubkey = $3 AND m.removed_at IS NULL
		WHERE c.community_id = $1 AND c.id = $2`, communityID, channel, pub).Scan(&st.Open, &st.Archived, &st.Deleted, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return ChannelState{}, nil
	}
	if err != nil {
		return ChannelState{}, fmt.Errorf("channel state: %w", err)
	}
	st.Exists = true
	if role != nil {
		st.Role = *role
	}
	return st, nil
}

// accessibleSQL is the accessible-channels rule, the one place it is
// written (docs/PROTOCOL.md §11.2): the live (not deleted; archived ones
// stay readable) channels of community $1 that are open or where pubkey $2
// is an active member, limited to the channels $3 when it is not NULL.
const accessibleSQL = `
	SELECT c.id::text FROM channels c
	WHERE c.community_id = $1 AND c.deleted_at IS NULL AND c.visibility = 'open'
	  AND ($3::uuid[] IS NULL OR c.id = ANY($3::uuid[]))
	UNION
	SELECT c.id::text FROM channel_members m
	JOIN channels c ON c.community_id = m.community_id AND c.id = m.channel_id
	WHERE m.community_id = $1 AND m.pubkey = $2 AND m.removed_at IS NULL AND c.deleted_at IS NULL
	  AND ($3::uuid[] IS NULL OR c.id = ANY($3::uuid[]))`

// AccessibleChannels returns the channels a reader may read in a community:
// those where it is an active member plus every open channel, deleted
// channels excluded (archived ones stay readable).
func (s *Store) AccessibleChannels(ctx context.Context, communityID, pubkey string) ([]string, error) {
	pub, err := hex.DecodeString(pubkey)
	if err != nil {
		return nil, fmt.Errorf("accessible channels: pubkey: %w", err)
	}
	rows, err := s.q.Query(ctx, accessibleSQL, communityID, pub, nil)
	if err != nil {
		return nil, fmt.Errorf("accessible channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("accessible channels: %w", err)
	}
	return out, nil
}

// ChannelsAccessible returns which of the requested channels the reader can
// access right now (uncached confirmation), by AccessibleChannels' rule.
// Requested values that are not lowercase hyphenated UUIDs are none.
func (s *Store) ChannelsAccessible(ctx context.Context, communityID, pubkey string, requested []string) ([]string, error) {
	pub, err := hex.DecodeString(pubkey)
	if err != nil {
		return nil, fmt.Errorf("confirm channels: pubkey: %w", err)
	}
	valid := make([]string, 0, len(requested))
	for _, r := range requested {
		if isUUID(r) {
			valid = append(valid, r)
		}
	}
	if len(valid) == 0 {
		return nil, nil
	}
	rows, err := s.q.Query(ctx, accessibleSQL, communityID, pub, valid)
	if err != nil {
		return nil, fmt.Errorf("confirm channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("confirm channels: %w", err)
	}
	return out, nil
}

// isUUID reports whether s is a hyphenated UUID in lowercase.
func isUUID(s string) bool {
	id, ok := event.ChannelID(s)
	return ok && id == s
}
