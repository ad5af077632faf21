// Package threadwindow is the thread mode of NIP-CW (50-windows.md §5): a
// newest-first page of one root's replies on POST /query, an optional
// two-hop aux closure bounded by shared budgets, and one relay-signed
// bounds event (kind 39007) bound to the request. The read door (package
// read) recognises a thread-window batch and hands it here whole.
//
// It owns the strict parsing of thread-window filters (parse.go), the
// request binding of the bounds (binding.go), and the batch (batch.go):
// the reader's accessible channels read from the writer before and after
// the windows are built (access.go), per window the root check and the
// two-phase reply selection, sizes first and payloads only for rows
// already charged (select.go, sql.go), the aux closure (aux.go), the
// budgets every window of a batch shares (budget.go), where each page is
// read (route.go: head pages on the writer, cursor pages on a proved
// replica snapshot, the writer after the first doubt), the signing of
// the bounds once the authorization is known unchanged (bounds.go), and
// the mapping of every failure to its 400, 503 or 500 (failure.go).
//
// It does NOT route filters (the read door decides that a request is a
// thread batch and refuses mixes), does NOT speak HTTP (the door answers
// an *Error with its status and text), caches no authorization, writes
// nothing, and does NOT prove replica snapshots (package replica does; a
// window only runs inside the Session it is handed).
package threadwindow

import (
	"context"
	"log/slog"
	"time"

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

// New returns an Engine. A nil Metrics counts nothing; a nil Logger
// discards.
func New(cfg Config) *Engine {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With(slog.String("component", "threadwindow"))
	return &Engine{cfg: cfg}
}

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
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, batchDeadline)
	defer cancel()
	run := &batch{e: e, communityID: b.CommunityID, host: b.Host, reader: b.Reader, routes: map[string]int{},
		log: e.cfg.Logger.With(slog.String("community_id", b.CommunityID), slog.String("pubkey", b.Reader))}
	items, sizes, served, err := run.serve(bctx, b.Windows)
	return run.finish(ctx, bctx, len(b.Windows), served, items, sizes, err, start)
}
