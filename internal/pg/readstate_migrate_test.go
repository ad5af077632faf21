package pg_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// Migrations 0006 and 0007 on databases that already hold read-state
// history written under plain NIP-33 (docs/PROTOCOL.md §14.4).

const (
	watermarksFile = "0006_read_state_watermarks.sql"
	purgeFile      = "0007_read_state_purge_superseded.sql"

	ambiguityText = "NIP-RS migration blocked: pre-0007 database contains kind-30078 rows with ambiguous d/t tag cardinality; repair or remove those nonconforming rows before retrying"
	outranksText  = "NIP-RS retention blocked: deleted event outranks live head"
)

// legacyVersion is the schema before read-state retention.
const legacyVersion = 5

func TestReadStateMigrationFiles(t *testing.T) {
	t.Parallel()
	names := fileNames()
	require.GreaterOrEqual(t, len(names), 7)
	require.Equal(t, watermarksFile, names[5])
	require.Equal(t, purgeFile, names[6])
}

// requireBlocked applies pending files to pool and requires 0006 to fail
// with message, leaving the database exactly as before.
func requireBlocked(t *testing.T, pool *pgxpool.Pool, message string) {
	t.Helper()
	ctx := context.Background()
	before := snapshot(t, pool)
	applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
	require.EqualError(t, err, "migration "+watermarksFile+" failed: P0001 "+message)
	require.ErrorIs(t, err, pg.ErrMigrationFailed)
	require.Empty(t, applied)
	require.Equal(t, before, snapshot(t, pool))
	require.Equal(t, []int{1, 2, 3, 4, 5}, ledgerVersions(t, pool), "not recorded")
	requireNoReadStateObjects(t, pool)
}

// Migration 0006 fails closed (docs/PROTOCOL.md §14.4).
func TestReadStateMigrationFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openAt(t, legacyVersion)
	community := newCommunity(t, pool)
	c := newCoord(community)
	head := c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)
	head.mustMention(t, pool)
	dead := c.row(baseTime.Add(time.Second), idFrom(0x40))
	dead.Deleted = true
	dead.mustInsert(t, pool)
	dead.mustMention(t, pool)
	// A healthy coordinate next to it changes nothing.
	ok := newCoord(community)
	old := ok.row(baseTime, idFrom(0x40))
	old.Deleted = true
	old.mustInsert(t, pool)
	ok.row(baseTime.Add(time.Second), idFrom(0x40)).mustInsert(t, pool)

	requireBlocked(t, pool, outranksText)

	t.Run("SameSecondLowerID", func(t *testing.T) {
		t.Parallel()
		pool := openAt(t, legacyVersion)
		community := newCommunity(t, pool)
		c := newCoord(community)
		c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)
		dead := c.row(baseTime, idFrom(0x10))
		dead.Deleted = true
		dead.mustInsert(t, pool)
		requireBlocked(t, pool, outranksText)
	})

	t.Run("RetryAfterRepair", func(t *testing.T) {
		t.Parallel()
		_, err := pool.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, dead.ID)
		require.NoError(t, err)
		applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
		require.NoError(t, err)
		require.Equal(t, filesFrom(6), applied)
		c.requireWatermark(t, pool, head)
		require.Equal(t, "gone", rowState(t, pool, old), "superseded by a live head")
	})
}

