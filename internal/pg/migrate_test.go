package pg_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

func TestMigrationFiles(t *testing.T) {
	t.Parallel()

	t.Run("EmbeddedFilesAreContiguous", func(t *testing.T) {
		t.Parallel()
		list := pg.Migrations()
		require.NotEmpty(t, list)
		require.Equal(t, "0001_core.sql", list[0].Name)
		require.NoError(t, pg.CheckSequence(list))
		for _, m := range list {
			require.Len(t, m.Checksum, 64)
			require.NotEmpty(t, m.SQL)
		}
	})

	t.Run("GapFails", func(t *testing.T) {
		t.Parallel()
		list, err := pg.LoadMigrations(fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("SELECT 1")},
			"migrations/0003_c.sql": {Data: []byte("SELECT 1")},
		})
		require.NoError(t, err)
		require.ErrorContains(t, pg.CheckSequence(list), "0003_c.sql: expected version 0002")
	})

	t.Run("DuplicateFails", func(t *testing.T) {
		t.Parallel()
		list, err := pg.LoadMigrations(fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("SELECT 1")},
			"migrations/0001_b.sql": {Data: []byte("SELECT 1")},
		})
		require.NoError(t, err)
		require.Error(t, pg.CheckSequence(list))
	})

	t.Run("BadNameFails", func(t *testing.T) {
		t.Parallel()
		_, err := pg.LoadMigrations(fstest.MapFS{"migrations/1_a.sql": {Data: []byte("SELECT 1")}})
		require.ErrorContains(t, err, "NNNN_snake_name.sql")
	})
}

func fileNames() []string {
	var names []string
	for _, m := range pg.Migrations() {
		names = append(names, m.Name)
	}
	return names
}

func openEmpty(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, dbtest.NewEmptyDB(t), pg.PoolConfig{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A second run applies nothing (docs/PROTOCOL.md §3.4).
	t.Run("SecondRunChangesNothing", func(t *testing.T) {
		t.Parallel()
		pool := openEmpty(t)
		applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
		require.NoError(t, err)
		require.Equal(t, fileNames(), applied)

		status, err := pg.MigrationStatus(ctx, pool)
		require.NoError(t, err)
		require.Len(t, status, len(pg.Migrations()))
		for _, st := range status {
			require.NotNil(t, st.AppliedAt, st.Name)
		}

		applied, err = pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
		require.NoError(t, err)
		require.Empty(t, applied)
		again, err := pg.MigrationStatus(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, status, again)
		_, err = pg.Migrate(ctx, pool, pg.MigrateCheck, nil)
		require.NoError(t, err, "nothing pending")
	})

	t.Run("StatusOfEmptyDatabase", func(t *testing.T) {
		t.Parallel()
		status, err := pg.MigrationStatus(ctx, openEmpty(t))
		require.NoError(t, err)
		require.Len(t, status, len(pg.Migrations()))
		require.Nil(t, status[0].AppliedAt)
		require.Equal(t, "0001_core.sql", status[0].Name)
	})

	t.Run("ChecksumMismatch", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		_, err := pool.Exec(ctx, "UPDATE buzz_schema_migrations SET checksum = 'deadbeef' WHERE version = 1")
		require.NoError(t, err)
		_, err = pg.Migrate(ctx, pool, pg.MigrateApply, nil)
		require.EqualError(t, err, "migration 0001_core.sql was modified after it was applied (checksum mismatch)")
		require.ErrorIs(t, err, pg.ErrChecksumMismatch)
	})

	t.Run("SchemaNewerThanBinary", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		_, err := pool.Exec(ctx, "INSERT INTO buzz_schema_migrations (version, name, checksum) VALUES (9999, '9999_future.sql', 'x')")
		require.NoError(t, err)
		_, err = pg.Migrate(ctx, pool, pg.MigrateCheck, nil)
		require.EqualError(t, err, "database schema version 9999 is newer than this binary (knows up to "+
			strconv.Itoa(len(pg.Migrations()))+")")
		require.ErrorIs(t, err, pg.ErrSchemaTooNew)

		status, err := pg.MigrationStatus(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, 9999, status[len(status)-1].Version)
	})

	t.Run("PendingWithCheckMode", func(t *testing.T) {
		t.Parallel()
		pool := openEmpty(t)
		_, err := pg.Migrate(ctx, pool, pg.MigrateCheck, nil)
		require.EqualError(t, err, "database has pending migrations ("+strings.Join(fileNames(), ", ")+
			`); run "buzz-relay migrate" or set BUZZ_AUTO_MIGRATE=true`)
		require.ErrorIs(t, err, pg.ErrPendingMigrations)
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('events') IS NOT NULL").Scan(&exists))
		require.False(t, exists, "check mode applies nothing")
	})

	t.Run("FailedMigrationRollsBack", func(t *testing.T) {
		t.Parallel()
		pool := openEmpty(t)
		// Make 0001 fail: a type it creates already exists.
		_, err := pool.Exec(ctx, "CREATE TYPE channel_type AS ENUM ('x')")
		require.NoError(t, err)
		_, err = pg.Migrate(ctx, pool, pg.MigrateApply, nil)
		require.EqualError(t, err, `migration 0001_core.sql failed: 42710 type "channel_type" already exists`)
		require.ErrorIs(t, err, pg.ErrMigrationFailed)
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM buzz_schema_migrations").Scan(&n))
		require.Zero(t, n)
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('communities') IS NOT NULL").Scan(&exists))
		require.False(t, exists)
	})

	t.Run("ConcurrentRunsApplyOnce", func(t *testing.T) {
		t.Parallel()
		url := dbtest.NewEmptyDB(t)
		const runners = 4
		var wg sync.WaitGroup
		errs := make([]error, runners)
		applied := make([][]string, runners)
		for i := range runners {
			pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2})
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			wg.Add(1)
			go func() {
				defer wg.Done()
				applied[i], errs[i] = pg.Migrate(ctx, pool, pg.MigrateApply, nil)
			}()
		}
		wg.Wait()
		total := 0
		for i := range runners {
			require.NoError(t, errs[i])
			total += len(applied[i])
		}
		require.Equal(t, len(pg.Migrations()), total)

		pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1})
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		rows, err := pool.Query(ctx, "SELECT version, count(*) FROM buzz_schema_migrations GROUP BY version ORDER BY version")
		require.NoError(t, err)
		defer rows.Close()
		seen := 0
		for rows.Next() {
			var version, n int
			require.NoError(t, rows.Scan(&version, &n))
			require.Equal(t, 1, n, "version %d", version)
			seen++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, len(pg.Migrations()), seen)
	})
}
