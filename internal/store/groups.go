package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// Channel is a channel row.
type Channel struct {
	ID          string
	Name        string
	Type        string
	Visibility  string
	Description string
	Topic       string
	Purpose     string
	Archived    bool
	Deleted     bool
}

// Member is an active channel member.
type Member struct {
	Pubkey string
	Role   string
}

// ChannelLock loads a channel and locks its row (SELECT … FOR UPDATE) so
// concurrent membership changes to one channel serialise. found is false
// when the channel does not exist (deleted channels are returned).
func (s *Store) ChannelLock(ctx context.Context, communityID, channel string) (c Channel, found bool, err error) {
	q := s.q
	if !isUUID(channel) {
		return Channel{}, false, nil
	}
	var desc, topic, purpose *string
	err = q.QueryRow(ctx, `SELECT id::text, name, channel_type::text, visibility::text, description, topic, purpose,
			archived_at IS NOT NULL, deleted_at IS NOT NULL
		FROM channels WHERE community_id = $1 AND id = $2 FOR UPDATE`, communityID, channel).
		Scan(&c.ID, &c.Name, &c.Type, &c.Visibility, &desc, &topic, &purpose, &c.Archived, &c.Deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return Channel{}, false, nil
	}
	if err != nil {
		return Channel{}, false, fmt.Errorf("lock channel: %w", err)
	}
	c.Description, c.Topic, c.Purpose = deref(desc), deref(topic), deref(purpose)
	return c, true, nil
}

