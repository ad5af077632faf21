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
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store runs statements on a pool; methods that must be atomic with other
// writes take a pg.Querier (a pgx.Tx) instead.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
