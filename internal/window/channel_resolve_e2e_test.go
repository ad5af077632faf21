package window_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// resolve is a summary-recovery filter of ch for targets.
func resolve(ch string, targets ...string) map[string]any {
	return map[string]any{"resolve_thread_roots": true, "kinds": []int{39005}, "#h": []string{ch}, "ids": targets}
}

// TestResolveThreadRoots checks root resolution over real HTTP with NIP-98: the
// summary of a soft-deleted reply's root, the request-wide id total, the
// kinds rule, and targets outside the requested channel.
func TestResolveThreadRoots(t *testing.T) {
	t.Parallel()
	b := setupRelay(t, nil)
	alice, bob := b.user(t), b.user(t)
	ch := alice.channel(t)
	elsewhere := alice.channel(t)
	ts := unixNow() - 100
	root := alice.post(t, ch, eventtest.At(ts))
	kept := alice.reply(t, ch, root.ID, root.ID, eventtest.At(ts+1))
	gone := bob.reply(t, ch, root.ID, root.ID, eventtest.At(ts+2), eventtest.Content("the text that must not come back"))
	bob.delete(t, gone.ID)
	second := alice.post(t, ch, eventtest.At(ts+3))
	lone := alice.reply(t, ch, second.ID, second.ID, eventtest.At(ts+4))
	alice.delete(t, lone.ID)

	t.Run("DeletedReply", func(t *testing.T) {
		t.Parallel()
		status, body := b.query(t, alice.key, resolve(ch, gone.ID))
		require.Equal(t, http.StatusOK, status, string(body))
		require.NotContains(t, string(body), gone.Content)
		require.NotContains(t, string(body), gone.Sig)
		evs := b.events(t, alice.key, resolve(ch, strings.ToUpper(gone.ID)))
		require.Len(t, evs, 1, "one summary, no bounds, nothing of the target")
		s := evs[0]
		require.Equal(t, 39005, s.Kind)
		require.Equal(t, nostr.Tags{{"e", root.ID}, {"d", root.ID}, {"h", ch}}, s.Tags)
		c := summaryOf(t, s)
		require.Equal(t, 1, c.ReplyCount, "the deleted reply no longer counts")
		require.Equal(t, 1, c.DescendantCount)
		require.NotNil(t, c.LastReplyAt)
		require.Equal(t, []string{alice.key.PubKey}, c.Participants, "authors of live replies only")
	})

	t.Run("DistinctRootsZeroCounts", func(t *testing.T) {
		t.Parallel()
		evs := b.events(t, alice.key, resolve(ch, lone.ID, gone.ID, kept.ID, root.ID, strings.Repeat("cd", 32)))
		require.Len(t, evs, 2, "one per distinct root; a top-level target and an unknown id yield nothing")
		require.Equal(t, second.ID, evs[0].Tags[0][1])
		require.Equal(t, root.ID, evs[1].Tags[0][1])
		c := summaryOf(t, evs[0])
		require.Equal(t, 0, c.ReplyCount)
		require.Equal(t, 0, c.DescendantCount)
		require.Equal(t, []string{}, c.Participants)
	})

	t.Run("OtherChannel", func(t *testing.T) {
		t.Parallel()
		status, body := b.query(t, alice.key, resolve(elsewhere, gone.ID, kept.ID))
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `[]`, string(body))
	})

	t.Run("Inaccessible", func(t *testing.T) {
		t.Parallel()
		private := alice.channel(t, eventtest.Tag("visibility", "private"))
		r := alice.post(t, private)
		rep := alice.reply(t, private, r.ID, r.ID)
		status, body := b.query(t, bob.key, resolve(private, rep.ID))
		require.Equal(t, http.StatusOK, status)
		require.JSONEq(t, `[]`, string(body))
		require.Len(t, b.events(t, alice.key, resolve(private, rep.ID)), 1)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf("%064x", i+1)
		}
		for _, tc := range []struct {
			name    string
			filters []any
			text    string
		}{
			{"TotalOverTwoFilters", []any{resolve(ch, many[:60]...), resolve(ch, many[60:]...)}, "resolve_thread_roots permits at most 100 targets per request"},
			{"TotalBeforeTheOthers", []any{map[string]any{"resolve_thread_roots": true, "kinds": []int{1}, "#h": []string{ch}, "ids": many[:60]},
				resolve(ch, many[60:]...)}, "resolve_thread_roots permits at most 100 targets per request"},
			{"KindsOne", []any{map[string]any{"resolve_thread_roots": true, "kinds": []int{1}, "#h": []string{ch}, "ids": many[:1]}}, "resolve_thread_roots requires kinds [39005]"},
			{"NoH", []any{map[string]any{"resolve_thread_roots": true, "kinds": []int{39005}, "ids": many[:1]}}, "resolve_thread_roots requires exactly one #h channel"},
			{"NoIDs", []any{map[string]any{"resolve_thread_roots": true, "kinds": []int{39005}, "#h": []string{ch}}}, "resolve_thread_roots requires 1 to 100 target ids"},
			{"TooManyIDs", []any{resolve(ch, many...)}, "resolve_thread_roots permits at most 100 targets per request"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body := b.query(t, alice.key, tc.filters...)
				require.Equal(t, http.StatusBadRequest, status, string(body))
				require.JSONEq(t, `{"error":`+quote(tc.text)+`}`, string(body))
			})
		}
	})
}

// summaryContent is a decoded 39005 content.
type summaryContent struct {
	ReplyCount      int      `json:"reply_count"`
	DescendantCount int      `json:"descendant_count"`
	LastReplyAt     *int64   `json:"last_reply_at"`
	Participants    []string `json:"participants"`
}

func summaryOf(t *testing.T, ev nostr.Event) summaryContent {
	t.Helper()
	var c summaryContent
	require.NoError(t, json.Unmarshal([]byte(ev.Content), &c))
	return c
}
