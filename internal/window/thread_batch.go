package window

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
)

// batchDeadline bounds a whole batch, from the first authorization read
// to the assembled response (docs/NIP-CW.md §5.2): Config.Deadline's
// default, the relay's.
const batchDeadline = 8 * time.Second

// batch is one Run: who reads where, the budgets every window shares,
// the authorization read at its start, and where its pages were read.
type batch struct {
	e           *Engine
	communityID string
	host        string
	reader      string
	log         *slog.Logger
	spend       *budget
	// a is the accessible set A; accessibleList is the same, sorted, for
	// the aux scans.
	a              access
	accessibleList []string
	// doubt is the reason of the first replica doubt, "" before it: from
	// then on every page of the batch reads from the writer.
	doubt string
	// routes counts the pages read per route, for the batch's log line.
	routes map[string]int
}

// thread is one window of a batch being built.
type thread struct {
	b *batch
	r ThreadRequest
}

// built is a served window, kept in memory until the batch is signed.
type built struct {
	r   ThreadRequest
	sel replySelection
	aux []Item
}

// serve is docs/NIP-CW.md §5.3: A from the writer, each window in request
// order, A' from the writer and the comparison, then the signing and assembly.
func (b *batch) serve(ctx context.Context, windows []ThreadRequest) ([]Item, []int, int, error) {
	if len(windows) > maxWindows {
		return nil, nil, 0, badRequest(msgTooManyWindows)
	}
	a, err := b.e.accessible(ctx, b.communityID, b.reader)
	if err != nil {
		return nil, nil, 0, err
	}
	b.a, b.accessibleList = a, a.list()
	var served []built
	for _, r := range windows {
		if !a.has(r.Channel) {
			continue
		}
		w := &thread{b: b, r: r}
		out, ok, err := w.build(ctx)
		if err != nil {
			return nil, nil, len(served), err
		}
		if ok {
			served = append(served, out)
		}
	}
	again, err := b.e.accessible(ctx, b.communityID, b.reader)
	if err != nil {
		return nil, nil, len(served), err
	}
	if !maps.Equal(a, again) {
		f := unavailable(msgAuthChanged)
		f.authChanged = true
		return nil, nil, len(served), f
	}
	items, sizes, err := b.assemble(served)
	return items, sizes, len(served), err
}

// full runs a window from its root check to its closure in the window
// transaction q. ok is false when the root check fails: the window
// contributes nothing.
func (w *thread) full(ctx context.Context, q pg.Querier) (out built, ok bool, err error) {
	found, err := rootExists(ctx, q, w.b.communityID, w.r)
	if err != nil || !found {
		return out, false, err
	}
	out, err = w.rowsAndAux(ctx, q)
	return out, err == nil, err
}

// rowsAndAux is a window past its root check: the selection, then the
// closure when the request asks for aux.
func (w *thread) rowsAndAux(ctx context.Context, q pg.Querier) (built, error) {
	out := built{r: w.r}
	if err := w.b.spend.respond(2); err != nil {
		return out, err
	}
	sel, err := w.selectReplies(ctx, q)
	if err != nil {
		return out, err
	}
	out.sel = sel
	if w.r.IncludeAux {
		out.aux, err = w.closure(ctx, q, hop1Targets(w.r, sel))
	}
	return out, err
}

// hop1Targets are the root and every delivered reply.
func hop1Targets(r ThreadRequest, sel replySelection) []string {
	targets := make([]string, 0, 1+len(sel.rows))
	targets = append(targets, r.Root)
	for _, it := range sel.rows {
		targets = append(targets, it.Event.ID)
	}
	return targets
}

// onWriterFull runs the whole window in a writer transaction.
func (w *thread) onWriterFull(ctx context.Context) (out built, ok bool, err error) {
	w.b.routes[routeWriter]++
	err = w.b.e.onWriter(ctx, threadSession, func(q pg.Querier) error {
		out, ok, err = w.full(ctx, q)
		return err
	})
	return out, ok, err
}

// assemble signs one 39007 per served window and lays out the answer:
// per window its rows, its aux, its bounds. sizes are the response bytes
// of each window.
func (b *batch) assemble(served []built) ([]Item, []int, error) {
	now := time.Now().Unix()
	var items []Item
	sizes := make([]int, 0, len(served))
	for _, out := range served {
		bounds, err := b.bounds(out, now)
		if err != nil {
			return nil, nil, err
		}
		if err := b.spend.respond(len(bounds.JSON) + 1); err != nil {
			return nil, nil, err
		}
		size := 2
		for _, part := range [][]Item{out.sel.rows, out.aux, {bounds}} {
			for _, it := range part {
				size += len(it.JSON) + 1
			}
			items = append(items, part...)
		}
		sizes = append(sizes, size)
	}
	return items, sizes, nil
}
