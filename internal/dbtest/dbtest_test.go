package dbtest_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestNewDB(t *testing.T) {
	t.Parallel()

	for _, name := range []string{"First", "Second", "Third"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, url := dbtest.NewDB(t)
			require.NotEmpty(t, url)
			var n int
			require.NoError(t, pool.QueryRow(context.Background(),
				"SELECT count(*) FROM buzz_schema_migrations").Scan(&n))
			require.Positive(t, n)
		})
	}
}

func TestNewEmptyDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.NewEmptyDB(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass('buzz_schema_migrations') IS NOT NULL").Scan(&exists))
	require.False(t, exists)
}

func TestTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RolledBackWhenTheTestEnds", func(t *testing.T) {
		t.Parallel()
		host := "tx-" + rand.Text() + ".test"
		// A subtest of its own, so its cleanup (the rollback) runs before the check.
		t.Run("Writes", func(t *testing.T) {
			tx := dbtest.Tx(t)
			_, err := tx.Exec(ctx, "INSERT INTO communities (host) VALUES ($1)", host)
			require.NoError(t, err)
			require.Equal(t, 1, countHost(t, tx, host), "the transaction sees its own row")
		})
		tx := dbtest.Tx(t)
		require.Equal(t, 0, countHost(t, tx, host), "the row was not committed")
		// Had the first transaction stayed open, this insert of the same
		// unique host would wait for it; the lock timeout turns that into a failure.
		_, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '2s'")
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO communities (host) VALUES ($1)", host)
		require.NoError(t, err, "the first transaction has ended")
	})

	t.Run("TransactionsAreIsolated", func(t *testing.T) {
		t.Parallel()
		a, b := dbtest.Tx(t), dbtest.Tx(t)
		hostA, hostB := "tx-a-"+rand.Text()+".test", "tx-b-"+rand.Text()+".test"
		_, err := a.Exec(ctx, "INSERT INTO communities (host) VALUES ($1)", hostA)
		require.NoError(t, err)
		_, err = b.Exec(ctx, "INSERT INTO communities (host) VALUES ($1)", hostB)
		require.NoError(t, err)
		require.Equal(t, 1, countHost(t, a, hostA))
		require.Equal(t, 0, countHost(t, a, hostB), "a sees nothing of b")
		require.Equal(t, 1, countHost(t, b, hostB))
		require.Equal(t, 0, countHost(t, b, hostA), "b sees nothing of a")
	})

	t.Run("Migrated", func(t *testing.T) {
		t.Parallel()
		var n int
		require.NoError(t, dbtest.Tx(t).QueryRow(ctx, "SELECT count(*) FROM buzz_schema_migrations").Scan(&n))
		require.Positive(t, n)
	})

	t.Run("ParallelTestsShareOneDatabase", func(t *testing.T) {
		t.Parallel()
		names := make(chan string, 8)
		t.Run("Group", func(t *testing.T) {
			for i := range cap(names) {
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					t.Parallel()
					tx := dbtest.Tx(t)
					host := "tx-p-" + rand.Text() + ".test"
					_, err := tx.Exec(ctx, "INSERT INTO communities (host) VALUES ($1)", host)
					require.NoError(t, err)
					var n int
					require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM communities WHERE host LIKE 'tx-p-%'").Scan(&n))
					require.Equal(t, 1, n, "only its own row, whatever runs beside it")
					var db string
					require.NoError(t, tx.QueryRow(ctx, "SELECT current_database()").Scan(&db))
					names <- db
				})
			}
		})
		close(names)
		seen := map[string]bool{}
		for n := range names {
			seen[n] = true
		}
		require.Len(t, seen, 1, "one shared database per process")
	})
}

func countHost(t *testing.T, tx pgx.Tx, host string) int {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), "SELECT count(*) FROM communities WHERE host = $1", host).Scan(&n))
	return n
}
