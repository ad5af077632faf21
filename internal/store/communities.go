package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// ErrHostTaken means a host is already a primary host or an alias.
var ErrHostTaken = errors.New("host already configured")

// Community is one tenant.
type Community struct {
	ID        string
	Host      string
	Aliases   []string
	CreatedAt time.Time
}

// CommunityByHost resolves a normalised host through communities.host, then
// community_host_aliases.host. It returns pg.ErrNotFound when neither has it.
func (s *Store) CommunityByHost(ctx context.Context, host string) (Community, error) {
	var c Community
	err := s.q.QueryRow(ctx, `
		SELECT id::text, host, created_at FROM communities WHERE lower(host) = lower($1)
		UNION ALL
		SELECT c.id::text, c.host, c.created_at FROM community_host_aliases a
		JOIN communities c ON c.id = a.community_id WHERE lower(a.host) = lower($1)
		LIMIT 1`, host).Scan(&c.ID, &c.Host, &c.CreatedAt)
	if err != nil {
		return Community{}, fmt.Errorf("resolve host: %w", pg.MapError(err))
	}
	return c, nil
}

// CommunityIDByHost returns the id of the community whose host or alias is
// host, or "" when there is none: the lookup of tenant.Resolver.
func (s *Store) CommunityIDByHost(ctx context.Context, host string) (string, error) {
	c, err := s.CommunityByHost(ctx, host)
	if errors.Is(err, pg.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return c.ID, nil
}

// CommunityGet returns the community whose id is id, without its aliases.
// It returns pg.ErrNotFound when there is none.
func (s *Store) CommunityGet(ctx context.Context, id string) (Community, error) {
	var c Community
	err := s.q.QueryRow(ctx, `SELECT id::text, host, created_at FROM communities WHERE id = $1`, id).
		Scan(&c.ID, &c.Host, &c.CreatedAt)
	if err != nil {
		return Community{}, fmt.Errorf("get community %s: %w", id, pg.MapError(err))
	}
	return c, nil
}

// CommunityAddParams are the arguments of CommunityAdd.
type CommunityAddParams struct {
	Host string // normalised
	// Owner, when set, is added to relay_members as owner in the same transaction.
	Owner string
}

// CommunityAdd creates a community for a host that is neither a primary host
// nor an alias (ErrHostTaken otherwise), checking both tables in one
// transaction: its own on a pool (retried on a serialization failure), a
// savepoint inside a caller's transaction.
func (s *Store) CommunityAdd(ctx context.Context, p CommunityAddParams) (Community, error) {
	var c Community
	err := s.withTx(ctx, func(st *Store) error {
		tx := st.q
		if err := lockHosts(ctx, tx); err != nil {
			return err
		}
		if taken, err := hostTaken(ctx, tx, p.Host); err != nil {
			return err
		} else if taken {
			return ErrHostTaken
		}
		if err := tx.QueryRow(ctx, `INSERT INTO communities (host) VALUES ($1) RETURNING id::text, host, created_at`,
			p.Host).Scan(&c.ID, &c.Host, &c.CreatedAt); err != nil {
			return pg.MapError(err)
		}
		if p.Owner != "" {
			_, err := tx.Exec(ctx, `INSERT INTO relay_members (community_id, pubkey, role, added_by) VALUES ($1, $2, 'owner', 'cli')`, c.ID, p.Owner)
			return err
		}
		return nil
	})
	if errors.Is(err, pg.ErrDuplicate) {
		return Community{}, ErrHostTaken
	}
	if err != nil && !errors.Is(err, ErrHostTaken) {
		return Community{}, fmt.Errorf("add community: %w", err)
	}
	return c, err
}

// CommunityEnsure returns the community of host, creating it when absent. It
// is idempotent and safe to run from several processes at once.
func (s *Store) CommunityEnsure(ctx context.Context, host string) (Community, error) {
	for range 3 {
		c, err := s.CommunityByHost(ctx, host)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, pg.ErrNotFound) {
			return Community{}, err
		}
		c, err = s.CommunityAdd(ctx, CommunityAddParams{Host: host})
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, ErrHostTaken) {
			return Community{}, err
		}
	}
	return Community{}, fmt.Errorf("ensure community %s: lost the race three times", host)
}

// CommunityAddHost adds alias for the community whose primary host or alias
// is target. ErrHostTaken when alias is already configured; pg.ErrNotFound
// when target is unknown.
func (s *Store) CommunityAddHost(ctx context.Context, alias, target string) (string, error) {
	var id string
	err := s.withTx(ctx, func(st *Store) error {
		tx := st.q
		if err := lockHosts(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `
			SELECT id::text FROM communities WHERE lower(host) = lower($1)
			UNION ALL SELECT community_id::text FROM community_host_aliases WHERE lower(host) = lower($1)
			LIMIT 1`, target).Scan(&id)
		if err != nil {
			return pg.MapError(err)
		}
		if taken, err := hostTaken(ctx, tx, alias); err != nil {
			return err
		} else if taken {
			return ErrHostTaken
		}
		_, err = tx.Exec(ctx, `INSERT INTO community_host_aliases (host, community_id) VALUES ($1, $2)`, alias, id)
		return pg.MapError(err)
	})
	if errors.Is(err, pg.ErrDuplicate) {
		return "", ErrHostTaken
	}
	return id, err
}

// CommunityList returns every community with its aliases, oldest first.
func (s *Store) CommunityList(ctx context.Context) ([]Community, error) {
	rows, err := s.q.Query(ctx, `
		SELECT c.id::text, c.host, c.created_at,
		       COALESCE(array_agg(a.host ORDER BY a.host) FILTER (WHERE a.host IS NOT NULL), '{}')
		FROM communities c LEFT JOIN community_host_aliases a ON a.community_id = c.id
		GROUP BY c.id ORDER BY c.created_at, c.host`)
	if err != nil {
		return nil, fmt.Errorf("list communities: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Community, error) {
		var c Community
		err := r.Scan(&c.ID, &c.Host, &c.CreatedAt, &c.Aliases)
		return c, err
	})
}

// lockHosts serialises host registrations so the two-table uniqueness check
// cannot race.
func lockHosts(ctx context.Context, tx pg.Querier) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7250312944126532611)`)
	return err
}

func hostTaken(ctx context.Context, tx pg.Querier, host string) (bool, error) {
	var taken bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM communities WHERE lower(host) = lower($1))
		OR EXISTS (SELECT 1 FROM community_host_aliases WHERE lower(host) = lower($1))`, host).Scan(&taken)
	return taken, err
}
