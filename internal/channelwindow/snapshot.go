package channelwindow

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// customPlans makes every statement of the transaction planned for its
// own parameters. A cached generic plan cannot know where a keyset page
// starts, and was seen to rescan every aux match of a row on each of its
// pages; a custom plan starts the index scan at the page position.
const customPlans = "SET LOCAL plan_cache_mode = force_custom_plan"

// onWriter runs fn in one REPEATABLE READ READ ONLY transaction on the
// writer, so rows, aux and summaries come from one snapshot.
func (e *Engine) onWriter(ctx context.Context, fn func(pg.Querier) error) error {
	tx, err := e.cfg.Store.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin window snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := onSession(ctx, tx, fn); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("end window snapshot: %w", err)
	}
	return nil
}

// onSession runs fn inside the open transaction q (the writer's, or a
// proved replica session) after customPlans.
func onSession(ctx context.Context, q pg.Querier, fn func(pg.Querier) error) error {
	if _, err := q.Exec(ctx, customPlans); err != nil {
		return fmt.Errorf("set custom plans: %w", err)
	}
	return fn(q)
}
