package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestLegacyThreadRead: {"#e":[R],"depth_limit":2,"limit":600}
// returns replies of depth 1–2, oldest first, at most 500, and the last
// row's cursor continues without gaps or repeats.
func TestLegacyThreadRead(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(alice)
	ch := uuid.NewString()
	w.MustPublish(alice.Signed(t, event.KindCreateGroup, eventtest.Tag("h", ch), eventtest.Tag("name", "threads")))
	base := time.Now().Unix() - 800
	root := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base))
	w.MustPublish(root)
	mark := func(id, m string) eventtest.Option { return eventtest.Tag("e", id, "", m) }

	// 520 depth-1 replies (some sharing a second), each with one depth-2
	// reply on the first 20, and one depth-3 reply that must not appear.
	var want []string
	var first event.Event
	for i := range 520 {
		ev := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base+1+int64(i/3)),
			eventtest.Content(fmt.Sprintf("reply %d", i)), mark(root.ID, "root"), mark(root.ID, "reply"))
		w.MustPublish(ev)
		want = append(want, ev.ID)
		if i == 0 {
			first = ev
		}
	}
	d2 := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base+300), mark(root.ID, "root"), mark(first.ID, "reply"))
	w.MustPublish(d2)
	d3 := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base+301), mark(root.ID, "root"), mark(d2.ID, "reply"))
	w.MustPublish(d3)

	read := func(extra string) []event.Event {
		body := `[{"#e":["` + root.ID + `"],"depth_limit":2,"limit":600` + extra + `}]`
		status, resp := r.HTTP(t, "", http.MethodPost, "/query", &alice, []byte(body))
		require.Equal(t, http.StatusOK, status, string(resp))
		var evs []event.Event
		require.NoError(t, json.Unmarshal(resp, &evs))
		return evs
	}
	page1 := read("")
	require.Len(t, page1, 500, "limit is capped at 500")
	for i := 1; i < len(page1); i++ {
		a, b := page1[i-1], page1[i]
		require.True(t, a.CreatedAt < b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID < b.ID), "oldest first, ties by id")
	}
	last := page1[len(page1)-1]
	page2 := read(fmt.Sprintf(`,"thread_cursor":%d,"thread_cursor_id":"%s"`, last.CreatedAt, last.ID))
	seen := map[string]int{}
	for _, ev := range append(page1, page2...) {
		seen[ev.ID]++
		require.NotEqual(t, root.ID, ev.ID, "the root is not a reply")
		require.NotEqual(t, d3.ID, ev.ID, "depth 3 is beyond depth_limit 2")
	}
	for _, id := range append(want, d2.ID) {
		require.Equal(t, 1, seen[id], "every reply of depth 1–2 exactly once")
	}
	require.Len(t, seen, 521)

	t.Run("CamelCaseCursorWithoutID", func(t *testing.T) {
		evs := read(fmt.Sprintf(`,"threadCursor":%d`, base+1))
		for _, ev := range evs {
			require.Greater(t, ev.CreatedAt, base+1, "a cursor without an id continues strictly after that second")
		}
	})
	t.Run("UnboundedDepth", func(t *testing.T) {
		body := `[{"#e":["` + root.ID + `"],"depth_limit":2147483647,"threadCursor":` + fmt.Sprint(base+299) + `}]`
		status, resp := r.HTTP(t, "", http.MethodPost, "/query", &alice, []byte(body))
		require.Equal(t, http.StatusOK, status, string(resp))
		var evs []event.Event
		require.NoError(t, json.Unmarshal(resp, &evs))
		ids := map[string]bool{}
		for _, ev := range evs {
			ids[ev.ID] = true
		}
		require.True(t, ids[d2.ID] && ids[d3.ID], "all depths")
	})
	t.Run("PrivateChannelInvisibleToOthers", func(t *testing.T) {
		bob := eventtest.NewKey()
		priv := uuid.NewString()
		w.MustPublish(alice.Signed(t, event.KindCreateGroup, eventtest.Tag("h", priv), eventtest.Tag("name", "secret"), eventtest.Tag("visibility", "private")))
		proot := alice.Signed(t, 9, eventtest.Channel(priv))
		w.MustPublish(proot)
		w.MustPublish(alice.Signed(t, 9, eventtest.Channel(priv), mark(proot.ID, "root"), mark(proot.ID, "reply")))
		body := `[{"#e":["` + proot.ID + `"],"depth_limit":5}]`
		status, resp := r.HTTP(t, "", http.MethodPost, "/query", &bob, []byte(body))
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `[]`, string(resp))
		status, resp = r.HTTP(t, "", http.MethodPost, "/query", &alice, []byte(body))
		require.Equal(t, http.StatusOK, status)
		require.NotEqual(t, `[]`, string(resp))
	})
}
