package window

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
)

// rollbackTimeout bounds the rollback of a window transaction, which runs
// even after the request's context ended.
const rollbackTimeout = 2 * time.Second

// session is how a mode runs its window transactions, on the writer or a
// proved replica session.
type session struct {
	// settings are the SET LOCALs every transaction opens with.
	settings string
	// acquireTimeout takes a writer connection within the pool's acquire
	// timeout (pg.ErrAcquireTimeout after it); without it the wait lasts
	// as long as ctx.
	acquireTimeout bool
}

// Every statement of a window transaction is planned for its own
// parameters (plan_cache_mode): a cached generic plan cannot know where a
// keyset page starts, and was seen to rescan every aux match of a row on
// each of its pages; a custom plan starts the index scan at the page
// position. Thread mode also bounds each statement and lock wait
// (docs/NIP-CW.md §5.7: a timeout is a 503).
var (
	channelSession = session{settings: "SET LOCAL plan_cache_mode = force_custom_plan"}
	threadSession  = session{
		settings:       "SET LOCAL statement_timeout = '4000ms'; SET LOCAL lock_timeout = '1000ms'; SET LOCAL plan_cache_mode = force_custom_plan",
		acquireTimeout: true,
	}
)

// onWriter runs fn in one REPEATABLE READ READ ONLY transaction on the
// writer, opened with s's settings, so every statement of a page reads
// one snapshot. The transaction is rolled back afterwards: it wrote
// nothing.
func (e *Engine) onWriter(ctx context.Context, s session, fn func(pg.Querier) error) error {
	var (
		conn *pgxpool.Conn
		err  error
	)
	if s.acquireTimeout {
		conn, err = pg.Acquire(ctx, e.cfg.Pool, 0)
	} else {
		conn, err = e.cfg.Pool.Acquire(ctx)
	}
	if err != nil {
		return fmt.Errorf("window transaction: %w", err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("window transaction: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := s.prepare(ctx, tx); err != nil {
		return err
	}
	return fn(tx)
}

// prepare applies s's settings to the open transaction q (the writer's,
// or a proved replica session's).
func (s session) prepare(ctx context.Context, q pg.Querier) error {
	if _, err := q.Exec(ctx, s.settings); err != nil {
		return fmt.Errorf("window transaction settings: %w", err)
	}
	return nil
}
