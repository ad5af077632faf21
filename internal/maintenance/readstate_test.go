package maintenance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// rsBefore is the last migration before read-state retention (0006, 0007).
const rsBefore = 5

// migratedTo returns a pool on a new database with the embedded migrations
// up to version applied and recorded as the runner does, so pg.Migrate
// later applies only the rest: an installation that predates them.
func migratedTo(t *testing.T, version int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, dbtest.NewEmptyDB(t), pg.PoolConfig{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE buzz_schema_migrations (
		version INT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range pg.Migrations() {
		if m.Version > version {
			break
		}
		require.NoError(t, pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO buzz_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)`,
				m.Version, m.Name, m.Checksum)
			return err
		}))
	}
	return pool
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// rsSlot returns a read-state d value with a random slot.
func rsSlot() string { return "read-state:" + hex.EncodeToString(randBytes(16)) }

// rsTags are the tags of a conforming read-state event at d.
func rsTags(d string) string { return fmt.Sprintf(`[["d",%q],["t","read-state"]]`, d) }

// rsFixture writes rows with raw SQL, as any writer (an older binary,
// an import) could.
type rsFixture struct {
	pool   *pgxpool.Pool
	pubkey []byte
}

func newRSFixture(pool *pgxpool.Pool) *rsFixture {
	return &rsFixture{pool: pool, pubkey: randBytes(32)}
}

func (f *rsFixture) community(t *testing.T, host string) string {
	t.Helper()
	var id string
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`INSERT INTO communities (host) VALUES ($1) RETURNING id::text`, host).Scan(&id))
	return id
}

// event inserts one row (deleted when deleted is set) and, for a deleted
// row, a mention row as the legacy history would have; it returns the id.
func (f *rsFixture) event(t *testing.T, community string, kind int, d, tags string, at time.Time, deleted bool) []byte {
	t.Helper()
	ctx := context.Background()
	id := randBytes(32)
	var deletedAt *time.Time
	if deleted {
		deletedAt = &at
	}
	_, err := f.pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag, deleted_at)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10)`,
		community, id, f.pubkey, at, kind, tags, hex.EncodeToString(randBytes(60)), randBytes(64), d, deletedAt)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, event_kind)
		VALUES ($1, $2, $3, $4, $5)`, community, hex.EncodeToString(randBytes(32)), id, at, kind)
	require.NoError(t, err)
	return id
}

// payloadBytes is Σ octet_length(content) + octet_length(tags::text) of ids.
func payloadBytes(t *testing.T, pool *pgxpool.Pool, ids ...[]byte) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT COALESCE(sum(octet_length(content) + octet_length(tags::text)), 0)::bigint
		FROM events WHERE id = ANY($1)`, ids).Scan(&n))
	return n
}

func report(t *testing.T, pool *pgxpool.Pool, host string) *ReadStateReportResult {
	t.Helper()
	rep, err := ReadStateReport(context.Background(), pool, ReadStateReportParams{Host: host}, 0)
	require.NoError(t, err)
	return rep
}

func vacuumFull(t *testing.T, pool *pgxpool.Pool, partition string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "VACUUM FULL "+pgx.Identifier{partition}.Sanitize())
	require.NoError(t, err)
}

// monthStart is the first second of the current UTC month plus an hour:
// every row written at monthStart+k seconds is in this month's partition.
func monthStart() time.Time {
	now := time.Now().UTC()
	return time.Date(now.Year(), now.Month(), 1, 1, 0, 0, 0, time.UTC)
}

