package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
)

// BatchPipe runs EventInsertBatch's statement on one connection of its
// own, taken from the pool, with up to two batches on their way at once:
// a batch sent while the last one is still executing or committing waits
// in the connection's socket, and the server starts it as soon as it has
// answered the last one, without waiting for the relay to read that answer
// and send the next (docs/ARCHITECTURE.md "Group commit"). Each batch is
// its own extended-protocol Bind, Execute and Sync: its own statement and
// its own commit, so a batch that fails rolls back alone and the next one
// on its way still runs.
//
// A batch whose connection is lost, whose server ends the session, or
// that takes longer than the pipe's timeout fails with an error for which
// pg.MayHaveCommitted is true: it may have committed. The connection is
// then closed, every batch still on its way on it fails the same way, and
// the next Send takes a new connection from the pool (which follows a
// promoted standby as it does for every other statement). A Send that
// finds no connection fails with an error that pg.MayHaveCommitted
// reports as not committed: nothing was sent.
//
// BatchPipe is safe for concurrent use; batches answer in the order they
// were sent.
type BatchPipe struct {
	pool    *pgxpool.Pool
	timeout time.Duration

	mu     sync.Mutex // serializes sends and guards conn and closed
	conn   *pipeConn
	closed bool
}

// NewBatchPipe returns a pipe on pool whose every batch must answer within
// timeout. It takes its connection on the first Send.
func NewBatchPipe(pool *pgxpool.Pool, timeout time.Duration) *BatchPipe {
	return &BatchPipe{pool: pool, timeout: timeout}
}

// PendingBatch is a batch sent through a BatchPipe.
type PendingBatch struct {
	b    *batch
	done chan struct{}
	res  []EventInsertResult
	err  error
	// formats are the result columns' format codes.
	formats []int16
	// failed is the server's error for this batch, answered once its
	// ReadyForQuery arrives.
	failed error
	timer  *time.Timer
}

// Done is closed once the batch has answered.
func (pb *PendingBatch) Done() <-chan struct{} { return pb.done }

// Result is what EventInsertBatch would have returned for the batch; it
// waits for Done.
func (pb *PendingBatch) Result() ([]EventInsertResult, error) {
	<-pb.done
	return pb.res, pb.err
}

func (pb *PendingBatch) finish(res []EventInsertResult, err error) {
	if pb.timer != nil {
		pb.timer.Stop()
	}
	pb.res, pb.err = res, err
	close(pb.done)
}

// batchStatementName names eventBatchSQL prepared on a pipe's connection.
const batchStatementName = "buzz_event_batch"

// errNotSent wraps a failure before any byte of a batch was sent.
type errNotSent struct{ err error }

func (e errNotSent) Error() string { return "insert batch: not sent: " + e.err.Error() }
func (e errNotSent) Unwrap() error { return e.err }

// SafeToRetry tells pg.MayHaveCommitted that nothing was sent.
func (e errNotSent) SafeToRetry() bool { return true }

// errLost wraps the failure of a batch that was sent, or may have been,
// and whose answer was not read: it may have committed, whatever the
// failure it wraps says of itself.
type errLost struct{ err error }

func (e errLost) Error() string { return e.err.Error() }
func (e errLost) Unwrap() error { return e.err }

// SafeToRetry tells pg.MayHaveCommitted that the batch may have committed.
func (e errLost) SafeToRetry() bool { return false }

// ErrPipeClosed is the error of a Send after Close.
var ErrPipeClosed = errors.New("batch pipe closed")

// Send sends ps's batch and returns at once; its result comes through the
// returned PendingBatch.
func (w *BatchPipe) Send(ps []EventInsertParams) *PendingBatch {
	pb := &PendingBatch{done: make(chan struct{})}
	b, err := newBatch(ps)
	if err != nil {
		pb.finish(nil, err)
		return pb
	}
	pb.b = b
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		pb.finish(nil, errNotSent{ErrPipeClosed})
		return pb
	}
	if w.conn == nil || w.conn.failed() {
		c, err := w.dial()
		if err != nil {
			pb.finish(nil, errNotSent{err})
			return pb
		}
		w.conn = c
	}
	w.conn.send(pb, w.timeout)
	return pb
}

// Close ends the pipe's session after the batches on their way: the
// server answers them, then closes the connection. Later Sends fail as not
// sent.
func (w *BatchPipe) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.conn != nil {
		w.conn.terminate(w.timeout)
		w.conn = nil
	}
}

// dial takes a connection from the pool for the pipe alone, prepares the
// batch statement on it and starts its reader.
func (w *BatchPipe) dial() (*pipeConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	pc, err := w.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	sd, err := pc.Conn().Prepare(ctx, batchStatementName, eventBatchSQL)
	if err != nil {
		pc.Release()
		return nil, err
	}
	conn := pc.Hijack() // the pool no longer counts it
	hc, err := conn.PgConn().Hijack()
	if err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	_ = hc.Conn.SetDeadline(time.Time{}) // each send sets its own; timers bound the answers
	c := &pipeConn{hc: hc, encode: conn.TypeMap(), decode: pgtype.NewMap(), sd: sd}
	go c.read()
	return c, nil
}

// pipeConn is a pipe's connection: the BatchPipe's lock serializes its
// sends, and its reader goroutine answers the batches in order.
type pipeConn struct {
	hc     *pgconn.HijackedConn
	encode *pgtype.Map // the sender's
	decode *pgtype.Map // the reader's: a Map is not safe for concurrent use
	sd     *pgconn.StatementDescription
	eqb    pgx.ExtendedQueryBuilder

	mu    sync.Mutex // guards queue and err
	queue []*PendingBatch
	err   error // set once the connection has failed
}

