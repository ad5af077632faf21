package search

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/fixture"
)

// tracer records every statement a pool sends.
type tracer struct {
	mu  sync.Mutex
	sql []string
}

func (tr *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.mu.Lock()
	tr.sql = append(tr.sql, d.SQL)
	tr.mu.Unlock()
	return ctx
}

func (tr *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tr *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery records each statement of a batch (the search statement
// and its COMMIT are sent as one).
func (tr *tracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	tr.mu.Lock()
	tr.sql = append(tr.sql, d.SQL)
	tr.mu.Unlock()
}

func (tr *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (tr *tracer) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.sql)
}

type testBundle struct {
	pool      *pgxpool.Pool
	url       string
	tr        *tracer
	s         *Searcher
	community string
	other     string // a second community, made on first use
}

// setup gives a test its own migrated database, a traced pool and a community.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	b := &testBundle{pool: pool, url: url, tr: &tracer{}}
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = b.tr
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(traced.Close)
	b.s = New(Config{Pool: traced})
	b.community = b.newCommunity(t)
	return b
}

func (b *testBundle) newCommunity(t *testing.T) string {
	t.Helper()
	return fixture.Community(t, b.pool).ID
}

// row is an events row for direct inserts.
type row struct {
	community string
	kind      int
	content   string
	channel   string // "" = NULL
	at        int64  // 0 = a fixed recent time
	id        []byte // nil = random
	tags      string // "" = []
}

var baseTime = time.Now().Add(-time.Hour).Unix()

// insert writes rows straight into events and returns their ids as hex.
func (b *testBundle) insert(t *testing.T, rows ...row) []string {
	t.Helper()
	return insertRows(t, b.pool, b.community, rows...)
}

func insertRows(t *testing.T, pool *pgxpool.Pool, community string, rows ...row) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		id := r.id
		if id == nil {
			id = randBytes(32)
		}
		at := r.at
		if at == 0 {
			at = baseTime
		}
		cm := r.community
		if cm == "" {
			cm = community
		}
		var ch *string
		if r.channel != "" {
			ch = &r.channel
		}
		tags := r.tags
		if tags == "" {
			tags = "[]"
		}
		_, err := pool.Exec(context.Background(), `
			INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
			VALUES ($1, $2, $3, to_timestamp($4), $5, $6::jsonb, $7, $8, $9::uuid)`,
			cm, id, randBytes(32), at, r.kind, tags, r.content, randBytes(64), ch)
		require.NoError(t, err)
		out[i] = hex.EncodeToString(id)
	}
	return out
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randUUID(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT gen_random_uuid()::text").Scan(&id))
	return id
}

// search runs q in the bundle's community and returns the hit ids as hex.
func (b *testBundle) search(t *testing.T, q Query) []string {
	t.Helper()
	if q.Community == "" {
		q.Community = b.community
	}
	res, err := b.s.Search(context.Background(), q)
	require.NoError(t, err)
	return hitIDs(res.Hits)
}

func hitIDs(hits []Hit) []string {
	out := make([]string, len(hits))
	for i := range hits {
		out[i] = hits[i].IDHex()
	}
	return out
}

func ptr[T any](v T) *T { return &v }
