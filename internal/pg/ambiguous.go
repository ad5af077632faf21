package pg

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// MayHaveCommitted reports whether a write that failed with err may still
// have committed: the driver sent the statement or COMMIT, then lost the
// answer (the connection broke, or the caller's context ended, while it
// waited). An error the server itself reported (*pgconn.PgError) rolled
// the transaction back; an I/O failure pgconn marks safe to retry happened
// before anything was sent; an error that is no I/O failure at all (a
// refusal, a failure of the caller's own code inside the transaction)
// ended it before COMMIT. What is left is an I/O failure after sending:
// pgconn's own marking, or the bare EOF, network or context error it
// returns while reading a result.
func MayHaveCommitted(err error) bool {
	var pgErr *pgconn.PgError
	if err == nil || errors.As(err, &pgErr) {
		return false
	}
	var sent interface{ SafeToRetry() bool }
	if errors.As(err, &sent) {
		return !sent.SafeToRetry()
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
