package window

import (
	"fmt"

	"github.com/buzz-relay/buzz/internal/event"
)

// kindThreadBounds is the relay-signed bounds event of a thread window.
const kindThreadBounds = 39007

// bounds signs a window's 39007 (docs/NIP-CW.md §5.4): tags d, h, e in that
// order, the page's has_more and next_cursor in its content.
func (b *batch) bounds(out built, now int64) (Item, error) {
	ev := event.Event{
		CreatedAt: now,
		Kind:      kindThreadBounds,
		Tags: event.Tags{
			{"d", Binding(b.host, b.reader, out.r)},
			{"h", out.r.Channel},
			{"e", out.r.Root},
		},
		Content: threadBoundsContent(out.sel.hasMore, out.sel.next),
	}
	if err := ev.Sign(b.e.cfg.Key); err != nil {
		return Item{}, fmt.Errorf("sign thread bounds: %w", err)
	}
	return Item{Event: ev, JSON: ev.AppendJSON(nil)}, nil
}
