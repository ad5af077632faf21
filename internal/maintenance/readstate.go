package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// ReadStateStatementTimeout bounds every statement of ReadStateReport
// unless its caller gives another bound (docs/PROTOCOL.md §14.7).
const ReadStateStatementTimeout = 60 * time.Second

// The report's lines and arguments are the store's.
type (
	// ReadStateCommunity is one community's line of the report.
	ReadStateCommunity = store.ReadStateCommunity
	// ReadStateStorage is one events partition's storage line.
	ReadStateStorage = store.ReadStateStorage
	// ReadStateReportParams are the arguments of ReadStateReport.
	ReadStateReportParams = store.ReadStateReportParams
	// ReadStateReportResult is the report of docs/PROTOCOL.md §14.7.
	ReadStateReportResult = store.ReadStateReportResult
	// ReadStatePurge is what the purge migration (0007) removed from one
	// community.
	ReadStatePurge = store.ReadStatePurge
)

// Free-space methods of ReadStateStorage.Method.
const (
	FreeMethodPgstattuple = store.FreeMethodPgstattuple
	FreeMethodStatistics  = store.FreeMethodStatistics
)

// ReadStateReport computes the read-state retention report of docs/PROTOCOL.md §14.7:
// per community the conforming coordinates, rows, watermarks and purge
// totals, then per events partition its heap and TOAST sizes and an
// estimate of the free space in its heap. It needs migrations 0006 and
// 0007.
//
// It changes nothing: one READ ONLY, REPEATABLE READ transaction (every
// line comes from one snapshot) that takes only ACCESS SHARE locks, so it
// runs beside relay traffic and beside a migration's SHARE ROW EXCLUSIVE
// lock, with statement_timeout on every statement: timeout, or
// ReadStateStatementTimeout when timeout is 0. A Host that no community has returns an error matching
// pg.ErrNotFound. Safe to call at any time, any number of times.
func ReadStateReport(ctx context.Context, pool *pgxpool.Pool, p ReadStateReportParams, timeout time.Duration) (*ReadStateReportResult, error) {
	if timeout <= 0 {
		timeout = ReadStateStatementTimeout
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("read-state report: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", timeout.Milliseconds())); err != nil {
		return nil, fmt.Errorf("read-state report: set statement_timeout: %w", err)
	}
	return store.New(tx).ReadStateReport(ctx, p)
}

// ReadStatePurges returns, per community that lost rows to the purge
// migration, the rows and payload bytes recorded in
// read_state_retention_purges, primary host ascending (bytewise)
// (store.ReadStatePurges). It only reads, joins the caller's transaction
// when q is one, and needs migration 0007.
func ReadStatePurges(ctx context.Context, q pg.Querier) ([]ReadStatePurge, error) {
	return store.New(q).ReadStatePurges(ctx)
}
