package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RelayMember is one row of relay_members.
type RelayMember struct {
	CommunityID string
	Pubkey      string
	Role        string
	AddedBy     string
	CreatedAt   time.Time
}

// RelayMemberUpsertParams are the arguments of RelayMemberUpsert.
type RelayMemberUpsertParams struct {
	CommunityID string
	Pubkey      string // lowercase hex
	Role        string // owner, admin or member
	AddedBy     string // hex pubkey, "cli" or "bootstrap"
}

// RelayMemberUpsert inserts a member or changes the role of an existing one.
// It runs on q: the pool, or a transaction that also records the change.
func (s *Store) RelayMemberUpsert(ctx context.Context, p RelayMemberUpsertParams) (RelayMember, error) {
	q := s.q
	m := RelayMember{CommunityID: p.CommunityID, Pubkey: p.Pubkey}
	err := q.QueryRow(ctx, `
		INSERT INTO relay_members (community_id, pubkey, role, added_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT (community_id, pubkey) DO UPDATE SET role = EXCLUDED.role, updated_at = now()
		RETURNING role, COALESCE(added_by, ''), created_at`, p.CommunityID, p.Pubkey, p.Role, p.AddedBy).
		Scan(&m.Role, &m.AddedBy, &m.CreatedAt)
	if err != nil {
		return RelayMember{}, fmt.Errorf("upsert relay member: %w", err)
	}
	return m, nil
}

// RelayMemberRole returns a member's role, or "" when it has no row.
func (s *Store) RelayMemberRole(ctx context.Context, communityID, pubkey string) (string, error) {
	q := s.q
	var role string
	err := q.QueryRow(ctx, `SELECT role FROM relay_members WHERE community_id = $1 AND pubkey = $2`, communityID, pubkey).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("relay member role: %w", err)
	}
	return role, nil
}

// RelayMemberRemove deletes a member; removed is false when there was none.
func (s *Store) RelayMemberRemove(ctx context.Context, communityID, pubkey string) (removed bool, err error) {
	q := s.q
	tag, err := q.Exec(ctx, `DELETE FROM relay_members WHERE community_id = $1 AND pubkey = $2`, communityID, pubkey)
	if err != nil {
		return false, fmt.Errorf("remove relay member: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// RelayMemberList lists a community's members, oldest first.
func (s *Store) RelayMemberList(ctx context.Context, communityID string) ([]RelayMember, error) {
	rows, err := s.q.Query(ctx, `SELECT community_id::text, pubkey, role, COALESCE(added_by, ''), created_at
		FROM relay_members WHERE community_id = $1 ORDER BY created_at, pubkey`, communityID)
	if err != nil {
		return nil, fmt.Errorf("list relay members: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RelayMember])
}

// IsRelayMember reports whether pubkey has a relay_members row in the community.
func (s *Store) IsRelayMember(ctx context.Context, communityID, pubkey string) (bool, error) {
	var ok bool
	err := s.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM relay_members WHERE community_id = $1 AND pubkey = $2)`,
		communityID, pubkey).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check relay member: %w", err)
	}
	return ok, nil
}
