package window

import (
	"context"
	"errors"

	"github.com/buzz-relay/buzz/internal/pg"
)

// closure is a thread window's aux closure (docs/NIP-CW.md §5.3) in the
// window transaction q, from the hop-1 targets (the root and the
// delivered replies): deleted aux events are scanned and charged, and hop
// 2 targets every id hop 1 met; only the reader's accessible channels
// and channel-less deletions are read. Every page, row and kept event is
// charged to the batch's budget, so the closure is complete or the batch
// fails; a corrupt aux event is the batch's 500.
func (w *thread) closure(ctx context.Context, q pg.Querier, targets []string) ([]Item, error) {
	b := w.b
	rules := auxRules{reader: b.reader, channels: b.accessibleList, accessible: b.a.has,
		channelless: hop2Kinds, tombstones: true}
	items, _, err := closeOver(ctx, q, b.communityID, rules, b.spend, targets)
	if errors.Is(err, errCorruptAux) {
		return nil, corrupt(err)
	}
	return items, err
}
