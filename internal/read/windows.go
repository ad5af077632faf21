package read

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/window"
)

// The NIP-CW window modes of POST /query (docs/NIP-CW.md). The door only
// dispatches here; package window runs them:
//
//	thread_window: true         window.Threads: the whole request is one batch
//	resolve_thread_roots: true  window.Resolve, per filter
//	top_level: true             window.Channel, per filter
//
// A window's own events (rows, aux, overlays) are handed over complete:
// the request's removal of repeated ids applies to the other filters'
// results only (docs/NIP-CW.md §3.6).

// msgThreadMix is the refusal of a thread window mixed with other filters
// (docs/NIP-CW.md §5.2).
const msgThreadMix = "thread_window cannot mix with other query modes"

// StatusError is a window request the relay will not or cannot serve
// with a status of its own (a 400 of the window rules, a retryable 503, a
// 500): Text is the exact body text. Doors answer it as is.
type StatusError struct {
	Status int
	Text   string
}

func (e *StatusError) Error() string { return e.Text }

// ThreadWindows is the thread-window opt-in scan of a /query body
// (docs/NIP-CW.md §5.1), made before any other parsing of its filters.
type ThreadWindows struct {
	windows []window.ThreadRequest
	opted   int
}

// ScanThreadWindows runs the opt-in scan of docs/NIP-CW.md §5.1 over the raw filters of a /query body:
// the fifth opted-in filter, or the first opted-in filter that fails
// strict parsing, is a 400 *StatusError.
func (e *Engine) ScanThreadWindows(raws []json.RawMessage) (ThreadWindows, error) {
	reqs, opted, err := window.ParseBatch(raws)
	if err != nil {
		e.cfg.Metrics.Window.Requests.WithLabelValues("thread", "bad_request").Inc()
		return ThreadWindows{}, windowError(err)
	}
	return ThreadWindows{windows: reqs, opted: opted}, nil
}

// windowError turns the window package's error into a *StatusError; any
// other error passes through (a database failure: the door's 500).
func windowError(err error) error {
	var we *window.Error
	if errors.As(err, &we) {
		return &StatusError{Status: we.Status, Text: we.Text}
	}
	return err
}

// openThreadBatch is Open for a /query request with thread windows, after
// the generic gates (docs/NIP-CW.md §5.2): every filter must have opted in. The
// batch reads its own authorization from the writer, so no scope is
// resolved here.
func (r *Read) openThreadBatch() (*Read, error) {
	if r.req.Threads.opted != len(r.req.Filters) {
		r.e.cfg.Metrics.Window.Requests.WithLabelValues("thread", "bad_request").Inc()
		return nil, &StatusError{Status: http.StatusBadRequest, Text: msgThreadMix}
	}
	r.thread = true
	return r, nil
}

// threadRows runs the thread batch and hands over its events.
func (r *Read) threadRows(ctx context.Context, emit func(Row) bool) error {
	items, err := r.e.windows.Threads(ctx, window.Batch{
		CommunityID: r.req.CommunityID, Host: r.req.Host, Reader: r.req.Reader, Windows: r.req.Threads.windows,
	})
	if err != nil {
		return windowError(err)
	}
	for i := range items {
		if !emit(Row{Event: items[i].Event, Channel: items[i].Channel, JSON: items[i].JSON}) {
			return nil
		}
	}
	return nil
}

// windowRequest is one /query filter's parsed channel-mode request.
type windowRequest struct {
	channel *window.ChannelRequest
	resolve *window.ResolveRequest
}

// parseWindow parses a channel-mode or summary-recovery filter; the
// request-wide id total of docs/NIP-CW.md §4 is checked first, by parseWindows.
func (e *Engine) parseWindow(f *event.Filter) (windowRequest, error) {
	switch routeOf(f) {
	case routeResolveRoots:
		rr, err := window.ParseResolve(f)
		if err != nil {
			e.cfg.Metrics.Window.Requests.WithLabelValues("resolve_roots", "bad_request").Inc()
			return windowRequest{}, windowError(err)
		}
		return windowRequest{resolve: &rr}, nil
	case routeChannelWindow:
		cr, err := window.ParseChannel(f)
		if err != nil {
			e.cfg.Metrics.Window.Requests.WithLabelValues("channel", "bad_request").Inc()
			return windowRequest{}, windowError(err)
		}
		return windowRequest{channel: &cr}, nil
	}
	return windowRequest{}, nil
}

// checkResolveTotal is the request-wide rule of docs/NIP-CW.md §4, before any filter is
// parsed further or served.
func (e *Engine) checkResolveTotal(filters []event.Filter) error {
	if err := window.CheckResolveTotal(filters); err != nil {
		e.cfg.Metrics.Window.Requests.WithLabelValues("resolve_roots", "bad_request").Inc()
		return windowError(err)
	}
	return nil
}

// windowRows serves one channel-mode or summary-recovery filter.
func (r *Read) windowRows(ctx context.Context, w windowRequest) ([]Row, error) {
	sc := window.Scope{CommunityID: r.req.CommunityID, Reader: r.req.Reader, Accessible: r.acc.Has}
	var (
		items []window.Item
		err   error
	)
	if w.resolve != nil {
		items, err = r.e.windows.Resolve(ctx, sc, *w.resolve)
	} else {
		items, err = r.e.windows.Channel(ctx, sc, *w.channel)
	}
	if err != nil {
		return nil, windowError(err)
	}
	rows := make([]Row, len(items))
	for i := range items {
		rows[i] = Row{Event: items[i].Event, Channel: items[i].Channel, JSON: items[i].JSON}
	}
	return rows, nil
}

// legacyAux appends the aux closure of a legacy thread read with
// include_aux (docs/NIP-CW.md §6): the root and the delivered replies are its hop-1
// targets; aux does not count against the read's limit.
func (r *Read) legacyAux(ctx context.Context, root string, replies []Row) ([]Row, error) {
	targets := make([]string, 0, len(replies)+1)
	targets = append(targets, root)
	for i := range replies {
		targets = append(targets, replies[i].Event.ID)
	}
	sc := window.Scope{CommunityID: r.req.CommunityID, Reader: r.req.Reader, Accessible: r.acc.Has}
	items, err := r.e.windows.Aux(ctx, sc, targets)
	if err != nil {
		return nil, err
	}
	for i := range items {
		replies = append(replies, Row{Event: items[i].Event, Channel: items[i].Channel, JSON: items[i].JSON})
	}
	return replies, nil
}
