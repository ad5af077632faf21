package window_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/window"
)

// TestAuxClosure covers docs/NIP-CW.md §3.3 on stored rows: which aux events
// the closure of a page returns, in which order, and the positional target
// rule of docs/NIP-CW.md §2 (lookalike tags that a JSONB containment test
// matches are not targets).
func TestChannelAuxClosure(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	ts := unixNow() - 300
	other := fixture.Channel(t, w.pool, w.cid, w.author, fixture.Private())
	elsewhere := fixture.Community(t, w.pool).ID
	elsewhereCh := fixture.Channel(t, w.pool, elsewhere, w.author)

	sentinel := w.at(t, ts+1)
	r2 := w.at(t, ts+2)
	r1 := w.at(t, ts+3)
	aux := func(kind int, at int64, opts ...eventtest.Option) event.Event {
		return fixture.Event(t, w.pool, w.cid, w.author, kind, append([]eventtest.Option{eventtest.At(at), eventtest.Content("+")}, opts...)...)
	}
	inCh := eventtest.Channel(w.ch)

	// Hop 1, returned.
	react := aux(7, ts+50, inCh, eventtest.Tag("e", r1.ID))
	edit := aux(40003, ts+49, inCh, eventtest.Tag("e", r2.ID))
	channelless := aux(5, ts+48, eventtest.Tag("e", r2.ID))
	both := aux(9005, ts+47, inCh, eventtest.Tag("e", r1.ID), eventtest.Tag("e", react.ID))
	// Hop 2 on a delivered hop-1 event, returned.
	hop2 := aux(5, ts+46, inCh, eventtest.Tag("e", react.ID))

	// Not returned.
	aux(7, ts+60, inCh, eventtest.Tag("e", sentinel.ID))                     // targets the sentinel
	aux(7, ts+61, inCh, eventtest.Tag("e", strings.Repeat("0f", 32), r1.ID)) // ["e",B,X] targets B only
	aux(7, ts+62, inCh, eventtest.Tag("x", "e", r1.ID))                      // ["x","e",X]
	aux(7, ts+59, inCh, eventtest.Tag("x", r1.ID, "e"))                      // X second, but not under "e"
	aux(7, ts+63, inCh, eventtest.Tag("E", r1.ID))                           // not "e"
	aux(7, ts+64, eventtest.Channel(other), eventtest.Tag("e", r1.ID))       // inaccessible channel
	aux(1, ts+65, eventtest.Tag("e", r1.ID))                                 // not an aux kind
	aux(7, ts+66, inCh, eventtest.Tag("e", react.ID))                        // hop 2 takes only 5 and 9005
	aux(40003, ts+67, inCh, eventtest.Tag("e", channelless.ID))              // the same
	gone := aux(7, ts+68, inCh, eventtest.Tag("e", r1.ID))                   // deleted below
	aux(5, ts+69, inCh, eventtest.Tag("e", gone.ID))                         // targets an aux event that was not delivered
	fixture.Event(t, w.pool, elsewhere, w.author, 7, eventtest.At(ts+70), eventtest.Channel(elsewhereCh), eventtest.Tag("e", r1.ID))
	w.exec(t, `UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2`, w.cid, unhex(t, gone.ID))

	r := window.ChannelRequest{Channel: w.ch, Limit: 2, Kinds: []int{9}, IncludeAux: true}
	evs, _ := split(t, w.window(t, w.scope(w.ch), r))
	require.Equal(t, []string{r1.ID, r2.ID, react.ID, edit.ID, channelless.ID, both.ID, hop2.ID}, evIDs(evs))

	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		r := r
		r.IncludeAux = false
		evs, _ := split(t, w.window(t, w.scope(w.ch), r))
		require.Equal(t, []string{r1.ID, r2.ID}, evIDs(evs))
	})

	t.Run("NoRowsNoAux", func(t *testing.T) {
		t.Parallel()
		r := r
		r.Kinds = []int{45001}
		evs, _ := split(t, w.window(t, w.scope(w.ch), r))
		require.Empty(t, evs)
	})

	t.Run("AccessibleChannelAux", func(t *testing.T) {
		t.Parallel()
		evs, _ := split(t, w.window(t, w.scope(w.ch, other), r))
		require.Len(t, evs, 8, "the reaction in the other channel joins once it is accessible")
	})
}