func (c *pipeConn) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// send writes pb's Bind, Execute and Sync. It is called with the
// BatchPipe's lock held.
func (c *pipeConn) send(pb *PendingBatch, timeout time.Duration) {
	if err := c.eqb.Build(c.encode, c.sd, pb.b.args.values()); err != nil {
		pb.finish(nil, fmt.Errorf("insert batch: %w", err))
		return
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		pb.finish(nil, errNotSent{c.err})
		return
	}
	pb.formats = append([]int16(nil), c.eqb.ResultFormats...)
	c.queue = append(c.queue, pb)
	pb.timer = time.AfterFunc(timeout, func() {
		c.failIf(pb, fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded))
	})
	c.mu.Unlock()
	fe := c.hc.Frontend
	fe.Send(&pgproto3.Bind{PreparedStatement: c.sd.Name, ParameterFormatCodes: c.eqb.ParamFormats,
		Parameters: c.eqb.ParamValues, ResultFormatCodes: c.eqb.ResultFormats})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	_ = c.hc.Conn.SetWriteDeadline(time.Now().Add(timeout))
	if err := fe.Flush(); err != nil {
		c.fail(err) // some of it may have reached the server
	}
}

// terminate asks the server to end the session once it has answered the
// batches on their way; the reader then sees the connection close.
func (c *pipeConn) terminate(timeout time.Duration) {
	if c.failed() {
		return
	}
	c.hc.Frontend.Send(&pgproto3.Terminate{})
	_ = c.hc.Conn.SetWriteDeadline(time.Now().Add(timeout))
	if err := c.hc.Frontend.Flush(); err != nil {
		c.fail(err)
	}
}

// fail closes the connection and fails every batch on its way with err,
// as possibly committed. Only the first failure counts.
func (c *pipeConn) fail(err error) { c.failIf(nil, err) }

// failIf fails the connection, as fail, if pb is nil or still on its way:
// a timer that fires as pb answers leaves the connection alone.
func (c *pipeConn) failIf(pb *PendingBatch, err error) {
	c.mu.Lock()
	if c.err != nil || (pb != nil && !slices.Contains(c.queue, pb)) {
		c.mu.Unlock()
		return
	}
	c.err = err
	queue := c.queue
	c.queue = nil
	c.mu.Unlock()
	_ = c.hc.Conn.Close()
	for _, pb := range queue {
		pb.finish(nil, errLost{fmt.Errorf("insert batch: connection lost: %w", err)})
	}
}

// head is the oldest batch on its way, nil when there is none.
func (c *pipeConn) head() *PendingBatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	return c.queue[0]
}

// pop removes the oldest batch on its way, unless the connection failed
// meanwhile (fail has answered it).
func (c *pipeConn) pop(pb *PendingBatch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 || c.queue[0] != pb {
		return false
	}
	c.queue = c.queue[1:]
	return true
}

// read reads the server's messages until the connection fails: each
// batch's rows, then its error if any, then its ReadyForQuery, which
// answers it.
func (c *pipeConn) read() {
	fe := c.hc.Frontend
	for {
		msg, err := fe.Receive()
		if err != nil {
			c.fail(err)
			return
		}
		switch m := msg.(type) {
		case *pgproto3.BindComplete, *pgproto3.CommandComplete, *pgproto3.NoticeResponse,
			*pgproto3.ParameterStatus, *pgproto3.NotificationResponse:
		case *pgproto3.DataRow:
			pb := c.head()
			if pb == nil {
				c.fail(errors.New("a row with no batch on its way"))
				return
			}
			if err := c.row(pb, m); err != nil && pb.failed == nil {
				pb.failed = errLost{err} // the batch commits all the same
			}
		case *pgproto3.ErrorResponse:
			// A batch's error comes before its ReadyForQuery. An error
			// that ends the session (FATAL) is followed by no
			// ReadyForQuery but by the connection's end, which fails
			// the batch as possibly committed.
			if pb := c.head(); pb != nil && pb.failed == nil {
				pb.failed = fmt.Errorf("insert batch: %w", pg.MapError(pgconn.ErrorResponseToPgError(m)))
			}
		case *pgproto3.ReadyForQuery:
			pb := c.head()
			if pb == nil || !c.pop(pb) {
				continue
			}
			if pb.failed != nil {
				pb.finish(nil, pb.failed)
			} else {
				pb.finish(pb.b.results(), nil)
			}
		default:
			c.fail(fmt.Errorf("unexpected message %T", msg))
			return
		}
	}
}

// row decodes one result row of pb's statement.
func (c *pipeConn) row(pb *PendingBatch, m *pgproto3.DataRow) error {
	if len(m.Values) != 4 || len(c.sd.Fields) != 4 || len(pb.formats) != 4 {
		return fmt.Errorf("insert batch: a row of %d columns", len(m.Values))
	}
	var r batchRow
	dst := []any{&r.community, &r.id, &r.listeners, &r.refused}
	for i, v := range m.Values {
		f := c.sd.Fields[i]
		if err := c.decode.Scan(f.DataTypeOID, pb.formats[i], v, dst[i]); err != nil {
			return fmt.Errorf("insert batch: column %d: %w", i, err)
		}
	}
	return pb.b.row(r)
}