// Migration 0006 refuses ambiguous rows (docs/PROTOCOL.md §14.4).
func TestReadStateMigrationAmbiguityGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	pool := openAt(t, legacyVersion)
	community := newCommunity(t, pool)
	c := newCoord(community)
	ambiguous := c.row(baseTime, idFrom(0x40))
	ambiguous.Tags = `[["d","` + c.D + `"],["d","` + c.D + `"],["t","read-state"]]`
	ambiguous.mustInsert(t, pool)
	ambiguous.mustMention(t, pool)
	// History on another coordinate that the retry must purge.
	h := newCoord(community)
	superseded := h.row(baseTime, idFrom(0x40))
	superseded.Deleted = true
	superseded.mustInsert(t, pool)
	superseded.mustMention(t, pool)
	live := h.row(baseTime.Add(time.Second), idFrom(0x40)).mustInsert(t, pool)

	requireBlocked(t, pool, ambiguityText)

	_, err := pool.Exec(ctx, "DELETE FROM events WHERE community_id = $1 AND id = $2", community, ambiguous.ID)
	require.NoError(t, err, "the operator removes the row")
	applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
	require.NoError(t, err)
	require.Equal(t, filesFrom(6), applied)
	require.Equal(t, versionsUpTo(len(pg.Migrations())), ledgerVersions(t, pool))
	require.Equal(t, "gone", rowState(t, pool, superseded))
	require.Zero(t, mentions(t, pool, superseded))
	h.requireWatermark(t, pool, live)

	// Every shape the guard blocks, each on a database of its own; and the
	// lookalikes it lets through.
	slot := rsSlot()
	for name, tc := range map[string]struct {
		d, tags string
		blocked bool
	}{
		"NonArrayTags":          {d: slot, tags: `{"d":"` + slot + `"}`, blocked: true},
		"NonArrayTagsBadSlot":   {d: "read-state:XYZ", tags: `"read-state"`, blocked: true},
		"NoDTag":                {d: slot, tags: `[["t","read-state"]]`, blocked: true},
		"OneElementDTag":        {d: slot, tags: `[["d"],["d","` + slot + `"],["t","read-state"]]`, blocked: true},
		"DValueDiffers":         {d: slot, tags: `[["d","read-state:other"],["t","read-state"]]`, blocked: true},
		"DValueNotString":       {d: slot, tags: `[["d",7],["t","read-state"]]`, blocked: true},
		"TwoTTags":              {d: slot, tags: `[["d","` + slot + `"],["t","read-state"],["t","read-state"]]`, blocked: true},
		"UppercaseTwoD":         {d: "read-state:ABC", tags: `[["d","read-state:ABC"],["d","x"],["t","read-state"]]`, blocked: true},
		"TwoDWithoutTTag":       {d: slot, tags: `[["d","` + slot + `"],["d","` + slot + `"]]`},
		"TwoDWithLongTTag":      {d: slot, tags: `[["d","` + slot + `"],["d","` + slot + `"],["t","read-state","x"]]`},
		"UppercaseSlot":         {d: "read-state:ABC", tags: `[["d","read-state:ABC"],["t","read-state"]]`},
		"OtherPrefixAmbiguous":  {d: "settings", tags: `[["d","settings"],["d","settings"],["t","read-state"]]`},
		"Conforming":            {d: slot, tags: rsTags(slot)},
		"ConformingOddElements": {d: slot, tags: `["d", 7, {"0":"d"}, null, ["d","` + slot + `"], ["t","read-state"]]`},
		"OddElementsTwoD":       {d: slot, tags: `["d", null, ["d","` + slot + `"], ["d"], ["t","read-state"]]`, blocked: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := openAt(t, legacyVersion)
			community := newCommunity(t, pool)
			rsRow{Community: community, ID: idFrom(0x40), Pubkey: randomBytes(32), CreatedAt: baseTime, Kind: 30078,
				D: tc.d, Tags: tc.tags, Deleted: true}.mustInsert(t, pool)
			if tc.blocked {
				requireBlocked(t, pool, ambiguityText)
				return
			}
			_, err := pg.Migrate(ctx, pool, pg.MigrateApply, nil)
			require.NoError(t, err)
		})
	}
}

