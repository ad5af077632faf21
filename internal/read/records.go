package read

import (
	"context"
	"errors"
	"fmt"

	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// errTooManyRecords stops a records read past its maximum.
var errTooManyRecords = errors.New("too many records")

// Records executes a NEG read (SurfaceNEG, docs/PROTOCOL.md §7.13): every
// stored event its filters match that a REQ with the same filters could
// return to the reader (the same scope, gates and post-filter), with no
// limit, handed to each as its created_at and id, an id once, in no
// order. More than maximum refuses the read (CodeNegTooManyRecords)
// before more than maximum+1 rows of a filter are fetched; each has been
// handed at most maximum records then, and the caller drops them. A
// filter whose every constraint is exact in SQL reads two columns; any
// other also reads the tags, kind and pubkey its post-filter needs.
func (r *Read) Records(ctx context.Context, maximum int, each func(createdAt int64, id [32]byte)) error {
	dctx, cancel := withDeadline(ctx, r.deadline)
	defer cancel()
	return r.finish(ctx, r.records(dctx, maximum, each))
}

func (r *Read) records(ctx context.Context, maximum int, each func(int64, [32]byte)) error {
	var seen map[[32]byte]struct{}
	if len(r.req.Filters) > 1 {
		seen = make(map[[32]byte]struct{})
	}
	n := 0
	for i := range r.req.Filters {
		f := &r.req.Filters[i]
		if f.MatchesNothing() {
			continue
		}
		chans, named := r.channelScope(f)
		if named && len(chans) == 0 {
			continue
		}
		p := r.e.params(r.req.Scope, r.acc, f, chans, named)
		p.Limit = maximum + 1
		exact := fastPath(r.req.Scope, f)
		if hook := r.e.cfg.QueryHookFunc; hook != nil {
			if err := hook(ctx, f); err != nil {
				return err
			}
		}
		fetched := 0
		err := r.e.store.EventRecords(ctx, p, !exact, func(rec *store.EventRecord) error {
			if fetched++; fetched > maximum {
				return errTooManyRecords
			}
			if !exact && !visible(r.req.Scope, r.acc, f, &rec.Stored.Event, rec.Stored.Channel) {
				return nil
			}
			if seen != nil {
				if _, dup := seen[rec.ID]; dup {
					return nil
				}
				seen[rec.ID] = struct{}{}
			}
			if n++; n > maximum {
				return errTooManyRecords
			}
			each(rec.CreatedAt, rec.ID)
			return nil
		})
		if errors.Is(err, errTooManyRecords) {
			return &Refusal{Code: CodeNegTooManyRecords, Reason: wire.NegTooManyRecords(maximum)}
		}
		if err != nil {
			return fmt.Errorf("records filter %d: %w", i, err)
		}
	}
	return nil
}
