package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// mtUpgraded returns a database migrated to 0001, given one event, then
// migrated to the latest: an upgraded installation (docs/PROTOCOL.md §12.1).
func mtUpgraded(t *testing.T) (*pgxpool.Pool, string, string) {
	t.Helper()
	ctx := context.Background()
	url := dbtest.NewEmptyDB(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	first := pg.Migrations()[0]
	_, err = pool.Exec(ctx, `CREATE TABLE buzz_schema_migrations (
		version INT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, first.SQL)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(first.SQL))
	_, err = pool.Exec(ctx, "INSERT INTO buzz_schema_migrations (version, name, checksum) VALUES (1, $1, $2)", first.Name, hex.EncodeToString(sum[:]))
	require.NoError(t, err)
	var community string
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO communities (host) VALUES ('up.example') RETURNING id::text").Scan(&community))
	mtInsert(t, pool, community, 9, "legacy")
	_, err = pg.Migrate(ctx, pool, pg.MigrateApply, nil)
	require.NoError(t, err)
	return pool, url, community
}

func mtInsert(t *testing.T, pool *pgxpool.Pool, community string, kind int, content string) {
	t.Helper()
	id, pub, sig := make([]byte, 32), make([]byte, 32), make([]byte, 64)
	_, _ = rand.Read(id)
	_, _ = rand.Read(pub)
	tags := "[]"
	if kind >= 30000 && kind < 40000 {
		tags = `[["d","x"]]`
	}
	_, err := pool.Exec(context.Background(), `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)`, community, id, pub, time.Now(), kind, tags, content, sig)
	require.NoError(t, err)
}

// mtFiles maps every events-family relation to its relfilenode.
func mtFiles(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		WITH parts AS (SELECT inhrelid AS oid FROM pg_inherits WHERE inhparent = 'events'::regclass)
		SELECT c.relname, c.relfilenode::bigint FROM pg_class c
		 WHERE c.oid IN (SELECT oid FROM parts)
		    OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE oid IN (SELECT oid FROM parts))
		    OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM parts))`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var n string
		var f int64
		require.NoError(t, rows.Scan(&n, &f))
		out[n] = f
	}
	require.NoError(t, rows.Err())
	return out
}

