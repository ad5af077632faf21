package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
)

// errNoTx is a transaction asked of a Store made over a querier that
// cannot begin one (NewReader's).
var errNoTx = errors.New("store: this querier cannot begin a transaction")

// bounded is NewReader's querier: each statement runs on a connection
// taken from pool within timeout (pg.Acquire) and given back when its
// result has been read.
type bounded struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ pg.Querier = (*bounded)(nil)

func (b *bounded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, err := pg.Acquire(ctx, b.pool, b.timeout)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer conn.Release()
	return conn.Exec(ctx, sql, args...)
}

func (b *bounded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, err := pg.Acquire(ctx, b.pool, b.timeout)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		conn.Release()
		return nil, err
	}
	return &boundedRows{Rows: rows, conn: conn}, nil
}

func (b *bounded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := b.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return boundedRow{rows}
}

func (b *bounded) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	conn, err := pg.Acquire(ctx, b.pool, b.timeout)
	if err != nil {
		return errBatch{err: err}
	}
	return &boundedBatch{BatchResults: conn.SendBatch(ctx, batch), conn: conn}
}

// boundedRows gives its connection back once the rows are done: when Next
// answers false or at Close, whichever comes first.
type boundedRows struct {
	pgx.Rows
	conn *pgxpool.Conn
	once sync.Once
}

func (r *boundedRows) release() { r.once.Do(r.conn.Release) }

func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.release()
	return false
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	r.release()
}

// boundedRow is QueryRow's answer: pgx's own semantics (ErrNoRows, the
// first row only) over a boundedRows.
type boundedRow struct{ rows pgx.Rows }

func (r boundedRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if err := r.rows.Err(); err != nil {
		return err
	}
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type boundedBatch struct {
	pgx.BatchResults
	conn *pgxpool.Conn
	once sync.Once
}

func (b *boundedBatch) Close() error {
	err := b.BatchResults.Close()
	b.once.Do(b.conn.Release)
	return err
}

// errBatch is SendBatch's answer when no connection was taken: every
// result is the acquire error.
type errBatch struct {
	pgx.BatchResults
	err error
}

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b errBatch) Close() error                     { return b.err }
