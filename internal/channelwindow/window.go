package channelwindow

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/replica"
)

// Labels of buzz_db_route_decision (§10) that channel mode uses.
const (
	pathHead       = "channel_head"
	pathCursor     = "channel_cursor"
	routeWriter    = "writer"
	routeReplica   = "replica"
	reasonHeadPage = "head_page"
	// reasonNotConfigured is the cursor-page reason when Config names none.
	reasonNotConfigured = "not_configured"
)

// page is everything one window read found in one snapshot.
type page struct {
	sel       selection
	delivered []row
	aux       []Item
	auxCut    bool
	summaries []summary
}

// Window serves one channel window: rows (keyset order), aux, summaries,
// bounds (§4.5). An inaccessible channel yields nothing and no error. A
// head page reads from the writer; a cursor page from a proved replica
// snapshot when cfg.Replica allows it (rows, aux and summaries then all
// come from that one snapshot), else from the writer. A database failure
// is a 500 *Error (details in the log); when ctx ends, its error is
// returned as is.
func (e *Engine) Window(ctx context.Context, sc Scope, r Request) ([]Item, error) {
	if !sc.Accessible(r.Channel) {
		e.count("channel", "ok")
		return nil, nil
	}
	r.Limit = min(max(r.Limit, 1), maxLimit) // as Parse clamps it, for a Request built without Parse
	p, err := e.route(ctx, sc, r)
	if err != nil {
		return nil, e.fail(ctx, "channel", "channel window", err, slog.String("community", sc.CommunityID), slog.String("channel", r.Channel))
	}
	if p.auxCut {
		e.cfg.Metrics.Window.AuxTruncated.Inc()
		e.log.WarnContext(ctx, "channel window aux closure cut at its page or byte limit",
			slog.String("community", sc.CommunityID), slog.String("channel", r.Channel), slog.Int("pages_per_hop", auxMaxPages), slog.Int("max_bytes", e.cfg.MaxBytes), slog.Int("aux", len(p.aux)))
	}
	items, err := e.assemble(r, p)
	if err != nil {
		return nil, e.fail(ctx, "channel", "channel window", err, slog.String("community", sc.CommunityID), slog.String("channel", r.Channel))
	}
	e.count("channel", "ok")
	return items, nil
}

// route reads the window where §4.6 says and counts the decision.
func (e *Engine) route(ctx context.Context, sc Scope, r Request) (page, error) {
	var p page
	run := func(q pg.Querier) error {
		var err error
		p, err = read(ctx, q, sc, r, e.cfg.MaxBytes)
		return err
	}
	if r.Cursor == nil {
		e.decide(pathHead, routeWriter, reasonHeadPage)
		return p, e.onWriter(ctx, run)
	}
	if e.cfg.Replica == nil {
		e.decide(pathCursor, routeWriter, e.noReplicaReason())
		return p, e.onWriter(ctx, run)
	}
	route, reason, err := e.cfg.Replica.ReadWhy(ctx, r.Cursor.CreatedAt, func(s *replica.Session) error {
		return onSession(ctx, s.Querier(), run)
	})
	if err != nil {
		return page{}, fmt.Errorf("replica read: %w", err)
	}
	if route == replica.RouteReplica {
		e.decide(pathCursor, routeReplica, string(reason))
		return p, nil
	}
	e.decide(pathCursor, routeWriter, string(reason))
	return p, e.onWriter(ctx, run)
}

// read runs the window's statements on q: rows, then the aux closure and
// the summaries of the delivered rows when asked for.
func read(ctx context.Context, q pg.Querier, sc Scope, r Request, maxBytes int) (page, error) {
	sel, err := selectRows(ctx, q, sc, r, maxBytes)
	if err != nil {
		return page{}, err
	}
	p := page{sel: sel, delivered: sel.delivered()}
	if r.IncludeAux && len(p.delivered) > 0 {
		if p.aux, p.auxCut, err = auxClosure(ctx, q, sc, p.delivered, maxBytes); err != nil {
			return page{}, err
		}
	}
	if r.IncludeSummaries {
		if p.summaries, err = rowSummaries(ctx, q, sc.CommunityID, p.delivered); err != nil {
			return page{}, err
		}
	}
	return p, nil
}

// assemble orders the answer (rows, aux, summaries, bounds) and signs the
// overlays.
func (e *Engine) assemble(r Request, p page) ([]Item, error) {
	now := time.Now().Unix()
	items := make([]Item, 0, len(p.delivered)+len(p.aux)+len(p.summaries)+1)
	for _, rw := range p.delivered {
		items = append(items, item(rw.ev, rw.channel))
	}
	items = append(items, p.aux...)
	for _, s := range p.summaries {
		it, err := e.signSummary(r.Channel, s, now)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	b, err := e.signBounds(r, p.sel, now)
	if err != nil {
		return nil, err
	}
	return append(items, b), nil
}

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

// fail turns a failed read into the engine's answer. When ctx ended the
// request is gone: it counts unavailable and returns ctx's error. Anything
// else is logged at error with its detail, counted internal, and answered
// 500 with the fixed text.
func (e *Engine) fail(ctx context.Context, mode, what string, err error, attrs ...any) error {
	if ctx.Err() != nil {
		e.count(mode, "unavailable")
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	e.count(mode, "internal")
	e.log.ErrorContext(ctx, what+" failed", append(attrs, slog.String("err", err.Error()))...)
	return &Error{Status: http.StatusInternalServerError, Text: "internal server error"}
}

// Aux is the aux closure of the legacy oldest-first thread read
// (50-windows.md §6) with include_aux: hop 1 on targets (the root and the
// delivered replies), hop 2 on the hop-1 events it kept, under the rules
// and page limits of a channel window's closure, on the writer. The
// targets themselves are not returned. A cut closure is logged at warn.
func (e *Engine) Aux(ctx context.Context, sc Scope, targets []string) ([]Item, error) {
	var (
		items []Item
		cut   bool
	)
	err := e.onWriter(ctx, func(q pg.Querier) error {
		var err error
		items, cut, err = closeOver(ctx, q, sc, targets, e.cfg.MaxBytes)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("legacy thread aux: %w", err)
	}
	if cut {
		e.log.WarnContext(ctx, "legacy thread aux closure cut at its page or byte limit",
			slog.Int("pages_per_hop", auxMaxPages), slog.Int("max_bytes", e.cfg.MaxBytes), slog.Int("aux", len(items)))
	}
	return items, nil
}
