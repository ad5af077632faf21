package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pg"
)

// 0011 fills expires_at for the rows stored before it with the relay's
// rule (docs/PROTOCOL.md §6.6): exactly one expiration tag whose value is
// 1–12 digits; every other row keeps NULL. search_day_matches returns the
// column afterwards.
func TestExpirationMigrationBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openAt(t, 10)
	var cid string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO communities (host) VALUES ('expiry.test') RETURNING id::text`).Scan(&cid))
	rows := map[string]struct {
		tags string
		want *int64
	}{
		"plain":        {`[["expiration","1700000000"]]`, ptr(int64(1700000000))},
		"extra":        {`[["p","x"],["expiration","42","x"]]`, ptr(int64(42))},
		"none":         {`[["t","expiration"]]`, nil},
		"two":          {`[["expiration","1"],["expiration","2"]]`, nil},
		"milliseconds": {`[["expiration","1700000000000"]]`, nil},
		"word":         {`[["expiration","soon"]]`, nil},
		"no value":     {`[["expiration"]]`, nil},
	}
	ids := map[string][]byte{}
	for name, r := range rows {
		ids[name] = randomBytes(32)
		_, err := pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
			VALUES ($1, $2, $3, now(), 1, $4::jsonb, 'searchable words', $5)`, cid, ids[name], randomBytes(32), r.tags, randomBytes(64))
		require.NoError(t, err, name)
	}
	applied, err := pg.MigrateTo(ctx, pool, 11)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	for name, r := range rows {
		var at *time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT expires_at FROM events WHERE id = $1`, ids[name]).Scan(&at), name)
		if r.want == nil {
			require.Nil(t, at, name)
			continue
		}
		require.NotNil(t, at, name)
		require.Equal(t, *r.want, at.Unix(), name)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(expires_at) FROM search_day_matches(ARRAY['none'])`).Scan(&n))
	require.Zero(t, n, "search_day_matches has an expires_at column")
	var def string
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_get_indexdef('idx_events_expires_at'::regclass)`).Scan(&def))
	require.Equal(t, "CREATE INDEX idx_events_expires_at ON ONLY public.events USING btree (expires_at) WHERE (expires_at IS NOT NULL)", def)
}