// The report of docs/PROTOCOL.md §14.7 after the purge of docs/PROTOCOL.md §14.4,
// on the history of TestReadStateMigrationPurgesHistory.
func TestReadStateReportAfterPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedTo(t, rsBefore)
	require.NoError(t, pg.EnsurePartitions(ctx, pool, time.Now(), 1))
	f := newRSFixture(pool)
	// Created first, sorted last: the report goes by host, not by age.
	empty := f.community(t, "zz-empty.test")
	com := f.community(t, "rs.test")
	base := monthStart()

	// A conforming coordinate with 2 deleted versions and a live head.
	dA := rsSlot()
	a1 := f.event(t, com, 30078, dA, rsTags(dA), base.Add(1*time.Second), true)
	a2 := f.event(t, com, 30078, dA, rsTags(dA), base.Add(2*time.Second), true)
	f.event(t, com, 30078, dA, rsTags(dA), base.Add(3*time.Second), false)
	// A conforming coordinate whose only row was deleted through NIP-09.
	dB := rsSlot()
	f.event(t, com, 30078, dB, rsTags(dB), base.Add(4*time.Second), true)
	// NIP-78 application data with history: never read state.
	f.event(t, com, 30078, "app:settings", `[["d","app:settings"]]`, base.Add(5*time.Second), true)
	f.event(t, com, 30078, "app:settings", `[["d","app:settings"]]`, base.Add(6*time.Second), false)
	// The same history elsewhere is no part of rs.test's lines.
	f.event(t, empty, 30078, "app:settings", `[["d","app:settings"]]`, base.Add(5*time.Second), true)
	purgedBytes := payloadBytes(t, pool, a1, a2)
	require.Positive(t, purgedBytes)

	_, err := pg.Migrate(ctx, pool, pg.MigrateApply, nil)
	require.NoError(t, err)

	rep := report(t, pool, "")
	want := ReadStateCommunity{Community: "rs.test", Coordinates: 2, LiveRows: 1, Watermarks: 2, RetainedDeleted: 1,
		PurgedRows: 2, PurgedBytes: purgedBytes, EstReclaimableBytes: purgedBytes}
	require.Equal(t, []ReadStateCommunity{want, {Community: "zz-empty.test"}}, rep.Communities)
	partition := pg.PartitionName(base)
	requireStorage(t, pool, rep, FreeMethodStatistics)

	purges, err := ReadStatePurges(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []ReadStatePurge{{CommunityID: com, Host: "rs.test", Rows: 2, Bytes: purgedBytes}}, purges)

	// Returning the space to the volume takes a rewrite of the partition.
	var recorded string
	require.NoError(t, pool.QueryRow(ctx, `SELECT partition_name FROM read_state_retention_purges`).Scan(&recorded))
	require.Equal(t, partition, recorded)
	vacuumFull(t, pool, partition)
	want.EstReclaimableBytes = 0
	rep = report(t, pool, "")
	require.Equal(t, []ReadStateCommunity{want, {Community: "zz-empty.test"}}, rep.Communities)
	requireStorage(t, pool, rep, FreeMethodStatistics)
}

// requireStorage checks one storage line per events partition, by name,
// with the sizes of its heap and TOAST and the method.
func requireStorage(t *testing.T, pool *pgxpool.Pool, rep *ReadStateReportResult, method string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT c.relname::text, pg_relation_size(c.oid),
		       COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0)
		  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events'::regclass ORDER BY 1`)
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReadStateStorage, error) {
		s := ReadStateStorage{Method: method}
		return s, r.Scan(&s.Storage, &s.HeapBytes, &s.TOASTBytes)
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(want), 2, "the default partition and this month's")
	require.Len(t, rep.Storage, len(want))
	for i, got := range rep.Storage {
		require.GreaterOrEqual(t, got.EstFreeBytes, int64(0), got.Storage)
		want[i].EstFreeBytes = got.EstFreeBytes // checked by TestReadStateStorage
		require.Equal(t, want[i], got)
	}
}