// Migration 0007 purges the superseded history (docs/PROTOCOL.md §14.4).
func TestReadStateMigrationPurgesHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openAt(t, legacyVersion)
	community, other := newCommunity(t, pool), newCommunity(t, pool)

	// A coordinate with two superseded versions and a live head.
	a := newCoord(community)
	a1 := a.row(baseTime, idFrom(0x40))
	a2 := a.row(baseTime.Add(time.Second), idFrom(0x40))
	a3 := a.row(baseTime.Add(2*time.Second), idFrom(0x40))
	a1.Deleted, a2.Deleted = true, true
	for _, r := range []rsRow{a1, a2, a3} {
		r.mustInsert(t, pool)
		r.mustMention(t, pool)
	}
	// A coordinate whose only row was deleted through NIP-09.
	b := newCoord(community)
	b1 := b.row(baseTime, idFrom(0x40))
	b1.Deleted = true
	b1.mustInsert(t, pool)
	b1.mustMention(t, pool)
	// Kind 30078 application data with history.
	app := rsRow{Community: community, Pubkey: randomBytes(32), Kind: 30078, D: "com.example.settings",
		Tags: `[["d","com.example.settings"]]`}
	app1, app2 := app, app
	app1.ID, app1.CreatedAt, app1.Deleted = idFrom(0x40), baseTime, true
	app2.ID, app2.CreatedAt = idFrom(0x40), baseTime.Add(time.Second)
	// A lookalike with an uppercase slot, and kind 30023, both with history.
	upper := rsRow{Community: community, Pubkey: randomBytes(32), Kind: 30078,
		D: "read-state:0123456789ABCDEF0123456789ABCDEF", Tags: rsTags("read-state:0123456789ABCDEF0123456789ABCDEF")}
	upper1, upper2 := upper, upper
	upper1.ID, upper1.CreatedAt, upper1.Deleted = idFrom(0x40), baseTime, true
	upper2.ID, upper2.CreatedAt = idFrom(0x40), baseTime.Add(time.Second)
	slot := rsSlot()
	article := rsRow{Community: community, Pubkey: randomBytes(32), Kind: 30023, D: slot, Tags: rsTags(slot)}
	article1, article2 := article, article
	article1.ID, article1.CreatedAt, article1.Deleted = idFrom(0x40), baseTime, true
	article2.ID, article2.CreatedAt = idFrom(0x40), baseTime.Add(time.Second)
	kept := []rsRow{a3, b1, app1, app2, upper1, upper2, article1, article2}
	for _, r := range kept[2:] {
		r.mustInsert(t, pool)
		r.mustMention(t, pool)
	}
	// Another community: one superseded version and a head that wins on a
	// same-second tie (lower id).
	o := newCoord(other)
	o1 := o.row(baseTime, idFrom(0x80))
	o1.Deleted = true
	o1.mustInsert(t, pool)
	o2 := o.row(baseTime, idFrom(0x10)).mustInsert(t, pool)

	var payloadBytes int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(octet_length(content) + octet_length(tags::text)) FROM events
		WHERE community_id = $1 AND id = ANY($2)`, community, [][]byte{a1.ID, a2.ID}).Scan(&payloadBytes))
	var filenode uint32
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_relation_filenode('events_p_default')").Scan(&filenode))

	applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
	require.NoError(t, err)
	require.Equal(t, filesFrom(6), applied)

	for _, r := range []rsRow{a1, a2, o1} {
		require.Equal(t, "gone", rowState(t, pool, r), "superseded %x", r.ID[:4])
		require.Zero(t, mentions(t, pool, r))
	}
	for _, r := range kept {
		want := "live"
		if r.Deleted {
			want = "deleted"
		}
		require.Equal(t, want, rowState(t, pool, r), "kept kind %d d %s", r.Kind, r.D)
		require.Equal(t, 1, mentions(t, pool, r))
	}
	require.Equal(t, "live", rowState(t, pool, o2))

	// Watermarks: the greatest tuple of every conforming coordinate, deleted
	// rows included, and none for anything else.
	a.requireWatermark(t, pool, a3)
	b.requireWatermark(t, pool, b1)
	o.requireWatermark(t, pool, o2)
	require.Equal(t, 2, count(t, pool, "SELECT count(*) FROM parameterized_event_watermarks WHERE community_id = $1", community))

	type purge struct {
		Partition string
		Filenode  uint32
		Rows      int64
		Bytes     int64
	}
	var got []purge
	rows, err := pool.Query(ctx, `SELECT partition_name, partition_filenode, purged_rows, purged_payload_bytes
		FROM read_state_retention_purges WHERE community_id = $1`, community)
	require.NoError(t, err)
	for rows.Next() {
		var p purge
		require.NoError(t, rows.Scan(&p.Partition, &p.Filenode, &p.Rows, &p.Bytes))
		got = append(got, p)
	}
	rows.Close()
	require.NoError(t, rows.Err())
	require.Equal(t, []purge{{Partition: "events_p_default", Filenode: filenode, Rows: 2, Bytes: payloadBytes}}, got)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM read_state_retention_purges
		WHERE community_id = $1 AND partition_name = 'events_p_default' AND purged_rows = 1`, other))
	require.Equal(t, 2, count(t, pool, "SELECT count(*) FROM read_state_retention_purges"))
}

// relationState is the physical identity of every events-family relation:
// each partition, its TOAST table and TOAST index, and every index (the
// partitioned parents have no files of their own and show 0), plus the
// search_tsv generation expression of the parent and of each partition.
func relationState(t *testing.T, q pg.Querier) (filenodes map[string]uint32, expressions []string) {
	t.Helper()
	rows, err := q.Query(context.Background(), `
		WITH parts AS (
		  SELECT 'events'::regclass::oid AS oid
		  UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass),
		rels AS (
		  SELECT oid FROM parts
		  UNION ALL SELECT c.reltoastrelid FROM parts p JOIN pg_class c ON c.oid = p.oid WHERE c.reltoastrelid <> 0
		  UNION ALL SELECT i.indexrelid FROM parts p JOIN pg_class c ON c.oid = p.oid
		            JOIN pg_index i ON i.indrelid IN (p.oid, c.reltoastrelid))
		SELECT c.relname, COALESCE(pg_relation_filenode(c.oid), 0)::bigint FROM rels r JOIN pg_class c ON c.oid = r.oid`)
	require.NoError(t, err)
	defer rows.Close()
	filenodes = map[string]uint32{}
	for rows.Next() {
		var name string
		var node int64
		require.NoError(t, rows.Scan(&name, &node))
		filenodes[name] = uint32(node)
	}
	require.NoError(t, rows.Err())
	expressions = texts(t, q, `
		SELECT a.attrelid::regclass::text || ' ' || pg_get_expr(d.adbin, d.adrelid)
		FROM pg_attribute a JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attname = 'search_tsv' AND a.attgenerated = 's'
		  AND (a.attrelid = 'events'::regclass OR a.attrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass))
		ORDER BY 1`)
	return filenodes, expressions
}

