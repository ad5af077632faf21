package window_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// routed returns the relay's buzz_db_route_decision series of a path,
// route and reason; the series must exist.
func (b *testBundle) routed(t *testing.T, path, route, reason string) float64 {
	t.Helper()
	return b.r.Metric(t, `buzz_db_route_decision{path="`+path+`",reason="`+reason+`",route="`+route+`"}`)
}

// requests returns the relay's buzz_window_requests_total series of a
// mode and outcome.
func (b *testBundle) requests(t *testing.T, mode, outcome string) float64 {
	t.Helper()
	return b.r.Metric(t, `buzz_window_requests_total{mode="`+mode+`",outcome="`+outcome+`"}`)
}

// TestChannelWindow covers checks 1, 2 and 4 over real HTTP with NIP-98:
// paging with the bounds, the docs/NIP-CW.md §3.1 refusals, access, and
// summaries.
func TestChannelWindow(t *testing.T) {
	t.Parallel()
	b := setupRelay(t, nil)

	t.Run("PagesWithBounds", func(t *testing.T) {
		t.Parallel()
		owner := b.user(t)
		ch := owner.channel(t)
		ts := unixNow() - 100
		r1 := owner.post(t, ch, eventtest.At(ts+1))
		r2 := owner.post(t, ch, eventtest.At(ts+2))
		r3 := owner.post(t, ch, eventtest.At(ts+3))

		rows, bd := windowPage(t, b.events(t, owner.key, topLevel(ch, map[string]any{"limit": 2, "kinds": []int{9}})), ch)
		require.Equal(t, []string{r3.ID, r2.ID}, nostrIDs(rows))
		require.Equal(t, ch+":head", bd.D)
		require.True(t, bd.HasMore)
		require.Equal(t, r2.CreatedAt, bd.NextCursor.CreatedAt)
		require.Equal(t, r2.ID, bd.NextCursor.ID)

		rows, bd = windowPage(t, b.events(t, owner.key, topLevel(ch, map[string]any{"limit": 2, "kinds": []int{9},
			"until": bd.NextCursor.CreatedAt, "before_id": strings.ToUpper(bd.NextCursor.ID)})), ch)
		require.Equal(t, []string{r1.ID}, nostrIDs(rows))
		require.Equal(t, ch+":"+itoa64(r2.CreatedAt)+":"+r2.ID, bd.D, "the request cursor, lowercase")
		require.False(t, bd.HasMore)
		require.Nil(t, bd.NextCursor)

		// limit is clamped into 1..200, never refused.
		rows, bd = windowPage(t, b.events(t, owner.key, topLevel(ch, map[string]any{"limit": 0})), ch)
		require.Equal(t, []string{r3.ID}, nostrIDs(rows))
		require.True(t, bd.HasMore)
		rows, bd = windowPage(t, b.events(t, owner.key, topLevel(ch, map[string]any{"limit": 500})), ch)
		require.Equal(t, []string{r3.ID, r2.ID, r1.ID}, nostrIDs(rows))
		require.False(t, bd.HasMore)
	})

	t.Run("Metrics", func(t *testing.T) {
		t.Parallel()
		owner := b.user(t)
		ch := owner.channel(t)
		ev := owner.post(t, ch)
		head := topLevel(ch, nil)
		cursor := topLevel(ch, map[string]any{"until": ev.CreatedAt, "before_id": ev.ID})
		// A route series exists from its first decision on; other subtests
		// run at the same time, so counters are compared as lower bounds.
		windowPage(t, b.events(t, owner.key, head), ch)
		windowPage(t, b.events(t, owner.key, cursor), ch)
		heads, cursors := b.routed(t, "channel_head", "writer", "head_page"), b.routed(t, "channel_cursor", "writer", "not_configured")
		ok := b.requests(t, "channel", "ok")
		bad := b.requests(t, "channel", "bad_request")
		windowPage(t, b.events(t, owner.key, head), ch)
		windowPage(t, b.events(t, owner.key, cursor), ch)
		status, _ := b.query(t, owner.key, topLevel(ch, map[string]any{"until": ev.CreatedAt}))
		require.Equal(t, http.StatusBadRequest, status)
		require.GreaterOrEqual(t, b.routed(t, "channel_head", "writer", "head_page")-heads, 1.0)
		require.GreaterOrEqual(t, b.routed(t, "channel_cursor", "writer", "not_configured")-cursors, 1.0)
		require.GreaterOrEqual(t, b.requests(t, "channel", "ok")-ok, 2.0)
		require.GreaterOrEqual(t, b.requests(t, "channel", "bad_request")-bad, 1.0)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		owner := b.user(t)
		ch := owner.channel(t)
		other := owner.channel(t)
		id := strings.Repeat("ab", 32)
		for _, tc := range []struct {
			name   string
			filter map[string]any
			text   string
		}{
			{"OnlyUntil", topLevel(ch, map[string]any{"until": 1751500000}), "top_level cursor requires both until and before_id, or neither"},
			{"OnlyBeforeID", topLevel(ch, map[string]any{"before_id": id}), "top_level cursor requires both until and before_id, or neither"},
			{"NoH", map[string]any{"top_level": true, "kinds": []int{9}}, "top_level requires exactly one #h channel"},
			{"TwoH", map[string]any{"top_level": true, "kinds": []int{9}, "#h": []string{ch, other}}, "top_level requires exactly one #h channel"},
			{"ShortBeforeID", topLevel(ch, map[string]any{"until": 1751500000, "before_id": id[:63]}), "top_level: before_id must be a 64-hex event id"},
			{"UntilOutOfRange", topLevel(ch, map[string]any{"until": int64(253402300800), "before_id": id}), "top_level: until is out of range"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body := b.query(t, owner.key, tc.filter)
				require.Equal(t, http.StatusBadRequest, status, string(body))
				require.JSONEq(t, `{"error":`+quote(tc.text)+`}`, string(body))
			})
		}
	})

	t.Run("Access", func(t *testing.T) {
		t.Parallel()
		owner, reader := b.user(t), b.user(t)
		private := owner.channel(t, eventtest.Tag("visibility", "private"))
		owner.post(t, private)
		empty := reader.channel(t)
		for _, ch := range []string{private, "6a1e5b1c-0d7e-4f3a-9b2c-8e4d5f6a7b8c"} {
			status, body := b.query(t, reader.key, topLevel(ch, map[string]any{"kinds": []int{9}, "include_aux": true, "include_summaries": true}))
			require.Equal(t, http.StatusOK, status)
			require.JSONEq(t, `[]`, string(body), "inaccessible or missing: no rows, no bounds")
		}
		rows, bd := windowPage(t, b.events(t, reader.key, topLevel(empty, map[string]any{"kinds": []int{9}})), empty)
		require.Empty(t, rows)
		require.Equal(t, bounds{D: empty + ":head"}, bd, "an accessible empty channel has its bounds")
		// The owner reads the private channel.
		rows, _ = windowPage(t, b.events(t, owner.key, topLevel(private, map[string]any{"kinds": []int{9}})), private)
		require.Len(t, rows, 1)
	})

	t.Run("Summaries", func(t *testing.T) {
		t.Parallel()
		alice, bob := b.user(t), b.user(t)
		ch := alice.channel(t)
		ts := unixNow() - 200
		a := alice.post(t, ch, eventtest.At(ts))
		alice.reply(t, ch, a.ID, a.ID, eventtest.At(ts+10))
		alice.reply(t, ch, a.ID, a.ID, eventtest.At(ts+11))
		bob.reply(t, ch, a.ID, a.ID, eventtest.At(ts+12))
		quiet := alice.post(t, ch, eventtest.At(ts+20))
		c := alice.post(t, ch, eventtest.At(ts+30))
		broadcast := bob.reply(t, ch, c.ID, c.ID, eventtest.At(ts+40), eventtest.Tag("broadcast", "1"))
		deep := alice.reply(t, ch, c.ID, broadcast.ID, eventtest.At(ts+50), eventtest.Tag("broadcast", "1"))
		react := bob.publish(t, 7, eventtest.Content("+"), eventtest.Tag("e", a.ID))

		evs := b.events(t, alice.key, topLevel(ch, map[string]any{"kinds": []int{9}, "include_summaries": true, "include_aux": true}))
		evs, bd := windowPage(t, evs, ch)
		require.False(t, bd.HasMore)
		require.Equal(t, []string{broadcast.ID, c.ID, quiet.ID, a.ID}, nostrIDs(evs[:4]),
			"a broadcast depth-1 reply is a row; plain replies and a depth-2 reply never are")
		require.NotContains(t, nostrIDs(evs), deep.ID)
		require.Equal(t, react.ID, evs[4].ID, "aux after the rows")
		sums := evs[5:]
		require.Len(t, sums, 3, "one 39005 per row with replies: the broadcast reply, c and a")
		byRoot := map[string]nostr.Event{}
		for _, s := range sums {
			require.Equal(t, 39005, s.Kind)
			byRoot[s.Tags[0][1]] = s
		}
		require.Equal(t, []string{broadcast.ID, c.ID, a.ID}, []string{sums[0].Tags[0][1], sums[1].Tags[0][1], sums[2].Tags[0][1]},
			"summaries in row order")
		s := byRoot[a.ID]
		require.Equal(t, nostr.Tags{{"e", a.ID}, {"d", a.ID}, {"h", ch}}, s.Tags)
		content := summaryOf(t, s)
		require.Equal(t, 3, content.ReplyCount)
		require.Equal(t, 3, content.DescendantCount)
		require.NotNil(t, content.LastReplyAt)
		require.Equal(t, ts+12, *content.LastReplyAt, "last_reply_at: the newest direct reply's created_at")
		require.Equal(t, []string{bob.key.PubKey, alice.key.PubKey}, content.Participants, "newest first: bob replied last")
		content = summaryOf(t, byRoot[c.ID])
		require.Equal(t, 1, content.ReplyCount)
		require.Equal(t, 2, content.DescendantCount)
		require.Equal(t, []string{alice.key.PubKey, bob.key.PubKey}, content.Participants)
	})
}

