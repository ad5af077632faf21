package pg_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// Rows written here go through raw SQL on purpose: they stand for any
// writer (an older relay binary, an import, hand-written SQL), which is
// what the database rules of migration 0006 must hold against.

const (
	staleText = "stale NIP-RS event rejected by durable watermark"
	fenceText = "NIP-RS hard delete requires corrected writer opt-in"
)

// rsSlot returns a fresh read-state d value: "read-state:" and 32 random
// lowercase hex characters.
func rsSlot() string { return "read-state:" + hex.EncodeToString(randomBytes(16)) }

// rsTags is the tag layout of a conforming read-state event at d.
func rsTags(d string) string {
	return fmt.Sprintf(`[["d",%q],["t","read-state"]]`, d)
}

// idFrom returns an event id whose first byte is lead, so ties on
// created_at order as the test wants.
func idFrom(lead byte) []byte {
	id := randomBytes(32)
	id[0] = lead
	return id
}

// rsRow is one events row as an arbitrary writer stores it.
type rsRow struct {
	Community string
	ID        []byte
	Pubkey    []byte
	CreatedAt time.Time
	Kind      int
	D         string
	Tags      string
	Content   string
	// Deleted stores the row soft-deleted (only meaningful before 0006,
	// or for nonconforming rows).
	Deleted bool
}

// insert writes r with a plain INSERT and returns the command tag.
func (r rsRow) insert(ctx context.Context, q pg.Querier) (pgconn.CommandTag, error) {
	var deletedAt *time.Time
	if r.Deleted {
		at := r.CreatedAt.Add(time.Minute)
		deletedAt = &at
	}
	content := r.Content
	if content == "" {
		content = "ciphertext-" + hex.EncodeToString(r.ID[:4])
	}
	return q.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag, deleted_at)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10)`,
		r.Community, r.ID, r.Pubkey, r.CreatedAt, r.Kind, r.Tags, content, randomBytes(64), r.D, deletedAt)
}

// mustInsert inserts r and requires exactly one row stored.
func (r rsRow) mustInsert(t *testing.T, q pg.Querier) rsRow {
	t.Helper()
	tag, err := r.insert(context.Background(), q)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "row %x", r.ID[:4])
	return r
}

// mention writes the event_mentions row of r for a random pubkey and
// returns the command tag.
func (r rsRow) mention(ctx context.Context, q pg.Querier) (pgconn.CommandTag, error) {
	return q.Exec(ctx, `INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, event_kind)
		VALUES ($1, $2, $3, $4, $5)`, r.Community, hex.EncodeToString(randomBytes(32)), r.ID, r.CreatedAt, r.Kind)
}

// mustMention writes a mention row of r and requires it stored.
func (r rsRow) mustMention(t *testing.T, q pg.Querier) {
	t.Helper()
	tag, err := r.mention(context.Background(), q)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

// rsCoord is one coordinate of a test: a community, a pubkey and a d value.
type rsCoord struct {
	Community string
	Pubkey    []byte
	D         string
	Kind      int
}

func newCoord(community string) rsCoord {
	return rsCoord{Community: community, Pubkey: randomBytes(32), D: rsSlot(), Kind: 30078}
}

// row returns a conforming row of c at created_at at with the given id.
func (c rsCoord) row(at time.Time, id []byte) rsRow {
	return rsRow{Community: c.Community, ID: id, Pubkey: c.Pubkey, CreatedAt: at, Kind: c.Kind, D: c.D, Tags: rsTags(c.D)}
}

// count runs a count(*) query.
func count(t *testing.T, q pg.Querier, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, q.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// rowsOf counts the events rows of c (live and deleted).
func (c rsCoord) rows(t *testing.T, q pg.Querier) int {
	t.Helper()
	return count(t, q, `SELECT count(*) FROM events WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4`,
		c.Community, c.Kind, c.Pubkey, c.D)
}

// watermark returns c's watermark, or ok false when it has none.
func (c rsCoord) watermark(t *testing.T, q pg.Querier) (at time.Time, id []byte, ok bool) {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT created_at, event_id FROM parameterized_event_watermarks
		WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4`, c.Community, c.Kind, c.Pubkey, c.D)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		require.NoError(t, rows.Scan(&at, &id))
		ok = true
	}
	require.NoError(t, rows.Err())
	return at, id, ok
}

