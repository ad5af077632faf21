// Package channelwindow is the channel mode of NIP-CW (50-windows.md §4):
// a newest-first page of a channel's top-level rows on POST /query, with
// an optional aux closure, thread summaries (kind 39005) and one
// relay-signed bounds event (kind 39006); and summary recovery
// (resolve_thread_roots, §4.7). The read door (package read) routes each
// such filter here.
package channelwindow

import (
	"context"
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

// Request is one channel window after parsing (§4.1).
type Request struct {
	// Channel is the canonical (lowercase) channel UUID.
	Channel string
	// Limit is the row budget, clamped into 1..200.
	Limit int
	// Kinds restricts row kinds; nil means every kind.
	Kinds []int
	// Cursor is nil for a head request.
	Cursor           *Cursor
	IncludeAux       bool
	IncludeSummaries bool
}

// ResolveRequest is one summary-recovery filter after parsing (§4.7).
type ResolveRequest struct {
	Channel string
	// Targets are the lowercase reply ids, 1 to 100.
	Targets []string
}

// Error is a filter the engine will not serve: Status is the HTTP status
// and Text the exact body text.
type Error struct {
	Status int
	Text   string
}

func (e *Error) Error() string { return e.Text }

// IsWindow reports whether f selects channel mode: top_level is boolean
// true.
func IsWindow(f *event.Filter) bool { panic("channelwindow: not built") }

// IsResolve reports whether f is a summary-recovery filter:
// resolve_thread_roots is boolean true.
func IsResolve(f *event.Filter) bool { panic("channelwindow: not built") }

// Parse parses a channel-mode filter (IsWindow) by §4.1; a refusal is a
// 400 *Error with the §4.1 text.
func Parse(f *event.Filter) (Request, error) { panic("channelwindow: not built") }

// ParseResolve parses a summary-recovery filter (IsResolve) by §4.7.
func ParseResolve(f *event.Filter) (ResolveRequest, error) { panic("channelwindow: not built") }

// CheckResolveTotal is §4.7's request-wide rule, checked before any filter
// is served: at most 100 ids over every summary-recovery filter.
func CheckResolveTotal(filters []event.Filter) error { panic("channelwindow: not built") }

// Config configures an Engine.
type Config struct {
	// Store is the writer.
	Store *store.Store
	// Replica serves proved cursor pages (§4.6, §7); nil keeps every page
	// on the writer, counted with NoReplicaReason.
	Replica *replica.Replica
	// NoReplicaReason is the buzz_db_route_decision reason of a cursor
	// page when Replica is nil: "not_configured" or "floor_unverified".
	NoReplicaReason string
	// Key signs 39005 and 39006.
	Key     []byte
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Engine serves channel windows and summary recovery. It is safe for
// concurrent use.
type Engine struct{ cfg Config }

// New returns an Engine.
func New(cfg Config) *Engine { return &Engine{cfg: cfg} }

// Scope is who reads, where, and what they may see.
type Scope struct {
	CommunityID string
	// Reader is the authenticated pubkey, lowercase hex.
	Reader string
	// Accessible reports whether the reader may read a channel (the read
	// door's accessible set, with the request's confirmed channels).
	Accessible func(channel string) bool
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

// Window serves one channel window: rows (keyset order), aux, summaries,
// bounds (§4.5). An inaccessible channel yields nothing.
func (e *Engine) Window(ctx context.Context, sc Scope, r Request) ([]Item, error) {
	return nil, &Error{Status: http.StatusInternalServerError, Text: "internal server error"}
}

// Resolve serves one summary-recovery filter (§4.7) on the writer.
func (e *Engine) Resolve(ctx context.Context, sc Scope, r ResolveRequest) ([]Item, error) {
	return nil, &Error{Status: http.StatusInternalServerError, Text: "internal server error"}
}