// Purge records are attributed per partition: rewriting one partition
// leaves the bytes recorded for another reclaimable.
func TestReadStateReclaimablePerPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedTo(t, rsBefore)
	require.NoError(t, pg.EnsurePartitions(ctx, pool, time.Now(), 0))
	f := newRSFixture(pool)
	com := f.community(t, "parts.test")
	d := rsSlot()
	// 2020 has no monthly partition: that version lands in the default one.
	old := f.event(t, com, 30078, d, rsTags(d), time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC), true)
	recent := f.event(t, com, 30078, d, rsTags(d), monthStart(), true)
	f.event(t, com, 30078, d, rsTags(d), monthStart().Add(time.Second), false)
	oldBytes, recentBytes := payloadBytes(t, pool, old), payloadBytes(t, pool, recent)

	_, err := pg.Migrate(ctx, pool, pg.MigrateApply, nil)
	require.NoError(t, err)
	var records int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM read_state_retention_purges`).Scan(&records))
	require.Equal(t, 2, records, "one record per partition that lost rows")

	c := report(t, pool, "").Communities
	require.Len(t, c, 1)
	require.Equal(t, oldBytes+recentBytes, c[0].EstReclaimableBytes)

	vacuumFull(t, pool, "events_p_default")
	c = report(t, pool, "").Communities
	require.Equal(t, ReadStateCommunity{Community: "parts.test", Coordinates: 1, LiveRows: 1, Watermarks: 1,
		PurgedRows: 2, PurgedBytes: oldBytes + recentBytes, EstReclaimableBytes: recentBytes}, c[0])

	purges, err := ReadStatePurges(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []ReadStatePurge{{CommunityID: com, Host: "parts.test", Rows: 2, Bytes: oldBytes + recentBytes}}, purges,
		"one line per community over all its partitions")
}

// Only conforming rows count, and --community picks one community by its
// primary host or an alias.
func TestReadStateReportCommunities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	f := newRSFixture(b.pool)
	a := f.community(t, "a.test")
	other := f.community(t, "b.test")
	b.exec(t, `INSERT INTO community_host_aliases (host, community_id) VALUES ('alias.a.test', $1)`, a)
	at := monthStart()
	d := rsSlot()
	f.event(t, a, 30078, d, rsTags(d), at, false)
	// Not read state: a second t tag, an uppercase slot, another kind, app data.
	twoT := rsSlot()
	f.event(t, a, 30078, twoT, `[["d","`+twoT+`"],["t","read-state"],["t","read-state"]]`, at, false)
	upper := "read-state:" + strings.ToUpper(hex.EncodeToString(randBytes(16)))
	f.event(t, a, 30078, upper, rsTags(upper), at, false)
	longForm := rsSlot()
	f.event(t, a, 30023, longForm, rsTags(longForm), at, false)
	f.event(t, a, 30078, "app", `[["d","app"]]`, at, false)
	// Another coordinate of b.test, by a second author.
	g := newRSFixture(b.pool)
	g.event(t, other, 30078, d, rsTags(d), at, false)

	lineA := ReadStateCommunity{Community: "a.test", Coordinates: 1, LiveRows: 1, Watermarks: 1}
	lineB := ReadStateCommunity{Community: "b.test", Coordinates: 1, LiveRows: 1, Watermarks: 1}
	require.Equal(t, []ReadStateCommunity{lineA, lineB}, report(t, b.pool, "").Communities)
	for _, host := range []string{"a.test", "alias.a.test"} {
		rep := report(t, b.pool, host)
		require.Equal(t, []ReadStateCommunity{lineA}, rep.Communities, host)
		require.NotEmpty(t, rep.Storage, "storage lines are per partition, whatever the community")
	}
	require.Equal(t, []ReadStateCommunity{lineB}, report(t, b.pool, "b.test").Communities)

	_, err := ReadStateReport(ctx, b.pool, ReadStateReportParams{Host: "nowhere.test"}, 0)
	require.ErrorIs(t, err, pg.ErrNotFound)

	purges, err := ReadStatePurges(ctx, b.pool)
	require.NoError(t, err)
	require.Empty(t, purges, "no purge record, no line")
}

// The report takes only ordinary read locks: it runs while a migration
// holds SHARE ROW EXCLUSIVE on events (writers wait, reads go on).
func TestReadStateReportBesideMigrationLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `LOCK TABLE events, parameterized_event_watermarks, read_state_retention_purges IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	rep, err := ReadStateReport(ctx, b.pool, ReadStateReportParams{}, 0)
	require.NoError(t, err)
	require.NotEmpty(t, rep.Storage)
}

