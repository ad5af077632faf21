package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultAcquireTimeout is how long a request waits for a pooled connection
// before failing (docs/PROTOCOL.md §10).
const DefaultAcquireTimeout = 3 * time.Second

// ErrAcquireTimeout is returned (wrapped) by Acquire when no connection
// became free within the timeout.
var ErrAcquireTimeout = errors.New("timed out acquiring a database connection")

// PoolConfig configures Open.
type PoolConfig struct {
	// MaxConns is the pool size (BUZZ_DB_POOL_SIZE). Zero keeps pgx's default.
	MaxConns int32
	// AcquireTimeout bounds the initial ping and each new connection's dial.
	// Defaults to DefaultAcquireTimeout. Pass it to Acquire for per-request waits.
	AcquireTimeout time.Duration
	// Logger receives pool events. Nil discards them.
	Logger *slog.Logger
	// CreatedAtFloor, when positive, sets buzz.created_at_floor (whole
	// seconds) on every connection, which arms the events_created_at_floor
	// trigger (migration 0005): a channel row older than the floor fails
	// at COMMIT (IsCreatedAtFloor). Only the relay's writer pool sets it;
	// operator commands, migrations and test fixtures leave it unset.
	CreatedAtFloor time.Duration
	// StatementTimeout, when positive, sets statement_timeout on every
	// connection (the read replica's 2 s bound).
	StatementTimeout time.Duration
	// Lazy skips the initial ping: Open returns at once and connections
	// are dialled on first use, so a server that is down at start fails
	// its requests, not the caller's startup (the read replica).
	Lazy bool
	// AsyncCommit sets synchronous_commit off: a commit returns before its
	// WAL reaches the disk, and a crash may lose the last moments of
	// commits, never corrupt anything. Only for writers that can re-run
	// what they lost (community import); they end with FlushCommits.
	AsyncCommit bool
	// GINPendingListKB, when positive, sets gin_pending_list_limit (kB) on
	// every connection: an insert that takes a GIN index's pending list
	// past it merges the list into the index. Every search through a GIN
	// reads its whole pending list, so the writer keeps the lists short
	// (WriterGINPendingListKB) instead of PostgreSQL's 4 MB.
	GINPendingListKB int
}

// WriterGINPendingListKB is the relay's writer pool's GINPendingListKB,
// the smallest PostgreSQL allows (docs/PERFORMANCE.md "Short GIN pending
// lists").
const WriterGINPendingListKB = 64

// Querier is what both a pool and a transaction offer, so store code can run
// inside or outside a caller's transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ Querier = (*pgxpool.Pool)(nil)
	_ Querier = (pgx.Tx)(nil)
)

// Open connects a pool to url and pings the server (unless cfg.Lazy). Every
// new connection first applies cfg's session settings. The error never
// contains the URL (it may hold a password). The caller closes the pool.
func Open(ctx context.Context, url string, cfg PoolConfig) (*pgxpool.Pool, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := cfg.AcquireTimeout
	if timeout <= 0 {
		timeout = DefaultAcquireTimeout
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("open database: invalid connection URL")
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	pc.ConnConfig.ConnectTimeout = timeout
	if settings := sessionSettings(cfg); len(settings) > 0 {
		pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			return applySettings(ctx, c, settings)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if cfg.Lazy {
		return pool, nil
	}
	pingCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: ping: %w", err)
	}
	log.Debug("database pool open", slog.Int("max_conns", int(pc.MaxConns)),
		slog.String("database", pc.ConnConfig.Database))
	return pool, nil
}

// sessionSettings are the run-time parameters cfg sets on every connection,
// name → value.
func sessionSettings(cfg PoolConfig) map[string]string {
	out := map[string]string{}
	if cfg.CreatedAtFloor > 0 {
		out["buzz.created_at_floor"] = strconv.FormatInt(int64(cfg.CreatedAtFloor/time.Second), 10)
	}
	if cfg.StatementTimeout > 0 {
		out["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	if cfg.AsyncCommit {
		out["synchronous_commit"] = "off"
	}
	if cfg.GINPendingListKB > 0 {
		out["gin_pending_list_limit"] = strconv.Itoa(cfg.GINPendingListKB)
	}
	return out
}

// FlushCommits makes every transaction committed before it on the server
// durable, those of AsyncCommit pools included: it commits a transaction
// that takes a transaction id with synchronous_commit on, whatever the
// server's setting, so its commit waits for the WAL to be flushed up to
// its commit record, and the WAL is flushed in order.
func FlushCommits(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on; SELECT pg_logical_emit_message(true, 'buzz', 'flush')")
		return err
	})
	if err != nil {
		return fmt.Errorf("flush commits: %w", err)
	}
	return nil
}

// applySettings sets each parameter for the session in one round trip. A
// SET after connecting, rather than a startup parameter, also passes
// through connection poolers that refuse unknown startup parameters.
func applySettings(ctx context.Context, c *pgx.Conn, settings map[string]string) error {
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	values := make([]string, len(names))
	for i, name := range names {
		values[i] = settings[name]
	}
	_, err := c.Exec(ctx, "SELECT set_config(n, v, false) FROM unnest($1::text[], $2::text[]) AS s(n, v)", names, values)
	if err != nil {
		return fmt.Errorf("apply session settings %v: %w", names, err)
	}
	return nil
}

// Acquire takes a connection from pool, waiting at most timeout
// (DefaultAcquireTimeout when zero). A timeout returns ErrAcquireTimeout; the
// connection itself is not bound to the timeout. The caller releases it.
func Acquire(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration) (*pgxpool.Conn, error) {
	if timeout <= 0 {
		timeout = DefaultAcquireTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("acquire connection: %w", ErrAcquireTimeout)
		}
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	return conn, nil
}
