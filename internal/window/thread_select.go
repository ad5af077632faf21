package window

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// replySelection is a thread window's reply page: the delivered rows in keyset
// order and the page's bounds.
type replySelection struct {
	rows    []Item
	hasMore bool
	// next is the scan position of the last retained row when hasMore.
	next *Cursor
}

// rootExists is the root check of docs/NIP-CW.md §5.3 in the window's
// transaction.
func rootExists(ctx context.Context, q pg.Querier, communityID string, r ThreadRequest) (bool, error) {
	return store.New(q).WindowThreadRootExists(ctx, communityID, r.Channel, hexBytes(r.Root))
}

// selectReplies is docs/NIP-CW.md §5.3: the scan charges each eligible row
// before it is retained (the probe too), the load fetches only the retained
// rows, and every delivered row passes the gates again.
func (w *thread) selectReplies(ctx context.Context, q pg.Querier) (replySelection, error) {
	var sel replySelection
	keys, hasMore, err := w.scan(ctx, q)
	if err != nil {
		return sel, err
	}
	sel.hasMore = hasMore
	if hasMore {
		last := keys[len(keys)-1]
		sel.next = &last
	}
	ps := make([]position, len(keys))
	for i, k := range keys {
		ps[i] = position{at: unixTime(k.CreatedAt), id: hexBytes(k.ID)}
	}
	loaded, err := load(ctx, q, w.b.communityID, ps)
	if err != nil {
		return sel, fmt.Errorf("load replies: %w", err)
	}
	for _, k := range keys {
		bad := "row gone at load"
		var it Item
		if s, ok := loaded[k.ID]; ok {
			var ev event.Event
			if ev, bad = s.event(); bad == "" {
				it = item(ev, s.channelID())
			}
		}
		if bad != "" {
			w.b.log.Warn("thread window reply skipped: not reconstructable", "event_id", k.ID, "why", bad)
			continue // keeps its slot: it may still be next_cursor
		}
		if !w.b.a.has(it.Channel) || !it.Event.VisibleTo(w.b.reader) {
			return sel, unavailable(msgRowAuthChanged)
		}
		if err := w.b.spend.keep(it.JSON); err != nil {
			return sel, err
		}
		sel.rows = append(sel.rows, it)
	}
	return sel, nil
}

// scan walks the window's metadata keys in chunks from the request cursor:
// limit+1 rows first, then doubling to maxChunk, each chunk after the last
// key scanned. It returns the retained keys and whether a probe row
// exists past them.
func (w *thread) scan(ctx context.Context, q pg.Querier) (keys []Cursor, hasMore bool, err error) {
	r := w.r
	pos := r.Cursor
	chunk := r.Limit + 1
	for {
		n, probe, err := w.scanChunk(ctx, q, &pos, chunk, &keys)
		if err != nil || probe {
			return keys, probe, err
		}
		if n < chunk {
			return keys, false, nil
		}
		chunk = min(2*chunk, maxChunk)
	}
}

// scanChunk runs one chunk of the scan from *pos and moves *pos to the
// last key it scanned. n is the number of rows the chunk returned; probe
// is true when it met an eligible row with limit rows already retained.
func (w *thread) scanChunk(ctx context.Context, q pg.Querier, pos **Cursor, chunk int, keys *[]Cursor) (n int, probe bool, err error) {
	err = store.New(q).WindowThreadScan(ctx, scanParams(w.b.communityID, w.r, *pos, chunk), func(r store.WindowScanRow) (bool, error) {
		n++
		key := Cursor{CreatedAt: r.Key.At.Unix(), ID: hex.EncodeToString(r.Key.ID)}
		*pos = &key
		if !r.Eligible {
			return true, nil
		}
		var size int64
		if r.Payload != nil {
			size = *r.Payload
		}
		if err := w.b.spend.row(size); err != nil {
			return false, err
		}
		if len(*keys) == w.r.Limit {
			probe = true
			return false, nil
		}
		*keys = append(*keys, key)
		return true, nil
	})
	return n, probe, err
}
