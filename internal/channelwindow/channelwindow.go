// Package channelwindow is the channel mode of NIP-CW (50-windows.md §4):
// a newest-first page of a channel's top-level rows on POST /query, with
// an optional aux closure, thread summaries (kind 39005) and one
// relay-signed bounds event (kind 39006); and summary recovery
// (resolve_thread_roots, §4.7). The read door (package read) routes each
// such filter here.
//
// It owns the parsing of those filters (request.go), the statements that
// read them (rows.go, aux.go, summary.go, resolve.go), where a page is
// read (window.go: head pages on the writer, cursor pages on a proved
// replica snapshot when one is configured) and the signed overlays
// (overlay.go, summary.go).
//
// It does NOT decide who may read a channel (the door passes the reader's
// accessible set in Scope), does NOT touch thread mode (package
// threadwindow) or the legacy thread read, and writes nothing: overlays
// are signed per request and never stored.
package channelwindow

import (
	"log/slog"

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
	// Key is the relay's 32-byte secret key; it signs 39005 and 39006.
	Key []byte
	// Metrics receives buzz_window_requests_total{mode="channel"|
	// "resolve_roots"}, buzz_db_route_decision and
	// buzz_channel_window_aux_truncated_total. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// Logger receives the aux-cut warnings and the details of 500s; nil
	// discards.
	Logger *slog.Logger
	// MaxBytes, above 0, bounds the JSON bytes of one window's page rows
	// and, separately, of its aux closure (BUZZ_READ_MAX_BYTES). The row
	// that would go over it ends the page like the probe does: has_more
	// true, next_cursor the last row retained (docs/NIP-CW.md §2). The
	// aux event that would go over it cuts the closure like its page
	// limit does (docs/NIP-CW.md §3.3). The first row is always retained.
	// 0 means no bound.
	MaxBytes int
}

// Engine serves channel windows and summary recovery. It is safe for
// concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger
}

// New returns an Engine. Store and Key are required; a nil Metrics counts
// nowhere, a nil Logger discards.
func New(cfg Config) *Engine {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{cfg: cfg, log: log.With("component", "channelwindow")}
}

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
