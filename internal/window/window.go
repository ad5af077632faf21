// Package window serves the NIP-CW windows of POST /query
// (docs/NIP-CW.md): relay-computed, cursor-paged pages over a
// conversation, each closed by one relay-signed bounds event. The read
// door (package read) recognises a window filter and hands it here.
//
// It has two modes and summary recovery, each in files of its own:
//
//   - channel mode (channel*.go, docs/NIP-CW.md §3): a newest-first page
//     of a channel's top-level rows, optional thread summaries (kind
//     39005) and one bounds event (kind 39006); summary recovery
//     (resolve_thread_roots, docs/NIP-CW.md §4) lives beside it;
//   - thread mode (thread*.go, docs/NIP-CW.md §5): a batch of up to four
//     newest-first pages of one root's replies, each with one bounds
//     event (kind 39007) bound to the request, under budgets the batch
//     shares.
//
// Both modes share what they have in common (this file, stored.go,
// aux.go, budget.go, tx.go): the keyset cursor, the answer's items, the
// one error type, the one aux closure (docs/NIP-CW.md §3.3, §5.3) with
// its one statement, the one budget type that bounds it, the stored-row
// decoding and the read-only window transaction on the writer.
//
// Its statements are the store's (store.Window…, internal/store/windows.go):
// they return rows as stored, and this package walks them, charges them
// and decides what is delivered. It holds no SQL.
//
// It does NOT decide who may read a channel for channel mode (the door
// passes the reader's accessible set in Scope; thread mode reads its own
// from the store, before and after the batch), does NOT speak HTTP (an
// *Error carries the status and text the door answers with), does NOT
// prove replica snapshots (package replica does; a page only runs inside
// the Session it is handed), and writes nothing: overlays are signed per
// request and never stored.
package window

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Cursor is a keyset position: created_at (unix seconds) and the
// lowercase hex event id.
type Cursor struct {
	CreatedAt int64
	ID        string
}

// Item is one event of the answer.
type Item struct {
	Event event.Event
	// Channel is the stored channel id, "" for a channel-less event or an
	// overlay.
	Channel string
	// JSON is the event encoded once.
	JSON []byte
}

// Error is a request the engine will not or cannot serve: Status is the
// HTTP status (400, 503 or 500) and Text the exact body text
// (docs/NIP-CW.md §8). It is the package's one error type: inside a
// thread batch it also carries what the batch's end counts and logs
// (thread_failure.go), which never leaves the package.
type Error struct {
	Status int
	Text   string

	// budget is the buzz_thread_window_budget_exhausted_total label the
	// failure counts under, "" for none.
	budget string
	// authChanged marks the A ≠ A' failure
	// (buzz_thread_window_authorization_changed_total).
	authChanged bool
	// cause is the detail for the log, never for the client.
	cause error
}

// Error returns Text alone: the cause is for the log.
func (e *Error) Error() string { return e.Text }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// The row budget of a page (docs/NIP-CW.md §3.1, §5.1): absent means
// defaultLimit; channel mode clamps anything else into 1..maxLimit,
// thread mode refuses it.
const (
	defaultLimit = 50
	maxLimit     = 200
)

// maxUntil is the newest cursor second accepted, 9999-12-31T23:59:59Z:
// the last second an RFC 3339 timestamp can name.
const maxUntil = 253402300799

// badRequest is a 400 with text.
func badRequest(text string) *Error { return &Error{Status: http.StatusBadRequest, Text: text} }

// maxChunk caps the doubling chunks of a channel window's row walk and a
// thread window's reply scan.
const maxChunk = 1024

// msgInternal is the text of every 500 (docs/NIP-CW.md §2): details are
// logged, never sent.
const msgInternal = "internal server error"

// Config configures an Engine.
type Config struct {
	// Pool is the writer: thread mode's authorization reads, head pages,
	// summary recovery and every page the replica does not serve.
	Pool *pgxpool.Pool
	// Replica serves proved cursor pages (docs/NIP-CW.md §7); nil keeps
	// every page on the writer, counted with NoReplicaReason.
	Replica *replica.Replica
	// NoReplicaReason is the buzz_db_route_decision reason of a cursor
	// page when Replica is nil: "not_configured" (the default) or
	// "floor_unverified".
	NoReplicaReason string
	// Key is the relay's 32-byte secret key; it signs 39005, 39006 and
	// 39007.
	Key []byte
	// Metrics receives buzz_window_requests_total, buzz_db_route_decision,
	// buzz_channel_window_aux_truncated_total and the thread-mode budget,
	// authorization and response-size series. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// Logger receives channel mode's aux-cut warnings, each thread batch's
	// outcome line and the details of 500s; nil discards.
	Logger *slog.Logger
	// MaxBytes, above 0, bounds the JSON bytes of one channel window's
	// page rows and, separately, of its aux closure (BUZZ_READ_MAX_BYTES).
	// The row that would go over it ends the page like the probe does:
	// has_more true, next_cursor the last row retained
	// (docs/NIP-CW.md §2). The aux event that would go over it cuts the closure like its
	// page limit does (docs/NIP-CW.md §3.3). The first row is always
	// retained. 0 means no bound. Thread mode has budgets of its own
	// (budget.go).
	MaxBytes int
	// Deadline bounds one whole thread batch, from its first authorization
	// read to the assembled response. 0 means 8 s, the deadline of
	// docs/NIP-CW.md §5.7, which the relay always uses; an engine built for
	// another purpose (a tool, a test of a budget other than the deadline)
	// may give a batch longer.
	Deadline time.Duration
}

// Engine serves both window modes and summary recovery. It is safe for
// concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger
}

// New returns an Engine. Pool and Key are required; a nil Metrics counts
// nowhere, a nil Logger discards.
func New(cfg Config) *Engine {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = batchDeadline
	}
	return &Engine{cfg: cfg, log: log.With(slog.String("component", "window"))}
}

// Labels of buzz_db_route_decision (docs/OPERATIONS.md) shared by both
// modes; each mode names its own paths.
const (
	routeWriter    = "writer"
	routeReplica   = "replica"
	reasonHeadPage = "head_page"
	// reasonNotConfigured is the cursor-page reason when Config names none.
	reasonNotConfigured = "not_configured"
)

// noReplicaReason is the route reason of a cursor page without a replica.
func (e *Engine) noReplicaReason() string {
	if e.cfg.NoReplicaReason == "" {
		return reasonNotConfigured
	}
	return e.cfg.NoReplicaReason
}

// decide counts one buzz_db_route_decision.
func (e *Engine) decide(path, route, reason string) {
	e.cfg.Metrics.Window.RouteDecision.WithLabelValues(path, route, reason).Inc()
}

// count counts one buzz_window_requests_total.
func (e *Engine) count(mode, outcome string) {
	e.cfg.Metrics.Window.Requests.WithLabelValues(mode, outcome).Inc()
}
