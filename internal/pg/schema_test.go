package pg_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// neverIndexed is docs/PROTOCOL.md §4.2's NEVER_INDEXED set (docs/PROTOCOL.md §12.1).
var neverIndexed = []int{1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func newCommunity(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(),
		"INSERT INTO communities (host) VALUES ($1) RETURNING id::text",
		fmt.Sprintf("h%x.example", randomBytes(4))).Scan(&id))
	return id
}

func insertEvent(ctx context.Context, pool *pgxpool.Pool, community string, kind int, createdAt time.Time, content string) ([]byte, error) {
	id := randomBytes(32)
	var dTag *string
	if kind >= 30000 && kind < 40000 {
		empty := ""
		dTag = &empty
	}
	_, err := pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag)
		VALUES ($1, $2, $3, $4, $5, '[]', $6, $7, $8)`,
		community, id, randomBytes(32), createdAt, kind, content, randomBytes(64), dTag)
	return id, err
}

// Every tenant table carries community_id (docs/PROTOCOL.md §3.1).
func TestSchemaTenancy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)

	global := map[string]bool{}
	rows, err := pool.Query(ctx, "SELECT table_name FROM _operator_global_tables")
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		global[name] = true
	}
	require.NoError(t, rows.Err())
	for _, name := range []string{"communities", "community_host_aliases", "buzz_schema_migrations", "_operator_global_tables"} {
		require.True(t, global[name], "%s must be registered", name)
	}

	// Every PK, unique index and FK of every ordinary or partitioned table in
	// public, with the name of its first column. Partitions count as their
	// root table (events).
	const keysSQL = `
