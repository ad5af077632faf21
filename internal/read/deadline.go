package read

import (
	"context"
	"errors"
	"time"

	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Read deadlines (docs/OPERATIONS.md "Read deadlines and shares"). Every
// read has one, BUZZ_READ_STATEMENT_TIMEOUT_MS after its share was granted:
// Open's statements and those of Rows or Count run under a context that
// ends then, and pgx answers a context that ends mid-statement with a
// cancel request before it closes the connection, so the statement stops
// on the server too (read.TestReadDeadline checks it). Ingest runs under
// no such context. A read that passes its deadline is refused
// with MsgReadTimedOut and counted in buzz_read_timeouts_total{surface}.

// withDeadline is ctx bounded by deadline; a zero deadline leaves it as it is.
func withDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline)
}

// label is the surface's value of buzz_read_timeouts_total's label.
func (s Surface) label() string {
	switch s {
	case SurfaceREQ:
		return "req"
	case SurfaceCOUNT:
		return "count"
	case SurfaceQuery:
		return "query"
	case SurfaceNEG:
		return "neg"
	default:
		return "count_http"
	}
}

// finish turns err, returned by a read's work under its deadline, into the
// read's answer: a refusal or a window's status as they are; a deadline
// that passed, or a statement the server cancelled, into the timeout
// refusal, a pooled connection not found within the acquire timeout into
// the share refusal; anything else unchanged. parent is the caller's context: when it
// ended (the client went away) nothing is a timeout.
func (r *Read) finish(parent context.Context, err error) error {
	if err == nil || parent.Err() != nil {
		return err
	}
	var ref *Refusal
	var se *StatusError
	if errors.As(err, &ref) || errors.As(err, &se) {
		return err
	}
	if store.IsAcquireTimeout(err) {
		// The share was granted but the pool had no connection free
		// within the acquire timeout: ingest holds more than its reserve.
		r.e.cfg.Metrics.Reads.ShareRejections.WithLabelValues(scopeProcess).Inc()
		return refuse(CodeTooManyReads, wire.MsgTooManyReads)
	}
	passed := !r.deadline.IsZero() && !time.Now().Before(r.deadline)
	if (passed && errors.Is(err, context.DeadlineExceeded)) || store.IsStatementCanceled(err) {
		r.e.cfg.Metrics.Reads.Timeouts.WithLabelValues(r.req.Surface.label()).Inc()
		return refuse(CodeReadTimeout, wire.MsgReadTimedOut)
	}
	return err
}
