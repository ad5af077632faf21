package window

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/replica"
)

// The paths of buzz_db_route_decision that channel mode uses.
const (
	pathChannelHead   = "channel_head"
	pathChannelCursor = "channel_cursor"
)

// channelPage is everything one channel window read found in one
// snapshot.
type channelPage struct {
	sel       channelSelection
	delivered []row
	aux       []Item
	auxCut    bool
	summaries []summary
}

// Channel serves one channel window: rows (keyset order), aux, summaries,
// bounds (docs/NIP-CW.md §3.6). An inaccessible channel yields nothing and no
// error. A head page reads from the writer; a cursor page from a proved
// replica snapshot when cfg.Replica allows it (rows, aux and summaries then
// all come from that one snapshot), else from the writer. A database failure
// is a 500 *Error (details in the log); when ctx ends, its error is returned
// as is.
func (e *Engine) Channel(ctx context.Context, sc Scope, r ChannelRequest) ([]Item, error) {
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

// route reads the window where docs/NIP-CW.md §7 says (head pages on the
// writer, cursor pages on a proved replica snapshot when one is
// configured) and counts the decision.
func (e *Engine) route(ctx context.Context, sc Scope, r ChannelRequest) (channelPage, error) {
	var p channelPage
	run := func(q pg.Querier) error {
		var err error
		p, err = readChannel(ctx, q, sc, r, e.cfg.MaxBytes)
		return err
	}
	if r.Cursor == nil {
		e.decide(pathChannelHead, routeWriter, reasonHeadPage)
		return p, e.onWriter(ctx, channelSession, run)
	}
	if e.cfg.Replica == nil {
		e.decide(pathChannelCursor, routeWriter, e.noReplicaReason())
		return p, e.onWriter(ctx, channelSession, run)
	}
	route, reason, err := e.cfg.Replica.ReadWhy(ctx, r.Cursor.CreatedAt, func(s *replica.Session) error {
		q := s.Querier()
		if err := channelSession.prepare(ctx, q); err != nil {
			return err
		}
		return run(q)
	})
	if err != nil {
		return channelPage{}, fmt.Errorf("replica read: %w", err)
	}
	if route == replica.RouteReplica {
		e.decide(pathChannelCursor, routeReplica, string(reason))
		return p, nil
	}
	e.decide(pathChannelCursor, routeWriter, string(reason))
	return p, e.onWriter(ctx, channelSession, run)
}

// readChannel runs the window's statements on q: rows, then the aux
// closure and the summaries of the delivered rows when asked for.
func readChannel(ctx context.Context, q pg.Querier, sc Scope, r ChannelRequest, maxBytes int) (channelPage, error) {
	sel, err := selectRows(ctx, q, sc, r, maxBytes)
	if err != nil {
		return channelPage{}, err
	}
	p := channelPage{sel: sel, delivered: sel.delivered()}
	if r.IncludeAux && len(p.delivered) > 0 {
		targets := make([]string, 0, len(p.delivered))
		for _, rw := range p.delivered {
			targets = append(targets, rw.ev.ID)
		}
		if p.aux, p.auxCut, err = closeOver(ctx, q, sc.CommunityID, channelAux(sc), channelBudget(maxBytes), targets); err != nil {
			return channelPage{}, err
		}
	}
	if r.IncludeSummaries {
		if p.summaries, err = rowSummaries(ctx, q, sc.CommunityID, p.delivered); err != nil {
			return channelPage{}, err
		}
	}
	return p, nil
}

// assemble orders the answer (rows, aux, summaries, bounds) and signs the
// overlays.
func (e *Engine) assemble(r ChannelRequest, p channelPage) ([]Item, error) {
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
	return &Error{Status: http.StatusInternalServerError, Text: msgInternal}
}

// Aux is the aux closure of the legacy oldest-first thread read
// (docs/NIP-CW.md §6) with include_aux: hop 1 on targets (the root and the
// delivered replies), hop 2 on the hop-1 events it kept, under the rules
// and page limits of a channel window's closure, on the writer. The
// targets themselves are not returned. A cut closure is logged at warn.
func (e *Engine) Aux(ctx context.Context, sc Scope, targets []string) ([]Item, error) {
	var (
		items []Item
		cut   bool
	)
	err := e.onWriter(ctx, channelSession, func(q pg.Querier) error {
		var err error
		items, cut, err = closeOver(ctx, q, sc.CommunityID, channelAux(sc), channelBudget(e.cfg.MaxBytes), targets)
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
