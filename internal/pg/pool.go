package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultAcquireTimeout is how long a request waits for a pooled connection
// before failing (spec 10 §10).
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
}

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

// Open connects a pool to url and pings the server. The error never contains
// the URL (it may hold a password). The caller closes the pool.
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
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
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
