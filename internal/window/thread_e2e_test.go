package window_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/window"
)

// 51 depth-1 replies, limit 50: replies 50..1 newest first, ties
// by id ascending, one 39007 whose next_cursor is the 50th row; the
// continuation has reply 0 and next_cursor null. The 39007 half:
// every bounds event verifies against NIP-11 self.
func TestPagesNewestFirst(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	var replies []event.Event
	for i := range 51 {
		// Reply 0 has a second of its own; the others share seconds by three.
		replies = append(replies, w.reply(t, ch, root, root, base+1+int64((i+2)/3), fmt.Sprintf("reply %d", i)))
	}
	// A depth-2 reply is a row too, but not below depth_limit 1.
	deep := w.reply(t, ch, root, replies[0], base+100, "deep")
	want := newestFirst(replies)

	r := req(ch, root)
	r.Depth = 1
	pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, ids(want[:50]), ids(pages[0].rows))
	require.True(t, pages[0].hasMore)
	require.Equal(t, &window.Cursor{CreatedAt: want[49].CreatedAt, ID: want[49].ID}, pages[0].next)
	require.Empty(t, pages[0].aux)

	r.Cursor = pages[0].next
	pages = w.windows(t, w.query(t, reader, filter(r)), reader, r)
	require.Equal(t, ids(want[50:]), ids(pages[0].rows))
	require.Equal(t, replies[0].ID, pages[0].rows[0].ID)
	require.False(t, pages[0].hasMore)
	require.Nil(t, pages[0].next)

	// Two head pages and a cursor page so far, each on the writer.
	require.Equal(t, 2.0, w.r.Metric(t, `buzz_window_requests_total{mode="thread",outcome="ok"}`))
	require.Equal(t, 2.0, w.r.Metric(t, `buzz_thread_window_response_bytes_count`))
	require.Equal(t, 1.0, w.r.Metric(t, `buzz_db_route_decision{path="thread_window_head",reason="head_page",route="writer"}`))
	require.Equal(t, 1.0, w.r.Metric(t, `buzz_db_route_decision{path="thread_window_cursor",reason="not_configured",route="writer"}`))

	t.Run("DepthTwo", func(t *testing.T) {
		r := req(ch, root)
		r.Depth, r.Limit = 2, 1
		pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
		require.Equal(t, []string{deep.ID}, ids(pages[0].rows))
	})
	t.Run("KindsRestrictRows", func(t *testing.T) {
		r := req(ch, root)
		r.Kinds = []int{40002}
		pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
		require.Empty(t, pages[0].rows)
		require.False(t, pages[0].hasMore)
	})
}

// Without BUZZ_RELAY_PRIVATE_KEY: NIP-11 has no self, and the
// bounds still carry valid signatures, all by the boot-time key.
func TestBoundsWithBootKey(t *testing.T) {
	t.Parallel()
	w := start(t, false)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	w.reply(t, ch, root, root, base+1, "reply")
	r := req(ch, root)
	first := w.windows(t, w.query(t, reader, filter(r)), reader, r)
	again := w.windows(t, w.query(t, reader, filter(r), filter(r)), reader, r, r)
	for _, p := range again {
		require.Equal(t, first[0].bounds.PubKey, p.bounds.PubKey)
	}
	require.Equal(t, event.PubKey(w.r.App.RelayKey()), first[0].bounds.PubKey)
}

