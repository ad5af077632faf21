// Package store holds the relay's SQL: one file per entity (communities,
// relay members, events, channels, threads, read state, the NIP-98 replay
// table, operator listeners, the NIP-CW windows' statements), each a method
// on Store named entity-first.
//
// It owns every statement on the tables docs/ARCHITECTURE.md "Table
// ownership" gives it. It does NOT decide policy (ingest and read do), does
// NOT open transactions for its callers (a Store made over a transaction
// joins it; CommunityAdd and CommunityAddHost open their own only on a
// pool), and does NOT cache anything. BatchPipe (pipe.go) is the one part
// that does not run on a querier: it keeps a connection of its own for the
// group commit's batches, two of which may be on their way at once.
package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
)

// Store runs every statement on the one querier it was made over: a pool,
// a connection, or a transaction (pgx.Tx), whose statements it then joins.
// A Store is a small value: make one per transaction with New(tx).
type Store struct {
	q pg.Querier
}

// New returns a Store whose statements run on q.
func New(q pg.Querier) *Store { return &Store{q: q} }

// NewReader returns a Store on pool whose every statement first takes a
// pooled connection within acquireTimeout and fails with
// pg.ErrAcquireTimeout after it (BUZZ_DB_ACQUIRE_TIMEOUT_MS), giving the
// connection back once its rows are read. The read door's statements run
// on such a Store; ingest's wait as long as their context. An
// acquireTimeout of zero or less is New(pool).
func NewReader(pool *pgxpool.Pool, acquireTimeout time.Duration) *Store {
	if acquireTimeout <= 0 {
		return New(pool)
	}
	return New(&bounded{pool: pool, timeout: acquireTimeout})
}

// withTx runs fn in a transaction on the Store's querier: pg.InTx (with
// its serialization retries) on a pool, a savepoint in a caller's
// transaction.
func (s *Store) withTx(ctx context.Context, fn func(*Store) error) error {
	switch q := s.q.(type) {
	case *pgxpool.Pool:
		return pg.InTx(ctx, q, func(tx pgx.Tx) error { return fn(New(tx)) })
	case interface {
		Begin(context.Context) (pgx.Tx, error)
	}:
		return pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error { return fn(New(tx)) })
	default:
		return errNoTx
	}
}
