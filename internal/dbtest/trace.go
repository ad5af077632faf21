package dbtest

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SQLRecorder is a pgx query tracer that records the SQL text of every
// statement its pool runs, for tests that count or compare statements.
type SQLRecorder struct {
	mu   sync.Mutex
	sql  []string
	last pgx.TraceQueryStartData
}

// TraceQueryStart records the statement's SQL, and keeps it with its
// arguments as the last statement.
func (r *SQLRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sql = append(r.sql, data.SQL)
	r.last = data
	return ctx
}

// Last returns the SQL and arguments of the last statement recorded, for
// a test that runs it again (under EXPLAIN, say).
func (r *SQLRecorder) Last() (sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last.SQL, r.last.Args
}

// TraceQueryEnd does nothing.
func (r *SQLRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Take returns the statements recorded since the last Take.
func (r *SQLRecorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sql
	r.sql = nil
	return out
}

// TracedPool opens a second pool of maxConns connections on pool's
// database whose statements rec records, from after the connections' own
// set-up on. It is closed when the test ends.
func TracedPool(t testing.TB, pool *pgxpool.Pool, rec *SQLRecorder, maxConns int32) *pgxpool.Pool {
	t.Helper()
	traced := TracedPoolWith(t, pool, rec, maxConns)
	rec.Take()
	return traced
}

// TracedPoolWith is TracedPool with any pgx query tracer: one that holds a
// statement's answer, or reads its arguments. Its connections are set up
// and have run one statement of their own ("SELECT 1") when it returns.
func TracedPoolWith(t testing.TB, pool *pgxpool.Pool, tracer pgx.QueryTracer, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = tracer
	cfg.MaxConns, cfg.MinConns = maxConns, 0
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dbtest: traced pool: %v", err)
	}
	t.Cleanup(traced.Close)
	if _, err := traced.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatalf("dbtest: traced pool: %v", err)
	}
	return traced
}

// Holder is a pgx query tracer for the statements Match picks: it counts
// them and, once armed, holds the next one after PostgreSQL has answered it
// and before its caller sees the answer, until Release.
type Holder struct {
	// Match picks the statements to count and hold.
	Match func(pgx.TraceQueryStartData) bool

	mu      sync.Mutex
	started int
	armed   bool
	reached chan struct{}
	release chan struct{}
}

type heldKey struct{}

// TraceQueryStart counts a picked statement and marks it held when armed.
func (h *Holder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if h.Match == nil || !h.Match(data) {
		return ctx
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started++
	if !h.armed {
		return ctx
	}
	h.armed = false
	return context.WithValue(ctx, heldKey{}, [2]chan struct{}{h.reached, h.release})
}

// TraceQueryEnd holds a marked statement until Release.
func (h *Holder) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if chans, ok := ctx.Value(heldKey{}).([2]chan struct{}); ok {
		close(chans[0])
		<-chans[1]
	}
}

// Arm holds the next picked statement. It returns a channel closed once
// that statement is answered and held.
func (h *Holder) Arm() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.reached, h.release = true, make(chan struct{}), make(chan struct{})
	return h.reached
}

// Release lets the held statement's caller go on.
func (h *Holder) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.release)
}

// Take returns how many picked statements started since the last Take.
func (h *Holder) Take() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.started
	h.started = 0
	return n
}
