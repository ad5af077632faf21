// Package pg is the PostgreSQL plumbing shared by every package that stores
// data: the connection pool, transactions with retry, the mapping of driver
// errors to sentinels, the embedded schema migrations and the monthly
// partitions of the events table.
//
// It owns: Open (pool with an acquire timeout and per-connection session
// settings: the created_at floor of the read replica proof, a statement
// timeout), InTx (BEGIN/COMMIT, retrying serialization failures and
// deadlocks), MapError (SQLSTATE → ErrNotFound, ErrDuplicate) and
// IsCreatedAtFloor (the only place that knows SQLSTATE codes), Migrate and
// MigrationStatus over the append-only files in migrations/, and
// EnsurePartitions.
//
// It does NOT know any domain: it has no queries about events, channels or
// communities (package store and friends do), it does NOT decide when to
// migrate (cmd/buzz-relay reads BUZZ_AUTO_MIGRATE) and it does NOT run a
// server (package pgcluster does).
package pg
