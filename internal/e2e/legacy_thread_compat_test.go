package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// TestLegacyThreadBesideWindows is docs/NIP-CW.md §6: with NIP-CW
// windows served, a filter without the opt-in keeps the legacy
// oldest-first thread read: ascending replies, no bounds event, the snake
// and camel cursor spellings page identically, and kinds does not
// restrict the replies.
func TestLegacyThreadBesideWindows(t *testing.T) {
	t.Parallel()
	r, alice, w, ch := windowRelay(t, "legacy")
	base := time.Now().Unix() - 600
	root := alice.Signed(t, 9, eventtest.Channel(ch), eventtest.At(base))
	w.MustPublish(root)
	var replies []event.Event
	for i := range 25 {
		kind := 9
		if i%2 == 1 {
			kind = event.KindStreamMessage2 // 40002: a kind the filter below does not name
		}
		ev := alice.Signed(t, kind, eventtest.Channel(ch), eventtest.At(base+1+int64(i/2)),
			eventtest.Content(fmt.Sprintf("reply %d", i)),
			eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", root.ID, "", "reply"))
		w.MustPublish(ev)
		replies = append(replies, ev)
	}
	sort.Slice(replies, func(i, j int) bool {
		a, b := replies[i], replies[j]
		return a.CreatedAt < b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID < b.ID)
	})
	want := make([]string, len(replies))
	for i := range replies {
		want[i] = replies[i].ID
	}
	query := func(body string) []event.Event { return queryEvents(t, r, alice, body) }
	walk := func(cursorField, idField string) []string {
		t.Helper()
		var got []string
		cursor := fmt.Sprintf(`,"%s":-1`, cursorField)
		for range 10 {
			evs := query(`[{"#e":["` + root.ID + `"],"depth_limit":2147483647,"kinds":[9],"limit":10` + cursor + `}]`)
			for i, ev := range evs {
				require.NotContains(t, []int{39005, 39006, 39007}, ev.Kind, "the legacy path signs no bounds")
				if i > 0 {
					prev := evs[i-1]
					require.True(t, prev.CreatedAt < ev.CreatedAt || (prev.CreatedAt == ev.CreatedAt && prev.ID < ev.ID), "oldest first, ties by id")
				}
				got = append(got, ev.ID)
			}
			if len(evs) < 10 {
				return got
			}
			last := evs[len(evs)-1]
			cursor = fmt.Sprintf(`,"%s":%d,"%s":"%s"`, cursorField, last.CreatedAt, idField, last.ID)
		}
		t.Fatal("the walk did not end")
		return nil
	}
	snake := walk("thread_cursor", "thread_cursor_id")
	require.Equal(t, want, snake, "every reply once, kinds [9] restricting nothing")
	require.Equal(t, snake, walk("threadCursor", "threadCursorId"), "both spellings page identically")

	t.Run("IncludeAux", func(t *testing.T) {
		// docs/NIP-CW.md §6: the root and the delivered replies are hop-1
		// targets, hop 2 the delivered hop-1 events; aux is not limited.
		onReply := alice.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.Content("+"), eventtest.Tag("e", replies[0].ID))
		w.MustPublish(onReply)
		rootEdit := alice.Signed(t, event.KindMessageEdit, eventtest.Channel(ch), eventtest.Content("edited"), eventtest.Tag("e", root.ID))
		w.MustPublish(rootEdit)
		removed := alice.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.Content("-"), eventtest.Tag("e", replies[1].ID))
		w.MustPublish(removed)
		unreact := alice.Signed(t, event.KindDeletion, eventtest.Channel(ch), eventtest.Tag("e", removed.ID))
		w.MustPublish(unreact)
		beyond := alice.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.Content("+"), eventtest.Tag("e", replies[24].ID))
		w.MustPublish(beyond)

		base := `[{"#e":["` + root.ID + `"],"depth_limit":2147483647,"limit":2,"thread_cursor":-1`
		ids := func(evs []event.Event) map[string]bool {
			out := map[string]bool{}
			for _, ev := range evs {
				out[ev.ID] = true
			}
			return out
		}
		plain := ids(query(base + `}]`))
		require.Len(t, plain, 2, "without include_aux: the two replies only")
		got := query(base + `,"include_aux":true}]`)
		require.Equal(t, replies[0].ID, got[0].ID, "replies first")
		require.Equal(t, replies[1].ID, got[1].ID)
		all := ids(got)
		require.True(t, all[onReply.ID], "a reaction to a delivered reply")
		require.True(t, all[rootEdit.ID], "an edit of the root")
		require.False(t, all[removed.ID], "a deleted reaction is not returned")
		require.False(t, all[unreact.ID], "nor its deletion: hop 2 targets the delivered hop-1 events only")
		require.False(t, all[beyond.ID], "aux of an undelivered reply is not")
		require.Len(t, got, 4, "aux does not count against limit 2")
	})
}