// TestAuxPageCut covers docs/NIP-CW.md §3.3's bound: pages of 1,000 aux
// events, at most 64 pages per hop; past that the closure is cut, logged at
// warn and counted, and the page is still served. Hop 1 drains 12,801
// reactions to one row in 13 pages; hop 2 then has 65 batches of 200 targets,
// one page each, and the 65th is cut.
func TestAuxPageCut(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	root := w.at(t, unixNow()-600)
	const reactions = 64*200 + 1
	// Reactions a millisecond apart: the page cursor must carry sub-second
	// positions exactly. Reaction i has id sha256("cut<i>"), i = 1 newest.
	w.exec(t, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
		SELECT $1, sha256(convert_to('cut' || i, 'UTF8')), $2, now() - i * interval '1 millisecond', 7,
		       jsonb_build_array(jsonb_build_array('e', $3::text), jsonb_build_array('h', $4::text)), '+',
		       sha512(convert_to('sig' || i, 'UTF8')), $4::uuid
		FROM generate_series(1, $5::int) AS i`, w.cid, unhex(t, w.author.PubKey), root.ID, w.ch, reactions)
	reactionID := func(i int) string {
		sum := sha256.Sum256([]byte("cut" + strconv.Itoa(i)))
		return hex.EncodeToString(sum[:])
	}
	kept := fixture.Event(t, w.pool, w.cid, w.author, 5, eventtest.Channel(w.ch), eventtest.Tag("e", reactionID(1)))
	fixture.Event(t, w.pool, w.cid, w.author, 5, eventtest.Channel(w.ch), eventtest.Tag("e", reactionID(reactions)))

	items, err := w.engine.Channel(context.Background(), w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeAux: true})
	require.NoError(t, err)
	require.Len(t, items, 1+reactions+1+1, "the row, every reaction, one hop-2 deletion, the bounds")
	require.Equal(t, root.ID, items[0].Event.ID)
	seen := map[string]struct{}{}
	for _, it := range items[1 : 1+reactions] {
		require.Equal(t, 7, it.Event.Kind)
		seen[it.Event.ID] = struct{}{}
	}
	require.Len(t, seen, reactions, "each aux event once")
	require.Equal(t, reactionID(1), items[1].Event.ID)
	require.Equal(t, reactionID(reactions), items[reactions].Event.ID)
	require.Equal(t, kept.ID, items[1+reactions].Event.ID, "the deletion in hop 2's first batch is kept, the one in its 65th is cut")
	require.Equal(t, 39006, items[len(items)-1].Event.Kind)
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.Window.AuxTruncated))
	require.Contains(t, w.log.String(), `"level":"WARN","msg":"channel window aux closure cut at its page or byte limit"`)
}

// TestAuxCorrupt covers docs/NIP-CW.md §8's corrupt live aux row: a matched
// aux event that cannot be reconstructed fails the window with 500 and the
// fixed text, counted internal, the detail only in the log.
func TestAuxCorrupt(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	row := w.at(t, unixNow()-60)
	bad := w.author.Signed(t, 7, eventtest.Channel(w.ch), eventtest.At(unixNow()-30))
	w.rawRow(t, bad, &w.ch, `[["e","`+row.ID+`"],["n",1]]`)

	r := window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeAux: true}
	_, err := w.engine.Channel(context.Background(), w.scope(), r)
	var ce *window.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, &window.Error{Status: 500, Text: "internal server error"}, ce)
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.Window.Requests.WithLabelValues("channel", "internal")))
	require.Contains(t, w.log.String(), "aux event cannot be reconstructed: "+bad.ID)

	r.IncludeAux = false
	evs, _ := split(t, w.window(t, w.scope(), r))
	require.Equal(t, []string{row.ID}, evIDs(evs), "without aux the page is served")
	require.Equal(t, 1.0, testutil.ToFloat64(w.m.Window.Requests.WithLabelValues("channel", "ok")))
}
