package threadwindow

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// rollbackTimeout bounds the rollback of a window transaction, which runs
// even after the batch's context ended.
const rollbackTimeout = 2 * time.Second

// onWriter runs fn in one REPEATABLE READ READ ONLY transaction on the
// writer, opened with the SET LOCALs of §5.4, on a connection taken within
// the pool's acquire timeout. The transaction is rolled back afterwards.
func (e *Engine) onWriter(ctx context.Context, fn func(pg.Querier) error) error {
	conn, err := pg.Acquire(ctx, e.cfg.Store.Pool(), 0)
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
	if err := prepare(ctx, tx); err != nil {
		return err
	}
	return fn(tx)
}

// prepare applies §5.4's statement timeout, lock timeout and custom plans
// to the window transaction q.
func prepare(ctx context.Context, q pg.Querier) error {
	if _, err := q.Exec(ctx, setLocal); err != nil {
		return fmt.Errorf("window transaction settings: %w", err)
	}
	return nil
}