// The migrations rewrite no other row (docs/PROTOCOL.md §14.4).
func TestReadStateMigrationRewritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openAt(t, legacyVersion)
	require.NoError(t, pg.EnsurePartitions(ctx, pool, baseTime, 2))
	community := newCommunity(t, pool)
	// History in two monthly partitions and the default one, searchable
	// rows for the GIN, and a large content for the TOAST tables.
	for _, at := range []time.Time{baseTime, baseTime.AddDate(0, 1, 0), baseTime.AddDate(5, 0, 0)} {
		c := newCoord(community)
		old := c.row(at, idFrom(0x40))
		old.Deleted = true
		old.Content = hex.EncodeToString(randomBytes(10000)) // stored out of line
		old.mustInsert(t, pool)
		c.row(at.Add(time.Second), idFrom(0x40)).mustInsert(t, pool)
		_, err := insertEvent(ctx, pool, community, 9, at, "searchable words")
		require.NoError(t, err)
	}
	nodesBefore, exprBefore := relationState(t, pool)
	require.Len(t, exprBefore, 5, "the parent and four partitions")
	for _, part := range []string{"events_p2026_03", "events_p2026_04", "events_p2026_05", "events_p_default"} {
		require.Contains(t, nodesBefore, part+"_search_tsv_idx", "the search GIN of %s", part)
		require.NotZero(t, nodesBefore[part+"_search_tsv_idx"])
		require.NotZero(t, nodesBefore[part])
	}
	require.Contains(t, nodesBefore, "idx_events_search_tsv")
	toast := 0
	for name := range nodesBefore {
		if len(name) > 9 && name[:9] == "pg_toast_" {
			toast++
		}
	}
	require.GreaterOrEqual(t, toast, 8, "a TOAST table and its index per partition")

	applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
	require.NoError(t, err)
	require.Equal(t, filesFrom(6), applied)
	require.Equal(t, 3, count(t, pool, "SELECT coalesce(sum(purged_rows), 0) FROM read_state_retention_purges"),
		"the purge did delete rows")

	nodesAfter, exprAfter := relationState(t, pool)
	for name, node := range nodesBefore { // later migrations may add relations
		require.Equal(t, node, nodesAfter[name], "no relation was rewritten or rebuilt: %s", name)
	}
	require.Equal(t, exprBefore, exprAfter)
}

// Migration 0007 applied on its own (docs/PROTOCOL.md §14.4).
func TestReadStateMigrationSecondFileAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openAt(t, 6)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6}, ledgerVersions(t, pool))
	// A superseded row left by a direct write under 0006 alone would be
	// purged already; the file still has to apply cleanly.
	community := newCommunity(t, pool)
	c := newCoord(community)
	c.row(baseTime, idFrom(0x40)).mustInsert(t, pool)

	_, err := pg.Migrate(ctx, pool, pg.MigrateCheck, nil)
	require.ErrorIs(t, err, pg.ErrPendingMigrations)
	require.ErrorContains(t, err, purgeFile)

	applied, err := pg.Migrate(ctx, pool, pg.MigrateApply, testLogger(t))
	require.NoError(t, err, "no checksum complaint")
	require.Equal(t, filesFrom(7), applied)
	_, err = pg.Migrate(ctx, pool, pg.MigrateCheck, nil)
	require.NoError(t, err)
	require.Zero(t, count(t, pool, "SELECT count(*) FROM read_state_retention_purges"))
	require.Equal(t, 1, c.rows(t, pool))
}

// Both new tables are tenant tables (docs/PROTOCOL.md §14.3): not registered as
// operator-global, community_id leading the primary key and referencing
// communities.
func TestReadStateTablesAreTenantTables(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	for _, table := range []string{"parameterized_event_watermarks", "read_state_retention_purges"} {
		require.Zero(t, count(t, tx, "SELECT count(*) FROM _operator_global_tables WHERE table_name = $1", table), table)
		require.Equal(t, "community_id", texts(t, tx, `
			SELECT a.attname::text FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = $1::regclass AND i.indisprimary`, table)[0], table)
		require.Equal(t, 1, count(t, tx, `SELECT count(*) FROM pg_constraint
			WHERE conrelid = $1::regclass AND contype = 'f' AND confrelid = 'communities'::regclass`, table), table)
	}
}

// filesFrom lists the embedded migration files from version on: what a
// database migrated up to version-1 applies next (0006 and 0007 first, then
// every later file).
func filesFrom(version int) []string {
	var out []string
	for _, m := range pg.Migrations() {
		if m.Version >= version {
			out = append(out, m.Name)
		}
	}
	return out
}

// versionsUpTo is 1..n, the ledger of a database migrated up to n.
func versionsUpTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}
