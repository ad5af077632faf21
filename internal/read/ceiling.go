package read

import (
	"context"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// ceilingMargin is how far past the drift rule the ceiling looks: relays of
// one database whose clocks disagree by less than this see each other's
// newest events (docs/ARCHITECTURE.md "Created-at ceiling").
const ceilingMargin = 24 * time.Hour

// ceiling is the created_at above which no stored event lies: the real
// clock plus the drift every door allows plus ceilingMargin, or the newest
// row LoadCeiling found above that, whichever is later. It follows the
// wall clock, not Config.NowFunc (the access cache's clock), because the
// doors judged created_at on the wall clock.
func (e *Engine) ceiling() time.Time {
	c := time.Now().Add(event.MaxClockDrift + ceilingMargin).Unix()
	if f := e.future.Load(); f > c {
		c = f
	}
	return time.Unix(c, 0)
}

// LoadCeiling looks once for rows stored above the ceiling (an import made
// before the importer refused events from the future, or a clock that has
// moved back since) and keeps the newest, so that plain reads still see
// them. The app calls it at start, before serving.
func (e *Engine) LoadCeiling(ctx context.Context) error {
	if e.store == nil {
		return nil
	}
	newest, err := e.store.FutureRows(ctx, e.ceiling())
	if err != nil {
		return err
	}
	if !newest.IsZero() {
		e.future.Store(newest.Unix())
		e.cfg.Logger.Warn("stored events are dated after the read ceiling; plain reads look up to the newest of them",
			slog.Time("newest", newest.UTC()))
	}
	return nil
}
