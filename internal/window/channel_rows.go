package window

import (
	"context"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// row is one retained candidate of a window: it holds a slot of the
// limit, whether or not it is delivered.
type row struct {
	// key is the wire form of pos, the row's scan position.
	key Cursor
	pos position
	// ev is the reconstructed event; ok is false for a row that cannot be
	// reconstructed, which is not delivered and not an aux target.
	ev      event.Event
	ok      bool
	channel string
	// The row's thread_metadata counters; zero without a row.
	replyCount, descendantCount int
	lastReplyAt                 *int64
}

// channelSelection is the outcome of a channel window's row walk.
type channelSelection struct {
	rows    []row
	hasMore bool
}

// next is the bounds' next_cursor: the scan position of the last
// retained row when there are more, nil otherwise.
func (s channelSelection) next() *Cursor {
	if !s.hasMore || len(s.rows) == 0 {
		return nil
	}
	c := s.rows[len(s.rows)-1].key
	return &c
}

// delivered returns the rows that are delivered: the reconstructable ones.
func (s channelSelection) delivered() []row {
	out := make([]row, 0, len(s.rows))
	for _, r := range s.rows {
		if r.ok {
			out = append(out, r)
		}
	}
	return out
}

// selectRows walks the channel's top-level rows in keyset order from the
// request cursor. Every predicate applies before a row takes a slot: the
// SQL ones, then the reader's visibility, so the walk asks for further
// chunks (limit+1, doubling up to maxChunk) until limit rows and a
// probe are found or the rows end. The probe sets hasMore and is dropped.
// maxBytes above 0 is a byte budget on the retained rows' JSON: a visible
// row that would take them over it is a probe too, so the page ends
// early with an exact next_cursor (the first row is always retained),
// and no chunk reads rows far past what is left.
func selectRows(ctx context.Context, q pg.Querier, sc Scope, r ChannelRequest, maxBytes int) (channelSelection, error) {
	var sel channelSelection
	pos, err := cursorPosition(r.Cursor)
	if err != nil {
		return channelSelection{}, err
	}
	chunk := r.Limit + 1
	used := 0
	for {
		left := 0
		if maxBytes > 0 {
			left = max(maxBytes-used, 1)
		}
		batch, stopped, err := queryRows(ctx, q, sc.CommunityID, r, pos, chunk, left)
		if err != nil {
			return channelSelection{}, err
		}
		for i := range batch {
			cand := &batch[i]
			pos = &cand.pos
			if !cand.ev.VisibleTo(sc.Reader) {
				continue
			}
			n := cand.ev.JSONSize()
			if len(sel.rows) == r.Limit || (maxBytes > 0 && len(sel.rows) > 0 && used+n > maxBytes) {
				sel.hasMore = true
				return sel, nil
			}
			used += n
			sel.rows = append(sel.rows, *cand)
		}
		if len(batch) < chunk && !stopped {
			return sel, nil
		}
		chunk = min(chunk*2, maxChunk)
	}
}

// queryRows runs one chunk of the row walk: up to n rows strictly after
// pos (from the head when pos is nil). maxBytes above 0 stops the scan
// after the row whose content and tags take the chunk over it (stopped):
// the walk then goes on after that row.
func queryRows(ctx context.Context, q pg.Querier, communityID string, r ChannelRequest, pos *position, n, maxBytes int) (out []row, stopped bool, err error) {
	rows, stopped, err := store.New(q).WindowChannelRows(ctx, store.WindowChannelRowsParams{
		CommunityID: communityID, Channel: r.Channel, After: keyOf(pos), Kinds: r.Kinds, Limit: n, MaxBytes: maxBytes})
	if err != nil {
		return nil, false, err
	}
	out = make([]row, 0, len(rows))
	for i := range rows {
		s := stored{rows[i].WindowEvent}
		ev, bad := s.event()
		rw := row{key: s.cursor(), pos: s.position(), ev: ev, ok: bad == "", channel: s.channelID()}
		if p := rows[i].ReplyCount; p != nil {
			rw.replyCount = *p
		}
		if p := rows[i].DescendantCount; p != nil {
			rw.descendantCount = *p
		}
		if p := rows[i].LastReplyAt; p != nil {
			t := p.Unix()
			rw.lastReplyAt = &t
		}
		out = append(out, rw)
	}
	return out, stopped, nil
}
