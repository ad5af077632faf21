package store_test

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// txBundle is a rolled-back transaction with two communities in it, for
// the methods that take their querier as an argument. s has no pool: a
// method that reached for one would fail the test at once.
type txBundle struct {
	tx   pgx.Tx
	s    *store.Store
	a, b string // community ids; b is the one that must never see a's rows
}

func setupTx(t *testing.T) *txBundle {
	t.Helper()
	tx := dbtest.Tx(t)
	return &txBundle{tx: tx, s: store.New(tx),
		a: fixture.Community(t, tx).ID, b: fixture.Community(t, tx).ID}
}

// poolBundle is a database of the test's own, for the statements that
// commit, lock across sessions or open their own transaction. Subtests
// share it and each creates its own communities.
type poolBundle struct {
	pool *pgxpool.Pool
	s    *store.Store // on pool
}

func setupPool(t *testing.T) *poolBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	return &poolBundle{pool: pool, s: store.New(pool)}
}

// community creates a community on the bundle's pool.
func (b *poolBundle) community(t *testing.T) string {
	t.Helper()
	return fixture.Community(t, b.pool).ID
}

// count runs a count(*) query on q.
func count(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}