// A root that is missing, in another channel, in another
// community under the same channel UUID, a 40008 with replies or a
// private 30300 yields [] without bounds, with or without include_aux.
// A deleted root with live replies is served.
func TestRootCheck(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch, other := w.channel(t), w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	w.reply(t, ch, root, root, base+1, "live reply")

	// Another community holding a channel with the same UUID and a root
	// with a reply.
	host := w.r.Community(t, "elsewhere")
	elsewhere, err := w.r.App.Store().CommunityByHost(t.Context(), host)
	require.NoError(t, err)
	_, err = w.pool.Exec(t.Context(), `INSERT INTO channels (id, community_id, name, created_by) VALUES ($1, $2, 'twin', $3)`,
		ch, elsewhere.ID, hexBytes(w.owner.PubKey))
	require.NoError(t, err)
	foreign := w.owner.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base))
	cid := w.cid
	w.cid = elsewhere.ID
	w.store(t, foreign)
	w.storeReply(t, ch, foreign, foreign, 1, w.owner.Signed(t, 9, replyOpts(ch, foreign, foreign, base+1, "foreign reply")...))
	w.cid = cid

	// Roots of kinds ingest refuses, with replies listed under them.
	diff := w.owner.Signed(t, 40008, eventtest.Channel(ch), eventtest.At(base))
	secret := w.owner.Signed(t, 30300, eventtest.Channel(ch), eventtest.At(base), eventtest.Tag("d", "x"))
	w.store(t, diff, secret)
	for _, r := range []event.Event{diff, secret} {
		w.storeReply(t, ch, r, r, 1, w.owner.Signed(t, 9, replyOpts(ch, r, r, base+2, "reply under "+r.ID[:8])...))
	}
	inOther := w.root(t, other, base)
	w.reply(t, other, inOther, inOther, base+1, "reply in the other channel")

	for name, root := range map[string]string{
		"Missing": "ab" + root.ID[2:], "OtherChannel": inOther.ID, "OtherCommunity": foreign.ID,
		"Kind40008": diff.ID, "Private30300": secret.ID,
	} {
		t.Run(name, func(t *testing.T) {
			for _, aux := range []bool{false, true} {
				r := window.ThreadRequest{Channel: ch, Root: root, Limit: 50, Depth: 100, Kinds: []int{9}, IncludeAux: aux}
				a := w.query(t, reader, filter(r))
				require.Equal(t, http.StatusOK, a.status, a.body)
				require.JSONEq(t, `[]`, a.body)
			}
		})
	}

	t.Run("DeletedRoot", func(t *testing.T) {
		reply := w.reply(t, ch, root, root, base+2, "second reply")
		w.publish(t, event.KindDeletion, eventtest.Channel(ch), eventtest.Tag("e", root.ID))
		r := req(ch, root)
		pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
		require.Len(t, pages[0].rows, 2)
		require.Equal(t, reply.ID, pages[0].rows[0].ID)
		r.IncludeAux = true
		pages = w.windows(t, w.query(t, reader, filter(r)), reader, r)
		require.Len(t, pages[0].rows, 2)
		require.Len(t, pages[0].aux, 1, "the deletion of the root")
		require.Equal(t, event.KindDeletion, pages[0].aux[0].Kind)
	})
}

// Over HTTP: five windows, a window next to a plain filter, and
// thread_window false served as plain filters. An inaccessible channel
// contributes nothing; an accessible one with no replies gets its bounds.
func TestBatchShape(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	secret := w.private(t)
	base := now()
	root := w.root(t, ch, base)
	hidden := w.root(t, secret, base)
	w.reply(t, secret, hidden, hidden, base+1, "hidden reply")
	r := req(ch, root)
	f := filter(r)

	w.query(t, reader, f, f, f, f, f).requireError(t, http.StatusBadRequest, "at most four thread windows per query")
	w.query(t, reader, f, `{"kinds":[1]}`).requireError(t, http.StatusBadRequest, "thread_window cannot mix with other query modes")
	w.query(t, reader, `{"thread_window":true,"#h":["`+ch+`"],"#e":["`+root.ID+`"],"kinds":[7]}`).
		requireError(t, http.StatusBadRequest, "thread_window supports row kinds 9, 40002, 45001, 45003 only")

	plain := w.query(t, reader, `{"thread_window":false,"#h":["`+ch+`"],"kinds":[9]}`, `{"ids":["`+root.ID+`"]}`)
	require.Equal(t, http.StatusOK, plain.status, plain.body)
	require.Equal(t, []string{root.ID}, ids(plain.events), "served as plain filters")

	h := req(secret, hidden)
	pages := w.windows(t, w.query(t, reader, filter(h), f), reader, r)
	require.Empty(t, pages[0].rows)
	require.False(t, pages[0].hasMore)
	w.windows(t, w.query(t, w.owner, filter(h), f), w.owner, h, r)
}
