package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/search"
	"github.com/buzz-relay/buzz/internal/store"
)

// scContents is the contents of evs, in order.
func scContents(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Content
	}
	return out
}

// The search cache (docs/ARCHITECTURE.md "Search cache"): a page asked
// again while nothing changed in the community comes from the cache; a
// commit of a kind the hot window holds, a commit of a kind it does not
// (a profile), and the search-kinds rewrite's notification each make the
// next search read PostgreSQL again, so the answer is always the one
// PostgreSQL gives.
func TestSearchCache(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice, bob := eventtest.NewKey(), eventtest.NewKey()
	wa := r.Dial(t, "")
	wa.Auth(alice)
	open := uuid.NewString()
	wa.MustPublish(alice.Signed(t, event.KindCreateGroup, eventtest.Channel(open), eventtest.Tag("name", "open")))
	now := time.Now().Unix()
	wa.MustPublish(alice.Signed(t, 9, eventtest.Channel(open), eventtest.Content("cache zebra one"), eventtest.At(now-10)))

	wb := r.Dial(t, "")
	wb.Auth(bob)
	n := 0
	contents := func(f map[string]any) []string {
		n++
		evs, closed, eose := wb.Req("s"+string(rune('a'+n%26)), f)
		require.True(t, eose, closed)
		return scContents(evs)
	}
	hits := func() float64 { return r.Metric(t, `buzz_search_cache_total{result="hit"}`) }
	// cached asks f until its page comes from the cache: the first read
	// warms the community's hot window, which must be ready to vouch.
	cached := func(f map[string]any, want []string) {
		t.Helper()
		require.Eventually(t, func() bool {
			before := hits()
			require.Equal(t, want, contents(f))
			return hits() > before
		}, 10*time.Second, 20*time.Millisecond, "the page never came from the cache")
	}
	messages := map[string]any{"search": "zebra", "kinds": []int{9}}
	cached(messages, []string{"cache zebra one"})

	t.Run("CommitOfAWindowKind", func(t *testing.T) {
		wa.MustPublish(alice.Signed(t, 9, eventtest.Channel(open), eventtest.Content("cache zebra two"), eventtest.At(now-5)))
		before := hits()
		require.Equal(t, []string{"cache zebra two", "cache zebra one"}, contents(messages))
		require.Equal(t, before, hits(), "the page changed: it is read again")
		cached(messages, []string{"cache zebra two", "cache zebra one"})
	})

	t.Run("CommitOfAnotherKind", func(t *testing.T) {
		profiles := map[string]any{"search": "zebra", "kinds": []int{0}}
		wa.MustPublish(alice.Signed(t, 0, eventtest.Content(`{"name":"zebra keeper"}`), eventtest.At(now-3)))
		cached(profiles, []string{`{"name":"zebra keeper"}`})
		// Kind 0 is replaceable: the window does not hold it, but its
		// commit still changes the community's search pages.
		wb.MustPublish(bob.Signed(t, 0, eventtest.Content(`{"name":"zebra rider"}`), eventtest.At(now-2)))
		require.Equal(t, []string{`{"name":"zebra rider"}`, `{"name":"zebra keeper"}`}, contents(profiles))
	})

	t.Run("Expiration", func(t *testing.T) {
		// A page of one hit over the bridge: the newest match expires, and
		// the next one must take its place, as PostgreSQL's page gives it.
		// At least 4 s before it expires (the second is truncated), so
		// that a loaded machine reads the page while it is still live.
		expires := time.Now().Unix() + 5
		wa.MustPublish(alice.Signed(t, 9, eventtest.Channel(open), eventtest.Content("cache zebra fleeting"),
			eventtest.At(now-1), eventtest.Tag("expiration", strconv.FormatInt(expires, 10))))
		page := func() []string {
			status, body := brHTTP(t, r, "/query", bob, []byte(`[{"search":"zebra","kinds":[9],"limit":1}]`))
			require.Equal(t, http.StatusOK, status, string(body))
			var evs []event.Event
			require.NoError(t, json.Unmarshal(body, &evs))
			return scContents(evs)
		}
		require.Eventually(t, func() bool {
			before := hits()
			require.Equal(t, []string{"cache zebra fleeting"}, page())
			return hits() > before
		}, 10*time.Second, 20*time.Millisecond, "the page never came from the cache")
		time.Sleep(time.Until(time.Unix(expires, 0)) + 100*time.Millisecond)
		require.Equal(t, []string{"cache zebra two"}, page())
	})

	t.Run("SearchKindsRewrite", func(t *testing.T) {
		cached(messages, []string{"cache zebra two", "cache zebra one"})
		ctx := context.Background()
		require.NoError(t, search.Rewrite(ctx, search.RewriteConfig{Pool: r.App.Pool(), Kinds: []int{0}}))
		const heard = `buzz_hot_window_resets_total{reason="external"}`
		before := r.Metric(t, heard)
		require.NoError(t, store.New(r.App.Pool()).NotifyHotWindow(ctx, store.HotWindowAll))
		require.Eventually(t, func() bool { return r.Metric(t, heard) > before }, 10*time.Second, 20*time.Millisecond)
		require.Empty(t, contents(messages), "kind 9 is no longer searchable")
	})
}

// A search reads its community's next expiration under its own read
// share: with a single share, which the search holds, a cached page is
// still kept and served, instead of the search waiting for a second share
// until its deadline.
func TestSearchCacheOneReadShare(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_MAX_CONCURRENT_READS": "1"})
	alice := eventtest.NewKey()
	wa := r.Dial(t, "")
	wa.Auth(alice)
	open := uuid.NewString()
	wa.MustPublish(alice.Signed(t, event.KindCreateGroup, eventtest.Channel(open), eventtest.Tag("name", "open")))
	wa.MustPublish(alice.Signed(t, 9, eventtest.Channel(open), eventtest.Content("one share zebra")))
	f := map[string]any{"search": "zebra", "kinds": []int{9}}
	n := 0
	require.Eventually(t, func() bool {
		before := r.Metric(t, `buzz_search_cache_total{result="hit"}`)
		n++
		started := time.Now()
		evs, closed, eose := wa.Req("s"+strconv.Itoa(n), f)
		require.True(t, eose, closed)
		require.Len(t, evs, 1)
		require.Less(t, time.Since(started), 2*time.Second, "the search waited for a read share")
		return r.Metric(t, `buzz_search_cache_total{result="hit"}`) > before
	}, 10*time.Second, 20*time.Millisecond, "the page never came from the cache")
}
