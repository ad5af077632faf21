package window

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/buzz-relay/buzz/internal/event"
)

// The overlay kinds of channel mode: synthesized per request, signed with
// the relay key, never stored.
const (
	kindThreadSummary = 39005
	kindWindowBounds  = 39006
)

// overlay signs one overlay event created now.
func (e *Engine) overlay(kind int, tags [][]string, content string, now int64) (Item, error) {
	ev := event.Event{CreatedAt: now, Kind: kind, Content: content, Tags: make(event.Tags, len(tags))}
	for i, t := range tags {
		ev.Tags[i] = t
	}
	if err := ev.Sign(e.cfg.Key); err != nil {
		return Item{}, fmt.Errorf("sign kind %d overlay: %w", kind, err)
	}
	return item(ev, ""), nil
}

// cursorJSON is a next_cursor of the bounds content.
type cursorJSON struct {
	CreatedAt int64  `json:"created_at"`
	ID        string `json:"id"`
}

// channelBoundsContent is the content of a 39006. Key order is not part of the
// contract.
type channelBoundsContent struct {
	HasMore    bool        `json:"has_more"`
	NextCursor *cursorJSON `json:"next_cursor"`
}

// boundsD is the bounds' d tag: the channel and the request cursor,
// "head" for a head request.
func boundsD(r ChannelRequest) string {
	if r.Cursor == nil {
		return r.Channel + ":head"
	}
	return r.Channel + ":" + strconv.FormatInt(r.Cursor.CreatedAt, 10) + ":" + r.Cursor.ID
}

// signBounds signs the one 39006 of a served window (docs/NIP-CW.md §3.5).
func (e *Engine) signBounds(r ChannelRequest, sel channelSelection, now int64) (Item, error) {
	c := channelBoundsContent{HasMore: sel.hasMore}
	if next := sel.next(); next != nil {
		c.NextCursor = &cursorJSON{CreatedAt: next.CreatedAt, ID: next.ID}
	}
	content, err := json.Marshal(c)
	if err != nil {
		return Item{}, fmt.Errorf("encode window bounds: %w", err)
	}
	return e.overlay(kindWindowBounds, [][]string{{"d", boundsD(r)}, {"h", r.Channel}}, string(content), now)
}
