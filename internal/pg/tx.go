package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txRetries is how many times InTx re-runs a transaction that failed with a
// serialization failure or a deadlock.
const txRetries = 3

// InTx runs fn inside BEGIN … COMMIT on a pooled connection. When fn returns
// an error the transaction rolls back and the error is returned unchanged.
// A serialization failure (40001) or deadlock (40P01), from fn or from
// COMMIT, re-runs the whole transaction up to 3 more times, so fn must have
// no side effects outside the transaction. Do not call it inside another
// transaction.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := runTx(ctx, pool, fn)
		if err == nil || attempt >= txRetries || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
}

func runTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) (err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
