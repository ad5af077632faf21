package window

import (
	"context"
	"errors"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/replica"
)

// The paths and the reason of buzz_db_route_decision that thread mode
// adds.
const (
	pathThreadHead    = "thread_window_head"
	pathThreadCursor  = "thread_window_cursor"
	reasonMissingRoot = "missing_root"
)

// errMissingRoot makes a replica read a doubt: the root is not in the
// replica's snapshot (docs/NIP-CW.md §7).
var errMissingRoot = errors.New("thread root missing on the replica")

// stage is how far a window got in a replica session.
type stage int

const (
	stageRoot   stage = iota // the root check, or nothing yet
	stageSelect              // past the root check
	stageAux                 // past the selection, in the closure
)

// build serves one window of an accessible channel (docs/NIP-CW.md §7): a head
// page on the writer; a cursor page on the replica when one is configured, the
// batch has had no doubt and the replica proves the page, else on the writer.
// ok is false when the root check fails.
func (w *thread) build(ctx context.Context) (built, bool, error) {
	b := w.b
	rep := b.e.cfg.Replica
	switch {
	case w.r.Cursor == nil:
		b.decide(pathThreadHead, routeWriter, reasonHeadPage)
		return w.onWriterFull(ctx)
	case rep == nil:
		b.decide(pathThreadCursor, routeWriter, b.e.noReplicaReason())
		return w.onWriterFull(ctx)
	case b.doubt != "":
		b.decide(pathThreadCursor, routeWriter, b.doubt)
		return w.onWriterFull(ctx)
	}
	var (
		out     built
		ok      bool
		reached stage
		missing bool
		fatal   error
	)
	route, reason, err := rep.ReadWhy(ctx, w.r.Cursor.CreatedAt, func(s *replica.Session) error {
		out, ok, reached, missing, fatal = built{}, false, stageRoot, false, nil
		q := s.Querier()
		if err := threadSession.prepare(ctx, q); err != nil {
			return err
		}
		found, err := rootExists(ctx, q, b.communityID, w.r)
		if err != nil {
			return err
		}
		if !found {
			missing = true
			return errMissingRoot
		}
		reached = stageSelect
		out = built{r: w.r}
		if err := b.spend.respond(2); err != nil {
			fatal = err
			return nil
		}
		if out.sel, err = w.selectReplies(ctx, q); err != nil {
			return decided(err, &fatal)
		}
		if w.r.IncludeAux {
			reached = stageAux
			if out.aux, err = w.closure(ctx, q, hop1Targets(w.r, out.sel)); err != nil {
				return decided(err, &fatal)
			}
		}
		ok = true
		return nil
	})
	switch {
	case err != nil:
		return built{}, false, err
	case fatal != nil:
		b.decide(pathThreadCursor, routeReplica, string(reason))
		return built{}, false, fatal
	case route == replica.RouteReplica:
		b.decide(pathThreadCursor, routeReplica, string(reason))
		b.routes[routeReplica]++
		return out, ok, nil
	case route == replica.RouteWriter:
		b.decide(pathThreadCursor, routeWriter, string(reason))
		return w.onWriterFull(ctx)
	}
	// A doubt: the rest of the batch reads from the writer.
	b.doubt = string(reason)
	if missing {
		b.doubt = reasonMissingRoot
	}
	b.decide(pathThreadCursor, routeWriter, b.doubt)
	if reached == stageAux {
		// Selection was done in the proved snapshot; the closure starts
		// again from the same targets, its aux so far discarded.
		b.routes[routeWriter]++
		err := b.e.onWriter(ctx, threadSession, func(q pg.Querier) error {
			var err error
			out.aux, err = w.closure(ctx, q, hop1Targets(w.r, out.sel))
			return err
		})
		return out, err == nil, err
	}
	return w.onWriterFull(ctx)
}

// decided keeps a decided failure (a budget, a gate, a corrupt row) in
// *fatal and returns nil, so the replica does not take it for a doubt;
// any other error is returned as the doubt it is.
func decided(err error, fatal *error) error {
	if isFailure(err) {
		*fatal = err
		return nil
	}
	return err
}