func TestSearchKindsCommand(t *testing.T) {
	t.Parallel()

	t.Run("ShowFresh", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		res := b.mustRun(t, "maintenance", "search-kinds", "--show")
		require.Contains(t, res.Stdout, "ARRAY[0, 9, 40002, 40003, 45001, 45003]")
		require.Contains(t, res.Stdout, "ARRAY[1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200]")
		require.Contains(t, res.Stdout, "effective policy: fresh\n")
		require.Contains(t, res.Stdout, "events_p_default")
		require.Contains(t, res.Stdout, "free space: unknown (check the database volume)")
		js := b.mustRun(t, "maintenance", "search-kinds", "--show", "--json").lines(t)
		require.Len(t, js, 1)
		require.Equal(t, "fresh", js[0]["policy"])
	})

	t.Run("UpgradedThenSet", func(t *testing.T) { // checks 5, 6 and 8
		t.Parallel()
		pool, url, community := mtUpgraded(t)
		env := baseEnv()
		env["DATABASE_URL"] = url
		res := runBinary(t, env, "maintenance", "search-kinds", "--show")
		require.Equal(t, 0, res.Code, res.Stderr)
		require.Contains(t, res.Stdout, "effective policy: upgraded, maintenance not run\n")
		mtInsert(t, pool, community, 40003, "editedtoken")
		mtInsert(t, pool, community, 1059, "editedtoken")
		files := mtFiles(t, pool)

		res = runBinary(t, env, "maintenance", "search-kinds", "--set", "0,9,40002,40003,45001,45003")
		require.Equal(t, 0, res.Code, res.Stderr)
		require.Contains(t, res.Stdout, "current kinds: 0,9,40002,45001,45003 (upgraded, maintenance not run)")
		require.Contains(t, res.Stdout, "target kinds:  0,9,40002,40003,45001,45003")
		require.Contains(t, res.Stdout, "headroom for a rewrite")
		require.Contains(t, res.Stdout, "nothing changed: add --yes to apply")
		require.Equal(t, files, mtFiles(t, pool), "without --yes nothing changes")

		res = runBinary(t, env, "maintenance", "search-kinds", "--set", "0,9,40002,40003,45001,45003", "--yes")
		require.Equal(t, 0, res.Code, res.Stderr)
		for _, step := range []string{"lock done", "drop done", "rewrite done", "index done", "commit done", "total "} {
			require.Contains(t, res.Stdout, step)
		}
		require.Contains(t, res.Stdout, "effective policy: fresh\n")
		var searchable, private int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE kind = 40003 AND search_tsv @@ 'editedtoken'::tsquery),
			count(*) FILTER (WHERE kind = 1059 AND search_tsv IS NOT NULL) FROM events`).Scan(&searchable, &private))
		require.Equal(t, 1, searchable)
		require.Zero(t, private)

		res = runBinary(t, env, "maintenance", "search-kinds", "--set", "45003,0,9,40002,40003,45001")
		require.Equal(t, 0, res.Code, res.Stderr)
		require.Contains(t, res.Stdout, "nothing to do")
	})

	// A running relay drops its hot windows and cached search pages when
	// the searchable kinds change (docs/OPERATIONS.md "Search cache"): the
	// command notifies buzz_hot_window with "*" once it committed.
	t.Run("SetTellsRelays", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, b.env["DATABASE_URL"])
		require.NoError(t, err)
		defer func() { _ = conn.Close(ctx) }()
		_, err = conn.Exec(ctx, "LISTEN "+store.HotWindowChannel)
		require.NoError(t, err)
		b.mustRun(t, "maintenance", "search-kinds", "--set", "0,9", "--yes")
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		require.NoError(t, err)
		require.Equal(t, store.HotWindowAll, n.Payload)
	})

	t.Run("RefusesPrivacyKinds", func(t *testing.T) {
		t.Parallel()
		b := setupCLI(t)
		pool, err := pgxpool.New(context.Background(), b.env["DATABASE_URL"])
		require.NoError(t, err)
		defer pool.Close()
		files := mtFiles(t, pool)
		res := b.run(t, "maintenance", "search-kinds", "--set", "0,9,1059", "--yes")
		require.Equal(t, 1, res.Code)
		require.Contains(t, res.Stderr, "kind 1059 is privacy-excluded and can never be searchable")
		require.Equal(t, files, mtFiles(t, pool))
		res = b.run(t, "maintenance", "search-kinds", "--set", "9,20001")
		require.Equal(t, 1, res.Code)
		require.Contains(t, res.Stderr, "kind 20001 is ephemeral and never stored")
	})
}

// snakeCase is a JSON key of operator output: lower-case words joined by "_".
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// jsonKeys returns every object key in v, at any depth, with its path.
func jsonKeys(path string, v any) map[string]string {
	out := map[string]string{}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			out[path+"."+k] = k
			for p, key := range jsonKeys(path+"."+k, child) {
				out[p] = key
			}
		}
	case []any:
		for i, child := range x {
			for p, key := range jsonKeys(fmt.Sprintf("%s[%d]", path, i), child) {
				out[p] = key
			}
		}
	}
	return out
}

// Issue 10: search-kinds --show --json uses snake_case keys throughout,
// nested partition sizes included, and keeps the contents of docs/PROTOCOL.md §12.10.
func TestSearchKindsJSONKeys(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	lines := b.mustRun(t, "maintenance", "search-kinds", "--show", "--json").lines(t)
	require.Len(t, lines, 1)
	out := lines[0]

	parts, ok := out["partitions"].([]any)
	require.True(t, ok, "partitions: %v", out["partitions"])
	require.NotEmpty(t, parts, "a partition to check the nested keys of")
	total, ok := out["total"].(map[string]any)
	require.True(t, ok, "total: %v", out["total"])
	require.ElementsMatch(t, []string{"name", "heap_bytes", "toast_bytes", "search_gin_bytes", "other_indexes_bytes", "total_bytes"}, keys(total))
	require.ElementsMatch(t, keys(total), keys(parts[0].(map[string]any)))
	for _, k := range []string{"expression", "searchable_kinds", "policy", "headroom_bytes", "free_space_bytes", "migrations"} {
		require.Contains(t, out, k)
	}

	all := jsonKeys("", out)
	require.Greater(t, len(all), 15)
	for path, key := range all {
		require.Regexp(t, snakeCase, key, "key at %s", path)
	}
}
