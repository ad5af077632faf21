package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

const (
	freshArray   = "ARRAY[0, 9, 40002, 40003, 45001, 45003]"
	upArray      = "ARRAY[0, 9, 40002, 45001, 45003]"
	privacyArray = "ARRAY[1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200]"
)

// privacyInvariant is the invariant of docs/PROTOCOL.md §12.1 as a function, so the test can show
// that it fails on a broken set.
func privacyInvariant(privacy []int, neverIndexed event.KindSet, gated ...event.KindSet) []string {
	var bad []string
	for k := range neverIndexed {
		if !slices.Contains(privacy, k) {
			bad = append(bad, "NEVER_INDEXED has "+strconv.Itoa(k)+" but the privacy list does not")
		}
	}
	for _, k := range privacy {
		if !neverIndexed.Has(k) {
			bad = append(bad, "the privacy list has "+strconv.Itoa(k)+" but NEVER_INDEXED does not")
		}
	}
	for _, set := range gated {
		for k := range set {
			if !event.IsEphemeral(k) && !slices.Contains(privacy, k) {
				bad = append(bad, "stored gated kind "+strconv.Itoa(k)+" is not privacy-excluded")
			}
		}
	}
	return bad
}

func TestPrivacyInvariant(t *testing.T) {
	t.Parallel()
	engram := event.KindSet{event.KindEngram: {}}
	require.Empty(t, privacyInvariant(PrivacyKinds, event.NeverIndexed, event.PGated, event.AuthorOnly, event.ResultGated, engram))
	require.True(t, slices.IsSorted(PrivacyKinds))

	// The check bites: a stored kind added to a gate set, or a privacy list
	// that differs from NEVER_INDEXED, fails it.
	gatedPlus := event.KindSet{31234: {}, 24200: {}}
	for k := range event.PGated {
		gatedPlus[k] = struct{}{}
	}
	require.NotEmpty(t, privacyInvariant(PrivacyKinds, event.NeverIndexed, gatedPlus))
	require.NotEmpty(t, privacyInvariant(PrivacyKinds[1:], event.NeverIndexed))
	require.NotEmpty(t, privacyInvariant(append(slices.Clone(PrivacyKinds), 31234), event.NeverIndexed))
	// Ephemeral gated kinds (24200) need no entry.
	require.Empty(t, privacyInvariant(PrivacyKinds, event.NeverIndexed, event.KindSet{24200: {}}))
}

func TestParseKinds(t *testing.T) {
	t.Parallel()
	got, err := ParseKinds("45003, 9,0,9,40002")
	require.NoError(t, err)
	require.Equal(t, []int{0, 9, 40002, 45003}, got)
	_, err = ParseKinds("0,9,1059")
	require.EqualError(t, err, "kind 1059 is privacy-excluded and can never be searchable")
	_, err = ParseKinds("9,20001")
	require.EqualError(t, err, "kind 20001 is ephemeral and never stored")
	for _, bad := range []string{"", " , ", "9,65536", "-1", "x"} {
		_, err = ParseKinds(bad)
		require.Error(t, err, bad)
	}
}

