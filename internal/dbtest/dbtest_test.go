package dbtest_test

import (
	"context"
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