// Every statement runs under the statement_timeout it is given: a report
// stuck behind an ACCESS EXCLUSIVE lock is canceled by the server after
// that bound, not left waiting (the context, which would cancel it
// otherwise, allows 90 s). The default bound is the same statement with
// ReadStateStatementTimeout.
func TestReadStateReportStatementTimeout(t *testing.T) {
	t.Parallel()
	require.Equal(t, 60*time.Second, ReadStateStatementTimeout, "docs/PROTOCOL.md §14.7 says 60 s")
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `LOCK TABLE read_state_retention_purges IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	start := time.Now()
	_, err = ReadStateReport(ctx, b.pool, ReadStateReportParams{}, time.Second)
	took := time.Since(start)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "57014", pgErr.Code)
	require.Equal(t, "canceling statement due to statement timeout", pgErr.Message)
	require.NoError(t, ctx.Err())
	require.GreaterOrEqual(t, took, time.Second)
	require.Less(t, took, 30*time.Second, "canceled at the bound given, not at the default")
}

// storageLine returns the report's line for partition.
func storageLine(t *testing.T, pool *pgxpool.Pool, partition string) ReadStateStorage {
	t.Helper()
	for _, s := range report(t, pool, "").Storage {
		if s.Storage == partition {
			return s
		}
	}
	t.Fatalf("no storage line for %s", partition)
	return ReadStateStorage{}
}

// fillDefault writes n kind-1 rows with content of width bytes into
// events_p_default, with autovacuum off there so that only the test
// changes its statistics.
func fillDefault(t *testing.T, b *testBundle, n, width int) {
	t.Helper()
	b.exec(t, `ALTER TABLE events_p_default SET (autovacuum_enabled = false)`)
	var com string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO communities (host) VALUES ($1) RETURNING id::text`,
		"fill-"+hex.EncodeToString(randBytes(4))+".test").Scan(&com))
	b.exec(t, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
		SELECT $1, sha256(g::text::bytea), sha256('p'::bytea), '2020-01-01'::timestamptz + g * interval '1 second', 1, '[]',
		       substr(repeat(md5(g::text), ($3 / 32) + 1), 1, $3), sha256('s'::bytea) || sha256('s'::bytea)
		  FROM generate_series(1, $2) g`, com, n, width)
}

// Free space inside a partition's heap: from statistics, floored at 0,
// or from pgstattuple_approx when the extension is installed.
func TestReadStateStorage(t *testing.T) {
	t.Parallel()

	t.Run("Statistics", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fillDefault(t, b, 2000, 200)
		// Every other row goes, so no trailing page is truncated away.
		b.exec(t, `DELETE FROM events WHERE kind = 1 AND get_byte(id, 0) % 2 = 0`)
		b.exec(t, `VACUUM ANALYZE events_p_default`)
		got := storageLine(t, b.pool, "events_p_default")
		require.Equal(t, FreeMethodStatistics, got.Method)

		var size, reltuples, width float64
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT pg_relation_size('events_p_default')::float8, reltuples::float8,
			(SELECT sum(avg_width)::float8 FROM pg_stats WHERE tablename = 'events_p_default' AND NOT inherited)
			FROM pg_class WHERE oid = 'events_p_default'::regclass`).Scan(&size, &reltuples, &width))
		require.InDelta(t, size-reltuples*(width+28), float64(got.EstFreeBytes), 1)
		require.Greater(t, got.EstFreeBytes, got.HeapBytes/4, "about half the heap was freed")
		require.Less(t, got.EstFreeBytes, got.HeapBytes)
	})

	t.Run("StatisticsFloorAtZero", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fillDefault(t, b, 500, 1000)
		b.exec(t, `ANALYZE events_p_default`)
		// The same number of far narrower rows; VACUUM counts them but
		// keeps the widths of the last ANALYZE, so the formula goes
		// negative.
		b.exec(t, `TRUNCATE events_p_default`)
		fillDefault(t, b, 500, 1)
		b.exec(t, `VACUUM events_p_default`)
		var size, reltuples, width float64
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT pg_relation_size('events_p_default')::float8, reltuples::float8,
			(SELECT sum(avg_width)::float8 FROM pg_stats WHERE tablename = 'events_p_default' AND NOT inherited)
			FROM pg_class WHERE oid = 'events_p_default'::regclass`).Scan(&size, &reltuples, &width))
		require.Negative(t, size-reltuples*(width+28), "the case the floor is for")
		got := storageLine(t, b.pool, "events_p_default")
		require.Equal(t, FreeMethodStatistics, got.Method)
		require.Equal(t, int64(size), got.HeapBytes)
		require.Zero(t, got.EstFreeBytes)
	})

	t.Run("Pgstattuple", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.exec(t, `CREATE EXTENSION pgstattuple`)
		fillDefault(t, b, 2000, 200)
		b.exec(t, `DELETE FROM events WHERE kind = 1 AND get_byte(id, 0) % 2 = 0`)
		b.exec(t, `VACUUM events_p_default`)
		got := storageLine(t, b.pool, "events_p_default")
		require.Equal(t, FreeMethodPgstattuple, got.Method)
		var direct int64
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT (approx_free_space + dead_tuple_len)::bigint FROM pgstattuple_approx('events_p_default')`).Scan(&direct))
		require.Equal(t, direct, got.EstFreeBytes)
		require.Greater(t, got.EstFreeBytes, got.HeapBytes/4, "about half the heap was freed")
		for _, s := range report(t, b.pool, "").Storage {
			require.Equal(t, FreeMethodPgstattuple, s.Method, s.Storage)
		}
	})
}