func TestPolicyFresh(t *testing.T) {
	t.Parallel()

	t.Run("Catalog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		expr, err := StoredExpression(context.Background(), b.pool)
		require.NoError(t, err)
		require.Contains(t, expr, freshArray)
		require.Contains(t, expr, privacyArray)
		require.Contains(t, expr, "to_tsvector('simple'::regconfig, content)")
		kinds, err := EffectiveKinds(context.Background(), b.pool, expr, ProbeKinds())
		require.NoError(t, err)
		require.Equal(t, FreshKinds, kinds)
		require.Equal(t, PolicyFresh, Classify(kinds))
	})

	t.Run("SearchableKinds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		kinds := []int{0, 1, 9, 40002, 40003, 45001, 45003, 1059, 30350}
		ids := map[string]int{}
		for _, k := range kinds {
			ids[b.insert(t, row{kind: k, content: "kindtoken"})[0]] = k
		}
		var got []int
		for _, id := range b.search(t, Query{Text: "kindtoken", Scope: Any()}) {
			got = append(got, ids[id])
		}
		slices.Sort(got)
		require.Equal(t, FreshKinds, got)
	})

	t.Run("PrivacyKindsNeverMatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, k := range PrivacyKinds {
			tags := "[]"
			if event.IsAddressable(k) {
				tags = `[["d","x"]]`
			}
			b.insert(t, row{kind: k, content: "privtoken secret", tags: tags})
		}
		control := b.insert(t, row{kind: 9, content: "privtoken secret"})
		var nulls int
		require.NoError(t, b.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM events WHERE community_id = $1 AND kind = ANY($2) AND search_tsv IS NULL",
			b.community, PrivacyKinds).Scan(&nulls))
		require.Equal(t, len(PrivacyKinds), nulls)
		require.Equal(t, control, b.search(t, Query{Text: "privtoken", Scope: Any()}))
		require.Equal(t, control, b.search(t, Query{Text: "privto", Scope: Any(), Mode: Prefix}))
		require.Empty(t, b.search(t, Query{Text: "privtoken", Scope: Any(), Kinds: PrivacyKinds}))
	})

	t.Run("WrapMigration", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		applyWrap(t, b.pool, 31234)
		b.insert(t, row{kind: 31234, content: "wraptoken", tags: `[["d","x"]]`})
		b.insert(t, row{kind: 40003, content: "wraptoken"})
		requireNullKind(t, b.pool, 31234)
		expr, err := StoredExpression(context.Background(), b.pool)
		require.NoError(t, err)
		kinds, err := EffectiveKinds(context.Background(), b.pool, expr, append(ProbeKinds(), 31234))
		require.NoError(t, err)
		require.Equal(t, FreshKinds, kinds, "the fresh allowlist survives the wrap")
		require.Len(t, b.search(t, Query{Text: "wraptoken", Scope: Any()}), 1)
	})

	t.Run("Sizes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		require.NoError(t, pg.EnsurePartitions(ctx, b.pool, time.Now(), 2))
		rows := make([]row, 300)
		for i := range rows {
			rows[i] = row{kind: 9, content: strings.Repeat("size words here ", 50)}
		}
		b.insert(t, rows...)
		parts, total, err := Sizes(ctx, b.pool)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(parts), 3)
		manual := map[string]int64{}
		r, err := b.pool.Query(ctx, `SELECT relname, pg_total_relation_size(relid) FROM pg_catalog.pg_statio_user_tables
			WHERE relname LIKE 'events_p%' ORDER BY pg_total_relation_size(relid) DESC`)
		require.NoError(t, err)
		for r.Next() {
			var n string
			var s int64
			require.NoError(t, r.Scan(&n, &s))
			manual[n] = s
		}
		require.NoError(t, r.Err())
		var sum int64
		for i, p := range parts {
			require.Equal(t, manual[p.Name], p.Total, p.Name)
			require.Equal(t, p.Total, p.Heap+p.TOAST+p.SearchGIN+p.OtherIndexes, p.Name)
			require.Positive(t, p.SearchGIN, "the search GIN of %s is listed", p.Name)
			if i > 0 {
				require.GreaterOrEqual(t, parts[i-1].Total, p.Total, "largest first")
			}
			sum += p.Total
		}
		require.Len(t, parts, len(manual))
		require.Equal(t, sum, total.Total)
		require.Equal(t, 2*total.Total, Headroom(total))
	})
}

