package pg_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

func TestInTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CommitsAndRollsBack", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		require.NoError(t, pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO communities (host) VALUES ('kept.example')")
			return err
		}))
		boom := errors.New("boom")
		err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO communities (host) VALUES ('dropped.example')"); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		var hosts []string
		rows, err := pool.Query(ctx, "SELECT host FROM communities ORDER BY host")
		require.NoError(t, err)
		hosts, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"kept.example"}, hosts)
	})

	t.Run("RetriesSerializationFailure", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		var calls atomic.Int32
		err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			if calls.Add(1) < 3 {
				return &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
			}
			return nil
		})
		require.NoError(t, err)
		require.EqualValues(t, 3, calls.Load())
	})

	t.Run("GivesUpAfterThreeRetries", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		var calls atomic.Int32
		err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			calls.Add(1)
			return &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
		})
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.EqualValues(t, 4, calls.Load())
	})
}

func TestMapError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)

	var host string
	err := pg.MapError(pool.QueryRow(ctx, "SELECT host FROM communities WHERE false").Scan(&host))
	require.ErrorIs(t, err, pg.ErrNotFound)
	require.ErrorIs(t, err, pgx.ErrNoRows)

	_, err = pool.Exec(ctx, "INSERT INTO communities (host) VALUES ('dup.example')")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO communities (host) VALUES ('DUP.example')")
	err = pg.MapError(err)
	require.ErrorIs(t, err, pg.ErrDuplicate)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)

	other := errors.New("other")
	require.Equal(t, other, pg.MapError(other))
	require.NoError(t, pg.MapError(nil))
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AcquireTimesOut", func(t *testing.T) {
		t.Parallel()
		_, url := dbtest.NewDB(t)
		pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1})
		require.NoError(t, err)
		defer pool.Close()
		held, err := pg.Acquire(ctx, pool, 0)
		require.NoError(t, err)
		defer held.Release()
		_, err = pg.Acquire(ctx, pool, 50*time.Millisecond)
		require.ErrorIs(t, err, pg.ErrAcquireTimeout)
	})

	t.Run("BadURLHidesIt", func(t *testing.T) {
		t.Parallel()
		_, err := pg.Open(ctx, "postgres://u:secret@[bad", pg.PoolConfig{})
		require.Error(t, err)
		require.NotContains(t, err.Error(), "secret")
	})

	t.Run("UnreachableServerFails", func(t *testing.T) {
		t.Parallel()
		_, err := pg.Open(ctx, "postgres://u@/db?host="+t.TempDir(), pg.PoolConfig{AcquireTimeout: time.Second})
		require.ErrorContains(t, err, "open database: ping")
	})
}
