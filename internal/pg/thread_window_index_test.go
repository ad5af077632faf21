package pg_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pg"
)

// windowIndexDef is the definition 0009 requires (docs/ARCHITECTURE.md, "Tables and migrations").
const windowIndexDef = "CREATE INDEX idx_thread_metadata_window ON public.thread_metadata USING btree (community_id, root_event_id, event_created_at DESC, event_id)"

const msgWindowIndex = "idx_thread_metadata_window invalid or wrong definition; see docs/OPERATIONS.md"

func windowIndexState(t *testing.T, q pg.Querier) (def string, valid bool) {
	t.Helper()
	require.NoError(t, q.QueryRow(context.Background(), `SELECT pg_get_indexdef(i.indexrelid), i.indisvalid AND i.indisready AND i.indislive
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname = 'idx_thread_metadata_window'`).Scan(&def, &valid))
	return def, valid
}

// The index 0009 builds has the exact definition, a second run
// is a no-op, and a prebuilt index is validated rather than trusted.
func TestThreadWindowIndexMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("BuildsTheExactDefinition", func(t *testing.T) {
		t.Parallel()
		pool := openAt(t, 9)
		def, valid := windowIndexState(t, pool)
		require.Equal(t, windowIndexDef, def)
		require.True(t, valid)
		applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, nil)
		require.NoError(t, err)
		require.Equal(t, filesFrom(10), applied, "only the later migrations")
		def, valid = windowIndexState(t, pool)
		require.Equal(t, windowIndexDef, def)
		require.True(t, valid)
		applied, err = pg.Migrate(ctx, pool, pg.MigrateApply, nil)
		require.NoError(t, err, "a migrated database migrates again as a no-op")
		require.Empty(t, applied)
	})

	t.Run("AcceptsAConcurrentPrebuild", func(t *testing.T) {
		t.Parallel()
		pool := openAt(t, 8)
		_, err := pool.Exec(ctx, `CREATE INDEX CONCURRENTLY idx_thread_metadata_window ON public.thread_metadata
			(community_id, root_event_id, event_created_at DESC, event_id)`)
		require.NoError(t, err)
		applied, err := pg.MigrateTo(ctx, pool, 9)
		require.NoError(t, err)
		require.Len(t, applied, 1)
		def, valid := windowIndexState(t, pool)
		require.Equal(t, windowIndexDef, def)
		require.True(t, valid)
	})

	t.Run("RefusesAWrongColumnOrder", func(t *testing.T) {
		t.Parallel()
		pool := openAt(t, 8)
		_, err := pool.Exec(ctx, `CREATE INDEX idx_thread_metadata_window ON public.thread_metadata
			(community_id, event_created_at DESC, root_event_id, event_id)`)
		require.NoError(t, err)
		_, err = pg.MigrateTo(ctx, pool, 9)
		require.ErrorIs(t, err, pg.ErrMigrationFailed)
		require.ErrorContains(t, err, msgWindowIndex)
		require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8}, ledgerVersions(t, pool), "nothing recorded")
	})

	t.Run("RefusesAnInvalidRemnant", func(t *testing.T) {
		t.Parallel()
		pool := openAt(t, 8)
		_, err := pool.Exec(ctx, `CREATE INDEX idx_thread_metadata_window ON public.thread_metadata
			(community_id, root_event_id, event_created_at DESC, event_id)`)
		require.NoError(t, err)
		// What a failed CREATE INDEX CONCURRENTLY leaves behind.
		_, err = pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false
			WHERE indexrelid = 'public.idx_thread_metadata_window'::regclass`)
		require.NoError(t, err)
		_, err = pg.MigrateTo(ctx, pool, 9)
		require.ErrorContains(t, err, msgWindowIndex)
	})

	t.Run("BoundsItsLockWait", func(t *testing.T) {
		t.Parallel()
		pool := openAt(t, 8)
		holder, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = holder.Rollback(ctx) }()
		_, err = holder.Exec(ctx, "LOCK TABLE thread_metadata IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		_, err = pg.MigrateTo(ctx, pool, 9)
		require.ErrorIs(t, err, pg.ErrMigrationFailed)
		require.ErrorContains(t, err, "55P03", "lock_timeout, not an endless wait")
	})
}