// applyWrap runs the wrap pattern of docs/PROTOCOL.md §12.1 for kind k, as a
// migration would.
func applyWrap(t *testing.T, pool *pgxpool.Pool, k int) {
	t.Helper()
	ctx := context.Background()
	expr, err := StoredExpression(ctx, pool)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ALTER TABLE events DROP COLUMN search_tsv; "+
		"ALTER TABLE events ADD COLUMN search_tsv TSVECTOR GENERATED ALWAYS AS (CASE WHEN kind = "+strconv.Itoa(k)+
		" THEN NULL::tsvector ELSE ("+expr+") END) STORED; "+
		"CREATE INDEX idx_events_search_tsv ON events USING GIN (search_tsv)")
	require.NoError(t, err)
}

func requireNullKind(t *testing.T, pool *pgxpool.Pool, k int) {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM events WHERE kind = $1 AND search_tsv IS NOT NULL", k).Scan(&n))
	require.Zero(t, n, "kind %d has a search_tsv", k)
}

// upgradedDB returns a database migrated to 0001 only, with one event in a
// monthly partition, then migrated to the latest: the upgraded installation.
func upgradedDB(t *testing.T) (*pgxpool.Pool, string, map[string]uint32) {
	t.Helper()
	ctx := context.Background()
	url := dbtest.NewEmptyDB(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	first := pg.Migrations()[0]
	require.Equal(t, "0001_core.sql", first.Name)
	_, err = pool.Exec(ctx, `CREATE TABLE buzz_schema_migrations (
		version INT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, first.SQL)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(first.SQL))
	_, err = pool.Exec(ctx, "INSERT INTO buzz_schema_migrations (version, name, checksum) VALUES (1, $1, $2)", first.Name, hex.EncodeToString(sum[:]))
	require.NoError(t, err)
	require.NoError(t, pg.EnsurePartitions(ctx, pool, time.Now(), 1))
	var community string
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO communities (host) VALUES ('upgraded.example') RETURNING id::text").Scan(&community))
	insertRows(t, pool, community, row{kind: 9, content: "legacy message", at: time.Now().Unix()})
	before := relfilenodes(t, pool)
	applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, nil)
	require.NoError(t, err)
	require.Contains(t, applied, "0002_search_allowlist_edits.sql")
	return pool, community, before
}

// relfilenodes maps every events-family relation (partitions, their TOAST
// tables and TOAST indexes, their indexes) to its relfilenode.
func relfilenodes(t *testing.T, pool *pgxpool.Pool) map[string]uint32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		WITH parts AS (SELECT inhrelid AS oid FROM pg_inherits WHERE inhparent = 'events'::regclass),
		     fam AS (
		       SELECT oid FROM parts
		       UNION SELECT reltoastrelid FROM pg_class WHERE oid IN (SELECT oid FROM parts) AND reltoastrelid <> 0
		       UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM parts)
		       UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (
		             SELECT reltoastrelid FROM pg_class WHERE oid IN (SELECT oid FROM parts) AND reltoastrelid <> 0))
		SELECT c.relname, c.relfilenode::bigint FROM pg_class c JOIN fam ON fam.oid = c.oid`)
	require.NoError(t, err)
	out := map[string]uint32{}
	for rows.Next() {
		var n string
		var f int64
		require.NoError(t, rows.Scan(&n, &f))
		out[n] = uint32(f)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out)
	return out
}

func TestPolicyUpgraded(t *testing.T) {
	t.Parallel()

	t.Run("PopulatedKeepsExpression", func(t *testing.T) {
		t.Parallel()
		pool, community, before := upgradedDB(t)
		ctx := context.Background()
		var recorded bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM buzz_schema_migrations WHERE version = 2)").Scan(&recorded))
		require.True(t, recorded)
		expr, err := StoredExpression(ctx, pool)
		require.NoError(t, err)
		require.Contains(t, expr, upArray)
		require.NotContains(t, expr, "40003")
		after := relfilenodes(t, pool)
		for name, node := range before {
			require.Equal(t, node, after[name], "no events-family relation was rewritten: %s", name)
		}
		insertRows(t, pool, community, row{kind: 40003, content: "edited later", at: time.Now().Unix()})
		requireNullKind(t, pool, 40003)
		kinds, err := EffectiveKinds(ctx, pool, expr, ProbeKinds())
		require.NoError(t, err)
		require.Equal(t, PolicyUpgraded, Classify(kinds))
	})

	t.Run("RewriteConverges", func(t *testing.T) {
		t.Parallel()
		pool, community, _ := upgradedDB(t)
		ctx := context.Background()
		edit := insertRows(t, pool, community, row{kind: 40003, content: "edittoken", at: time.Now().Unix()})
		insertRows(t, pool, community, row{kind: 1059, content: "edittoken", at: time.Now().Unix()},
			row{kind: 30350, content: "edittoken", at: time.Now().Unix(), tags: `[["d","x"]]`})
		var lines []string
		require.NoError(t, Rewrite(ctx, RewriteConfig{Pool: pool, Kinds: FreshKinds, ProgressFunc: func(l string) { lines = append(lines, l) }}))
		for _, stepName := range []string{"lock", "drop", "rewrite", "index", "commit", "total"} {
			require.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, stepName) }), "no %q line in %q", stepName, lines)
		}
		var dayKeyIndex bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class
			WHERE relname = 'idx_events_search_day_keys' AND relkind = 'I')`).Scan(&dayKeyIndex))
		require.True(t, dayKeyIndex, "the rewrite rebuilds the day-key GIN its DROP COLUMN dropped")
		var collecting []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_agg(c.relname::text), '{}') FROM pg_class c
			JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
			WHERE c.relname LIKE '%search_day_keys%' AND c.relkind IN ('i', 'I') AND a.attstattarget <> 0`).Scan(&collecting))
		require.Empty(t, collecting, "the rebuilt day-key GIN keeps its expression out of ANALYZE (migration 0015)")
		s := New(Config{Pool: pool})
		res, err := s.Search(ctx, Query{Community: community, Text: "edittoken", Scope: Any()})
		require.NoError(t, err)
		require.Equal(t, edit, hitIDs(res.Hits))
		for _, k := range PrivacyKinds {
			requireNullKind(t, pool, k)
		}
		expr, err := StoredExpression(ctx, pool)
		require.NoError(t, err)
		kinds, err := EffectiveKinds(ctx, pool, expr, ProbeKinds())
		require.NoError(t, err)
		require.Equal(t, PolicyFresh, Classify(kinds))

		// A custom policy, then a wrap migration: each keeps its allowlist.
		require.NoError(t, Rewrite(ctx, RewriteConfig{Pool: pool, Kinds: []int{1, 9, 31234}}))
		applyWrap(t, pool, 31234)
		insertRows(t, pool, community, row{kind: 31234, content: "edittoken", at: time.Now().Unix(), tags: `[["d","y"]]`})
		requireNullKind(t, pool, 31234)
		expr, err = StoredExpression(ctx, pool)
		require.NoError(t, err)
		kinds, err = EffectiveKinds(ctx, pool, expr, append(ProbeKinds(), 31234))
		require.NoError(t, err)
		require.Equal(t, []int{1, 9}, kinds)
	})

	t.Run("LockTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		b.insert(t, row{kind: 9, content: "held"})
		before := relfilenodes(t, b.pool)
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var n int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&n))
		began := time.Now()
		err = Rewrite(ctx, RewriteConfig{Pool: b.pool, Kinds: []int{9}})
		require.ErrorIs(t, err, ErrLockTimeout)
		require.EqualError(t, err, "could not lock events within 5s (readers or writers are active); nothing changed")
		require.GreaterOrEqual(t, time.Since(began), 5*time.Second)
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, before, relfilenodes(t, b.pool))
		expr, err := StoredExpression(ctx, b.pool)
		require.NoError(t, err)
		require.Contains(t, expr, freshArray)
	})
}