// requireWatermark requires c's watermark to be exactly r's tuple.
func (c rsCoord) requireWatermark(t *testing.T, q pg.Querier, r rsRow) {
	t.Helper()
	at, id, ok := c.watermark(t, q)
	require.True(t, ok, "coordinate has a watermark")
	require.True(t, r.CreatedAt.Equal(at), "watermark created_at %v, want %v", at, r.CreatedAt)
	require.Equal(t, r.ID, id, "watermark event id")
}

// rowState is "live", "deleted" or "gone" for the events row of r.
func rowState(t *testing.T, q pg.Querier, r rsRow) string {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT deleted_at IS NULL FROM events
		WHERE community_id = $1 AND created_at = $2 AND id = $3`, r.Community, r.CreatedAt, r.ID)
	require.NoError(t, err)
	defer rows.Close()
	state := "gone"
	for rows.Next() {
		var live bool
		require.NoError(t, rows.Scan(&live))
		state = map[bool]string{true: "live", false: "deleted"}[live]
	}
	require.NoError(t, rows.Err())
	return state
}

// mentions counts the event_mentions rows of r.
func mentions(t *testing.T, q pg.Querier, r rsRow) int {
	t.Helper()
	return count(t, q, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, r.Community, r.ID)
}

// requirePgError requires err to be a PostgreSQL error with code and message.
func requirePgError(t *testing.T, err error, code, message string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code)
	require.Equal(t, message, pgErr.Message)
}

// openAt returns a pool on a new database migrated up to version.
func openAt(t *testing.T, version int) *pgxpool.Pool {
	t.Helper()
	pool := openEmpty(t)
	applied, err := pg.MigrateTo(context.Background(), pool, version)
	require.NoError(t, err)
	require.Len(t, applied, version)
	return pool
}

// ledgerVersions lists the versions the ledger records.
func ledgerVersions(t *testing.T, q pg.Querier) []int {
	t.Helper()
	rows, err := q.Query(context.Background(), "SELECT version FROM buzz_schema_migrations ORDER BY version")
	require.NoError(t, err)
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

// texts runs a query that returns one text column and collects it.
func texts(t *testing.T, q pg.Querier, sql string, args ...any) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// dbState is what a failed migration must leave exactly as it was: the
// public schema's relations, functions and triggers, the ledger, and every
// events and event_mentions row.
type dbState struct {
	Catalog  []string
	Ledger   []int
	Events   []string
	Mentions []string
}

func snapshot(t *testing.T, q pg.Querier) dbState {
	t.Helper()
	return dbState{
		Catalog: texts(t, q, `
			SELECT 'rel ' || c.relkind::text || ' ' || c.relname FROM pg_class c
			  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
			UNION ALL
			SELECT 'fn ' || p.proname FROM pg_proc p
			  JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
			UNION ALL
			SELECT 'trg ' || tgname || ' ON ' || tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal
			ORDER BY 1`),
		Ledger: ledgerVersions(t, q),
		Events: texts(t, q, `SELECT concat_ws(' ', community_id, encode(id, 'hex'), created_at, kind, d_tag,
			COALESCE(deleted_at::text, 'live'), tags::text, content) FROM events ORDER BY 1`),
		Mentions: texts(t, q, `SELECT concat_ws(' ', community_id, pubkey_hex, encode(event_id, 'hex'), event_created_at,
			event_kind) FROM event_mentions ORDER BY 1`),
	}
}

// requireNoReadStateObjects requires that none of 0006's and 0007's objects
// exist.
func requireNoReadStateObjects(t *testing.T, q pg.Querier) {
	t.Helper()
	for _, fn := range []string{"nip_rs_read_state_row", "guard_nip_rs_watermark", "purge_soft_deleted_nip_rs",
		"guard_event_mention_live", "guard_nip_rs_hard_delete"} {
		require.Zero(t, count(t, q, "SELECT count(*) FROM pg_proc WHERE proname = $1", fn), "function %s", fn)
	}
	for _, table := range []string{"parameterized_event_watermarks", "read_state_retention_purges"} {
		require.Zero(t, count(t, q, "SELECT count(*) FROM pg_class WHERE relname = $1", table), "table %s", table)
	}
	require.Zero(t, count(t, q, "SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%nip_rs%' OR tgname LIKE '%require_live%'"))
}

// readStatePool is a database with every migration applied and one
// community on it.
func readStatePool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	return pool, newCommunity(t, pool)
}

// baseTime is a fixed second in the default partition of a fresh database.
var baseTime = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
