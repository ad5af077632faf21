package window

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// access is a reader's accessible channel set, read once before the
// windows are built (A) and once after (A').
type access map[string]struct{}

func (a access) has(channel string) bool { _, ok := a[channel]; return ok }

// list returns the channels sorted, for the aux scan's parameter.
func (a access) list() []string { return slices.Sorted(maps.Keys(a)) }

// accessible reads the reader's accessible channels from the writer by
// the store's one rule, uncached, on a connection taken within the pool's
// acquire timeout.
func (e *Engine) accessible(ctx context.Context, communityID, reader string) (access, error) {
	conn, err := pg.Acquire(ctx, e.cfg.Pool, 0)
	if err != nil {
		return nil, fmt.Errorf("accessible channels: %w", err)
	}
	defer conn.Release()
	ids, err := store.New(conn).AccessibleChannels(ctx, communityID, reader)
	if err != nil {
		return nil, err
	}
	a := make(access, len(ids))
	for _, id := range ids {
		a[id] = struct{}{}
	}
	return a, nil
}