// ChannelExists reports whether a channel id was ever used in the
// community (live, archived or deleted).
func (s *Store) ChannelExists(ctx context.Context, communityID, channel string) (bool, error) {
	q := s.q
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM channels WHERE community_id = $1 AND id = $2)`, communityID, channel).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("channel exists: %w", err)
	}
	return ok, nil
}

// ChannelCreateParams are the arguments of ChannelCreate.
type ChannelCreateParams struct {
	CommunityID string
	ID          string
	Name        string
	Type        string
	Visibility  string
	Description string
	CreatedBy   string
}

// ChannelCreate inserts a channel and its creator as owner. An id already
// used in the community is pg.ErrDuplicate.
func (s *Store) ChannelCreate(ctx context.Context, p ChannelCreateParams) error {
	q := s.q
	by := hexOne(p.CreatedBy)
	_, err := q.Exec(ctx, `INSERT INTO channels (community_id, id, name, channel_type, visibility, description, created_by)
		VALUES ($1, $2, $3, $4::channel_type, $5::channel_visibility, NULLIF($6, ''), $7)`,
		p.CommunityID, p.ID, p.Name, p.Type, p.Visibility, p.Description, by)
	if err != nil {
		return fmt.Errorf("create channel: %w", pg.MapError(err))
	}
	_, err = q.Exec(ctx, `INSERT INTO channel_members (community_id, channel_id, pubkey, role, invited_by)
		VALUES ($1, $2, $3, 'owner', $3)`, p.CommunityID, p.ID, by)
	if err != nil {
		return fmt.Errorf("create channel owner: %w", err)
	}
	return nil
}

// ChannelUpdateParams changes channel metadata; nil fields stay as they are.
type ChannelUpdateParams struct {
	CommunityID string
	ID          string
	Actor       string
	Name        *string
	Description *string
	Topic       *string
	Purpose     *string
	Visibility  *string
	Archived    *bool
	Deleted     bool
}

// ChannelUpdate applies metadata changes and bumps updated_at.
func (s *Store) ChannelUpdate(ctx context.Context, p ChannelUpdateParams) error {
	q := s.q
	actor := hexOne(p.Actor)
	_, err := q.Exec(ctx, `UPDATE channels SET
			name = COALESCE($3, name),
			description = CASE WHEN $4::text IS NULL THEN description ELSE NULLIF($4, '') END,
			topic = COALESCE($5, topic),
			topic_set_by = CASE WHEN $5::text IS NULL THEN topic_set_by ELSE $9 END,
			topic_set_at = CASE WHEN $5::text IS NULL THEN topic_set_at ELSE now() END,
			purpose = COALESCE($6, purpose),
			purpose_set_by = CASE WHEN $6::text IS NULL THEN purpose_set_by ELSE $9 END,
			purpose_set_at = CASE WHEN $6::text IS NULL THEN purpose_set_at ELSE now() END,
			visibility = COALESCE($7::channel_visibility, visibility),
			archived_at = CASE WHEN $8::bool IS NULL THEN archived_at WHEN $8 THEN COALESCE(archived_at, now()) ELSE NULL END,
			deleted_at = CASE WHEN $10 THEN COALESCE(deleted_at, now()) ELSE deleted_at END,
			updated_at = now()
		WHERE community_id = $1 AND id = $2`,
		p.CommunityID, p.ID, p.Name, p.Description, p.Topic, p.Purpose, p.Visibility, p.Archived, actor, p.Deleted)
	if err != nil {
		return fmt.Errorf("update channel: %w", err)
	}
	return nil
}

// ChannelMemberRole returns a pubkey's role when it is an active member.
func (s *Store) ChannelMemberRole(ctx context.Context, communityID, channel, pubkey string) (role string, active bool, err error) {
	q := s.q
	err = q.QueryRow(ctx, `SELECT role::text FROM channel_members
		WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3 AND removed_at IS NULL`,
		communityID, channel, hexOne(pubkey)).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("member role: %w", err)
	}
	return role, true, nil
}

// ChannelMemberUpsert adds or re-adds a member (clearing removed_at and
// removed_by, setting invited_by and joined_at) or changes a role.
func (s *Store) ChannelMemberUpsert(ctx context.Context, communityID, channel, pubkey, role, invitedBy string) error {
	q := s.q
	_, err := q.Exec(ctx, `INSERT INTO channel_members (community_id, channel_id, pubkey, role, invited_by)
		VALUES ($1, $2, $3, $4::member_role, $5)
		ON CONFLICT (community_id, channel_id, pubkey) DO UPDATE SET
			role = EXCLUDED.role,
			invited_by = CASE WHEN channel_members.removed_at IS NULL THEN channel_members.invited_by ELSE EXCLUDED.invited_by END,
			joined_at = CASE WHEN channel_members.removed_at IS NULL THEN channel_members.joined_at ELSE now() END,
			removed_at = NULL, removed_by = NULL`,
		communityID, channel, hexOne(pubkey), role, hexOne(invitedBy))
	if err != nil {
		return fmt.Errorf("upsert channel member: %w", err)
	}
	return nil
}

// ChannelMemberRemove soft-removes an active member.
func (s *Store) ChannelMemberRemove(ctx context.Context, communityID, channel, pubkey, by string) error {
	q := s.q
	_, err := q.Exec(ctx, `UPDATE channel_members SET removed_at = now(), removed_by = $4
		WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3 AND removed_at IS NULL`,
		communityID, channel, hexOne(pubkey), hexOne(by))
	if err != nil {
		return fmt.Errorf("remove channel member: %w", err)
	}
	return nil
}

// ChannelMembers lists the active members of a channel, oldest first.
func (s *Store) ChannelMembers(ctx context.Context, communityID, channel string) ([]Member, error) {
	q := s.q
	rows, err := q.Query(ctx, `SELECT pubkey, role::text FROM channel_members
		WHERE community_id = $1 AND channel_id = $2 AND removed_at IS NULL ORDER BY joined_at, pubkey`, communityID, channel)
	if err != nil {
		return nil, fmt.Errorf("list channel members: %w", err)
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var pub []byte
		var m Member
		if err := rows.Scan(&pub, &m.Role); err != nil {
			return nil, err
		}
		m.Pubkey = hex.EncodeToString(pub)
		out = append(out, m)
	}
	return out, rows.Err()
}

// UserAddPolicy returns a pubkey's channel_add_policy and agent owner.
func (s *Store) UserAddPolicy(ctx context.Context, communityID, pubkey string) (policy, owner string, err error) {
	q := s.q
	var own []byte
	err = q.QueryRow(ctx, `SELECT channel_add_policy::text, agent_owner_pubkey FROM users WHERE community_id = $1 AND pubkey = $2`,
		communityID, hexOne(pubkey)).Scan(&policy, &own)
	if errors.Is(err, pgx.ErrNoRows) {
		return "anyone", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("add policy: %w", err)
	}
	if own != nil {
		owner = hex.EncodeToString(own)
	}
	return policy, owner, nil
}

// LatestSignedAt returns the newest created_at of kind by pubkey for a
// channel (channel_id, or for global notices the h tag), or 0.
func (s *Store) LatestSignedAt(ctx context.Context, communityID string, kind int, pubkey, channel string, global bool) (int64, error) {
	q := s.q
	var ts *time.Time
	var err error
	if global {
		err = q.QueryRow(ctx, `SELECT max(created_at) FROM events WHERE community_id = $1 AND kind = $2 AND pubkey = $3
			AND tags @> jsonb_build_array(jsonb_build_array('h', $4::text))`, communityID, kind, hexOne(pubkey), channel).Scan(&ts)
	} else {
		err = q.QueryRow(ctx, `SELECT max(created_at) FROM events WHERE community_id = $1 AND kind = $2 AND pubkey = $3
			AND channel_id = $4`, communityID, kind, hexOne(pubkey), channel).Scan(&ts)
	}
	if err != nil {
		return 0, fmt.Errorf("latest signed: %w", err)
	}
	if ts == nil {
		return 0, nil
	}
	return ts.Unix(), nil
}

// ChannelStateEventsDelete soft-deletes a channel's relay-signed
// 39000–39002 (on channel deletion).
func (s *Store) ChannelStateEventsDelete(ctx context.Context, communityID, channel string) error {
	q := s.q
	_, err := q.Exec(ctx, `UPDATE events SET deleted_at = now() WHERE community_id = $1 AND channel_id = $2
		AND kind IN (39000, 39001, 39002) AND deleted_at IS NULL`, communityID, channel)
	if err != nil {
		return fmt.Errorf("delete channel state events: %w", err)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
