// Package threadwindow is the thread mode of NIP-CW (50-windows.md §5): a
// newest-first page of one root's replies on POST /query, an optional
// two-hop aux closure bounded by shared budgets, and one relay-signed
// bounds event (kind 39007) bound to the request. The read door (package
// read) recognises a thread-window batch and hands it here whole.
package threadwindow

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/store"
)

// Cursor is a keyset position: created_at (unix seconds) and the
// lowercase hex event id.
type Cursor struct {
	CreatedAt int64
	ID        string
}

// Request is one thread window after strict parsing and normalisation
// (§5.1): defaults applied, channel canonical, ids lowercase, kinds
// sorted and unique.
type Request struct {
	Channel    string
	Root       string
	Limit      int
	Depth      int
	Kinds      []int
	Cursor     *Cursor
	IncludeAux bool
}

// Error is a batch the engine will not or cannot serve: Status is the
// HTTP status (400, 503 or 500) and Text the exact body text.
type Error struct {
	Status int
	Text   string
}

func (e *Error) Error() string { return e.Text }

// OptedIn reports whether a raw /query filter opts in to thread mode: an
// object whose thread_window key is present and not false (§3 step 3).
func OptedIn(raw json.RawMessage) bool {
	panic("threadwindow: not built")
}

// ParseBatch is §3 step 3 over the raw filters of a /query body: it
// counts the opted-in filters (the fifth is refused) and parses each
// opted-in one strictly, in array order, the first failure being the
// answer (a 400 *Error). reqs holds the opted-in filters' requests in
// order; opted is their number.
func ParseBatch(raws []json.RawMessage) (reqs []Request, opted int, err error) {
	panic("threadwindow: not built")
}

// Binding is the d tag value of a window's 39007: "tw:1:" and the hex
// SHA-256 of the binding array of §5.6. host is the request's normalised
// host, reader the authenticated pubkey (lowercase hex).
func Binding(host, reader string, r Request) string {
	panic("threadwindow: not built")
}

// Config configures an Engine.
type Config struct {
	// Store is the writer: authorization reads and every window page that
	// the replica does not serve.
	Store *store.Store
	// Replica serves proved cursor pages (§7); nil keeps every page on the
	// writer, counted with NoReplicaReason.
	Replica *replica.Replica
	// NoReplicaReason is the buzz_db_route_decision reason of a cursor
	// page when Replica is nil: "not_configured" or "floor_unverified".
	NoReplicaReason string
	// Key signs the 39007 bounds events.
	Key     []byte
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Engine runs thread-window batches. It is safe for concurrent use.
type Engine struct{ cfg Config }

// New returns an Engine.
func New(cfg Config) *Engine { return &Engine{cfg: cfg} }

// Batch is one /query request's thread windows, 1 to 4, in request order.
type Batch struct {
	CommunityID string
	// Host is the normalised host of the request's community binding.
	Host string
	// Reader is the authenticated pubkey, lowercase hex.
	Reader  string
	Windows []Request
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

// Run serves a batch (§5.2, §5.3): for each served window its rows, its
// aux, its bounds, in request order. Any failure is an *Error and
// nothing of the batch is returned.
func (e *Engine) Run(ctx context.Context, b Batch) ([]Item, error) {
	return nil, &Error{Status: http.StatusInternalServerError, Text: "internal server error"}
}