WITH tbl AS (
	SELECT c.oid, c.relname,
	       COALESCE((SELECT p.relname FROM pg_partition_ancestors(c.oid) a
	                 JOIN pg_class p ON p.oid = a.relid
	                 WHERE NOT p.relispartition), c.relname) AS root
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
), keys AS (
	SELECT t.root, t.relname, i.indexrelid::regclass::text AS key,
	       CASE WHEN i.indkey[0] = 0 THEN NULL ELSE
	         (SELECT attname FROM pg_attribute WHERE attrelid = t.oid AND attnum = i.indkey[0]) END AS first_col
	FROM tbl t JOIN pg_index i ON i.indrelid = t.oid
	WHERE i.indisunique OR i.indisprimary
	UNION ALL
	SELECT t.root, t.relname, con.conname,
	       (SELECT attname FROM pg_attribute WHERE attrelid = t.oid AND attnum = con.conkey[1])
	FROM tbl t JOIN pg_constraint con ON con.conrelid = t.oid AND con.contype = 'f'
)
SELECT root, relname, key, COALESCE(first_col, '<expression>') FROM keys ORDER BY 1, 2, 3`
	rows, err = pool.Query(ctx, keysSQL)
	require.NoError(t, err)
	defer rows.Close()
	checked := map[string]bool{}
	for rows.Next() {
		var root, table, key, first string
		require.NoError(t, rows.Scan(&root, &table, &key, &first))
		if global[root] {
			continue
		}
		checked[root] = true
		require.Equal(t, "community_id", first, "table %s key %s must lead with community_id", table, key)
	}
	require.NoError(t, rows.Err())
	for _, name := range []string{"relay_members", "users", "channels", "channel_members", "events",
		"event_mentions", "thread_metadata", "reactions", "nip98_replay"} {
		require.True(t, checked[name], "tenant table %s has keys", name)
	}

	// Every tenant table has keys at all (a table with no PK would slip through above).
	var unkeyed []string
	rows2, err := pool.Query(ctx, `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)`)
	require.NoError(t, err)
	defer rows2.Close()
	for rows2.Next() {
		var name string
		require.NoError(t, rows2.Scan(&name))
		unkeyed = append(unkeyed, name)
	}
	require.NoError(t, rows2.Err())
	require.Empty(t, unkeyed, "tables without a primary key")
}

func TestEnsurePartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CurrentAndThreeAhead", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
		require.NoError(t, pg.EnsurePartitions(ctx, pool, now, pg.DefaultPartitionsAhead))
		require.NoError(t, pg.EnsurePartitions(ctx, pool, now, pg.DefaultPartitionsAhead), "idempotent")

		rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'events'::regclass ORDER BY 1`)
		require.NoError(t, err)
		var names []string
		for rows.Next() {
			var n string
			require.NoError(t, rows.Scan(&n))
			names = append(names, n)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"events_p2026_11", "events_p2026_12", "events_p2027_01", "events_p2027_02",
			"events_p_default"}, names)

		community := newCommunity(t, pool)
		lastSecond := time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
		id, err := insertEvent(ctx, pool, community, 9, lastSecond, "end of month")
		require.NoError(t, err)
		var part string
		require.NoError(t, pool.QueryRow(ctx, "SELECT tableoid::regclass::text FROM events WHERE id = $1", id).Scan(&part))
		require.Equal(t, "events_p2026_11", part)
		id, err = insertEvent(ctx, pool, community, 9, lastSecond.Add(time.Second), "start of month")
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, "SELECT tableoid::regclass::text FROM events WHERE id = $1", id).Scan(&part))
		require.Equal(t, "events_p2026_12", part)

		var inDefault int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM events_p_default").Scan(&inDefault))
		require.Zero(t, inDefault)

		// Partitions inherit the parent's indexes, the search GIN included.
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes
			WHERE tablename = 'events_p2027_02' AND indexdef LIKE '%USING gin (search_tsv)'`).Scan(&n))
		require.Equal(t, 1, n)

		// Every partition, the default one (migration 0004) and the new
		// ones alike, has dependency statistics on (community_id,
		// channel_id), so a channel-scoped search is estimated right.
		rows, err = pool.Query(ctx, `
			SELECT c.relname, s.stxname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			  LEFT JOIN pg_statistic_ext s ON s.stxrelid = c.oid AND 'd' = ANY(s.stxkind)
			   AND ARRAY(SELECT a.attname::text FROM pg_attribute a
			              WHERE a.attrelid = c.oid AND a.attnum = ANY(s.stxkeys) ORDER BY 1) = ARRAY['channel_id', 'community_id']
			 WHERE i.inhparent = 'events'::regclass ORDER BY 1`)
		require.NoError(t, err)
		stats := map[string]string{}
		for rows.Next() {
			var part string
			var stat *string
			require.NoError(t, rows.Scan(&part, &stat))
			stats[part] = ""
			if stat != nil {
				stats[part] = *stat
			}
		}
		rows.Close()
		require.NoError(t, rows.Err())
		require.Equal(t, map[string]string{
			"events_p2026_11": "events_p2026_11_community_channel", "events_p2026_12": "events_p2026_12_community_channel",
			"events_p2027_01": "events_p2027_01_community_channel", "events_p2027_02": "events_p2027_02_community_channel",
			"events_p_default": "events_p_default_community_channel",
		}, stats)

		// No partition's day-key GIN has ANALYZE compute statistics of its
		// expression: migration 0015 for the default partition, the
		// partitioned index and those that existed, EnsurePartitions for
		// the new ones (docs/PERFORMANCE.md "Statistics no plan reads").
		rows, err = pool.Query(ctx, `
			SELECT c.relname, a.attstattarget FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
			 WHERE i.inhparent = 'idx_events_search_day_keys'::regclass
			UNION ALL
			SELECT c.relname, a.attstattarget FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
			 WHERE c.relname = 'idx_events_search_day_keys' ORDER BY 1`)
		require.NoError(t, err)
		targets := map[string]int{}
		for rows.Next() {
			var idx string
			var target int
			require.NoError(t, rows.Scan(&idx, &target))
			targets[idx] = target
		}
		rows.Close()
		require.NoError(t, rows.Err())
		require.Equal(t, map[string]int{
			"events_p2026_11_search_day_keys_idx": 0, "events_p2026_12_search_day_keys_idx": 0,
			"events_p2027_01_search_day_keys_idx": 0, "events_p2027_02_search_day_keys_idx": 0,
			"events_p_default_search_day_keys_idx": 0, "idx_events_search_day_keys": 0,
		}, targets)

		// ANALYZE of a partition with searchable rows then leaves the
		// expression without statistics, and its searched column with them.
		_, err = pool.Exec(ctx, "ANALYZE events_p2026_12")
		require.NoError(t, err)
		var exprStats, tsvStats int
		require.NoError(t, pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_stats WHERE tablename = 'events_p2026_12_search_day_keys_idx'),
			(SELECT count(*) FROM pg_stats WHERE tablename = 'events_p2026_12' AND attname = 'search_tsv')`).Scan(&exprStats, &tsvStats))
		require.Zero(t, exprStats)
		require.Equal(t, 1, tsvStats)
	})

	t.Run("CurrentMonthFailureIsCurrent", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		community := newCommunity(t, pool)
		now := time.Date(2030, 3, 10, 0, 0, 0, 0, time.UTC)
		// A row of March 2030 in the default partition blocks its creation.
		_, err := insertEvent(ctx, pool, community, 9, now, "stray")
		require.NoError(t, err)
		err = pg.EnsurePartitions(ctx, pool, now, 3)
		var perr *pg.PartitionError
		require.ErrorAs(t, err, &perr)
		require.True(t, perr.Current)
		require.Equal(t, "events_p2030_03", perr.Month)
	})

	t.Run("FutureMonthFailureIsNotCurrent", func(t *testing.T) {
		t.Parallel()
		pool, _ := dbtest.NewDB(t)
		community := newCommunity(t, pool)
		_, err := insertEvent(ctx, pool, community, 9, time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC), "stray")
		require.NoError(t, err)
		err = pg.EnsurePartitions(ctx, pool, time.Date(2031, 4, 30, 23, 0, 0, 0, time.UTC), 3)
		var perr *pg.PartitionError
		require.ErrorAs(t, err, &perr)
		require.False(t, perr.Current)
		require.Equal(t, "events_p2031_06", perr.Month)
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('events_p2031_07') IS NOT NULL").Scan(&exists))
		require.True(t, exists, "later months are still created")
	})
}

func TestEventsKindCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	community := newCommunity(t, pool)
	for _, kind := range []int{22242, 20001, 20000, 29999} {
		_, err := insertEvent(ctx, pool, community, kind, time.Now(), "")
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "kind %d", kind)
		require.Equal(t, "23514", pgErr.Code)
		require.Equal(t, "events_kind_check", pgErr.ConstraintName)
	}
	_, err := insertEvent(ctx, pool, community, 19999, time.Now(), "")
	require.NoError(t, err)
}

func TestChannelCommunityImmutable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	a, b := newCommunity(t, pool), newCommunity(t, pool)
	const channel = "5b0e6a38-8a1c-4a57-9d3e-7c1f1c5f2d10"
	_, err := pool.Exec(ctx, "INSERT INTO channels (id, community_id, name, created_by) VALUES ($1, $2, 'general', $3)",
		channel, a, randomBytes(32))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE channels SET community_id = $1 WHERE id = $2", b, channel)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "channels.community_id is immutable (channel "+channel+" cannot be re-tenanted)", pgErr.Message)
	_, err = pool.Exec(ctx, "UPDATE channels SET name = 'renamed' WHERE id = $1", channel)
	require.NoError(t, err, "other columns stay updatable")
}

// docs/PROTOCOL.md §12.1: never-indexed kinds get a NULL search_tsv.
func TestSearchColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	community := newCommunity(t, pool)
	for _, kind := range neverIndexed {
		id, err := insertEvent(ctx, pool, community, kind, time.Now(), "secret words")
		require.NoError(t, err, "kind %d", kind)
		var isNull bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT search_tsv IS NULL FROM events WHERE id = $1", id).Scan(&isNull))
		require.True(t, isNull, "kind %d must never be indexed", kind)
	}
	id, err := insertEvent(ctx, pool, community, 9, time.Now(), "Deploy the relay")
	require.NoError(t, err)
	var found bool
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT search_tsv @@ to_tsquery('simple', 'deploy') FROM events WHERE id = $1", id).Scan(&found))
	require.True(t, found)
}