// TestChannelWindowPaging is the channel half of the paging check: 120 top-level
// rows over 3 seconds paged with limit 7, each row exactly once and in
// the total order across the same-second boundaries, while edits,
// deletions and new rows land between the pages.
func TestChannelWindowPaging(t *testing.T) {
	t.Parallel()
	b := setupRelay(t, nil)
	owner := b.user(t)
	ch := owner.channel(t)
	ts := unixNow() - 300
	var posted []string
	created := map[string]int64{}
	for i := range 120 {
		ev := owner.post(t, ch, eventtest.At(ts+int64(i/40)))
		posted = append(posted, ev.ID)
		created[ev.ID] = ev.CreatedAt
	}
	// The expected order: created_at descending, ids ascending in a second.
	want := slices.Clone(posted)
	slices.SortFunc(want, func(x, y string) int {
		if created[x] != created[y] {
			return int(created[y] - created[x])
		}
		return strings.Compare(x, y)
	})

	deleted := map[string]bool{}
	var got []string
	var next *struct {
		CreatedAt int64  `json:"created_at"`
		ID        string `json:"id"`
	}
	for pageNo := 0; ; pageNo++ {
		f := topLevel(ch, map[string]any{"limit": 7, "kinds": []int{9}})
		d := ch + ":head"
		if next != nil {
			f["until"], f["before_id"] = next.CreatedAt, next.ID
			d = ch + ":" + itoa64(next.CreatedAt) + ":" + next.ID
		}
		rows, bd := windowPage(t, b.events(t, owner.key, f), ch)
		require.Equal(t, d, bd.D)
		got = append(got, nostrIDs(rows)...)
		if !bd.HasMore {
			break
		}
		require.Equal(t, rows[len(rows)-1].ID, bd.NextCursor.ID)
		next = bd.NextCursor
		require.Less(t, pageNo, 30, "paging must end")

		// Between the pages: a new row, an edit of a row still ahead, a
		// deletion of another row ahead, and on every other page a deletion
		// of the row the cursor names.
		owner.post(t, ch)
		var ahead []string
		for _, id := range want[slices.Index(want, next.ID)+1:] {
			if !deleted[id] {
				ahead = append(ahead, id)
			}
		}
		if len(ahead) >= 2 {
			owner.publish(t, 40003, eventtest.Channel(ch), eventtest.Content("edited"), eventtest.Tag("e", ahead[0]))
			owner.delete(t, ahead[1])
			deleted[ahead[1]] = true
		}
		if pageNo%2 == 1 {
			owner.delete(t, next.ID)
		}
	}
	var expect []string
	for _, id := range want {
		if !deleted[id] {
			expect = append(expect, id)
		}
	}
	require.Equal(t, expect, got, "every live row exactly once, in order")
}

func itoa64(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
