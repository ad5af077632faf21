// Package store holds the relay's SQL: one file per entity (communities,
// relay members, events, channels, the NIP-98 replay table), each a method
// on Store named entity-first.
//
// It owns every statement the core runs. It does NOT decide policy (ingest
// and read do), does NOT open transactions for callers that pass one in
// (methods taking a pg.Querier join the caller's transaction), and does NOT
// cache anything.
package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
)

// Store runs statements on a pool; methods that must be atomic with other
// writes take a pg.Querier (a pgx.Tx) instead.
type Store struct {
	pool *pgxpool.Pool
	// acquireTimeout bounds the wait for a pooled connection of the reads
	// that use reader (WithAcquireTimeout); zero waits as long as ctx.
	acquireTimeout time.Duration
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// WithAcquireTimeout returns a Store on the same pool whose read-door
// statements (EventRows, EventCount, EventCountCandidates,
// AccessibleChannels, ChannelsAccessible, ThreadReplies) wait at most d for
// a pooled connection and then fail with pg.ErrAcquireTimeout
// (BUZZ_DB_ACQUIRE_TIMEOUT_MS). The read engine gets such a Store; ingest
// keeps the one that waits as long as its context.
func (s *Store) WithAcquireTimeout(d time.Duration) *Store {
	c := *s
	c.acquireTimeout = d
	return &c
}

// reader returns where one read-door statement runs: the pool itself, or
// with an acquire timeout a connection taken within it, which the caller
// gives back with release once its rows are read.
func (s *Store) reader(ctx context.Context) (q pg.Querier, release func(), err error) {
	if s.acquireTimeout <= 0 {
		return s.pool, func() {}, nil
	}
	conn, err := pg.Acquire(ctx, s.pool, s.acquireTimeout)
	if err != nil {
		return nil, nil, err
	}
	return conn, conn.Release, nil
}
