package window_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/window"
)

// nextCursor decodes a bounds content: has_more and next_cursor.
func nextCursor(t *testing.T, content string) (bool, *window.Cursor) {
	t.Helper()
	var c struct {
		HasMore bool `json:"has_more"`
		Next    *struct {
			CreatedAt int64  `json:"created_at"`
			ID        string `json:"id"`
		} `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(content), &c))
	if c.Next == nil {
		return c.HasMore, nil
	}
	return c.HasMore, &window.Cursor{CreatedAt: c.Next.CreatedAt, ID: c.Next.ID}
}

// TestRowWalk covers docs/NIP-CW.md §2's probe and reconstruction rules on
// rows no client could submit: every predicate (reader visibility included)
// runs before a row takes a slot, and an unreconstructable row keeps its slot
// and may be next_cursor.
func TestRowWalk(t *testing.T) {
	t.Parallel()

	t.Run("UnreconstructableKeepsItsSlot", func(t *testing.T) {
		t.Parallel()
		w := newChannelWorld(t)
		ts := unixNow() - 60
		a := w.at(t, ts+3)
		bad := w.author.Signed(t, 9, eventtest.Channel(w.ch), eventtest.At(ts+2))
		w.rawRow(t, bad, &w.ch, `{"not":"an array"}`)
		c := w.at(t, ts+1)

		rows, b := split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 2}))
		require.Equal(t, []string{a.ID}, evIDs(rows))
		more, next := nextCursor(t, b)
		require.True(t, more)
		require.Equal(t, &window.Cursor{CreatedAt: bad.CreatedAt, ID: bad.ID}, next)

		rows, b = split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 2, Cursor: next}))
		require.Equal(t, []string{c.ID}, evIDs(rows))
		more, next = nextCursor(t, b)
		require.False(t, more)
		require.Nil(t, next)

		// Tags with a non-string value do not form an event either.
		w2 := newChannelWorld(t)
		odd := w2.author.Signed(t, 9, eventtest.Channel(w2.ch), eventtest.At(ts))
		w2.rawRow(t, odd, &w2.ch, `[["h","`+w2.ch+`"],["n",1]]`)
		rows, b = split(t, w2.window(t, w2.scope(), window.ChannelRequest{Channel: w2.ch, Limit: 1}))
		require.Empty(t, rows)
		more, next = nextCursor(t, b)
		require.False(t, more)
		require.Nil(t, next)
	})

	t.Run("VisibilityBeforeTheProbe", func(t *testing.T) {
		t.Parallel()
		w := newChannelWorld(t)
		ts := unixNow() - 60
		stranger := eventtest.NewKey()
		a := w.at(t, ts+20)
		// Rows the reader may not see, more than one statement's worth:
		// another author's author-only rows and result-gated rows naming
		// someone else.
		for i := range 5 {
			fixture.Event(t, w.pool, w.cid, stranger, 30300, eventtest.Channel(w.ch), eventtest.Tag("d", "x"+string(rune('a'+i))), eventtest.At(ts+19-int64(i)))
		}
		fixture.Event(t, w.pool, w.cid, stranger, 30622, eventtest.Channel(w.ch), eventtest.Tag("d", "g"), eventtest.Tag("p", stranger.PubKey), eventtest.At(ts+14))
		// The same kinds the reader may see.
		own := fixture.Event(t, w.pool, w.cid, w.reader, 30300, eventtest.Channel(w.ch), eventtest.Tag("d", "mine"), eventtest.At(ts+13))
		named := fixture.Event(t, w.pool, w.cid, stranger, 30622, eventtest.Channel(w.ch), eventtest.Tag("d", "n"), eventtest.Tag("p", w.reader.PubKey), eventtest.At(ts+12))
		c := w.at(t, ts+11)
		// A hidden row after the last visible one is no probe either.
		fixture.Event(t, w.pool, w.cid, stranger, 30300, eventtest.Channel(w.ch), eventtest.Tag("d", "last"), eventtest.At(ts+10))

		rows, b := split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 1}))
		require.Equal(t, []string{a.ID}, evIDs(rows))
		more, next := nextCursor(t, b)
		require.True(t, more)
		require.Equal(t, &window.Cursor{CreatedAt: a.CreatedAt, ID: a.ID}, next)

		rows, b = split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 3, Cursor: next}))
		require.Equal(t, []string{own.ID, named.ID, c.ID}, evIDs(rows))
		more, next = nextCursor(t, b)
		require.False(t, more, "the hidden rows are no probe")
		require.Nil(t, next)
	})

	t.Run("KindsRestrictRows", func(t *testing.T) {
		t.Parallel()
		w := newChannelWorld(t)
		ts := unixNow() - 60
		a := w.at(t, ts+3)
		v2 := fixture.Event(t, w.pool, w.cid, w.author, 40002, eventtest.Channel(w.ch), eventtest.At(ts+2))
		b := w.at(t, ts+1)
		rows, bd := split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 1, Kinds: []int{9}}))
		require.Equal(t, []string{a.ID}, evIDs(rows))
		_, next := nextCursor(t, bd)
		rows, _ = split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{9}, Cursor: next}))
		require.Equal(t, []string{b.ID}, evIDs(rows))
		rows, _ = split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{40002}}))
		require.Equal(t, []string{v2.ID}, evIDs(rows))
		rows, _ = split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{}}))
		require.Empty(t, rows)
	})
}
