package read

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/hot"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/search"
)

// now is the time the cache test reads its pages at: before any
// expiration (readyStamp's window knows none).
const now = 1 << 40

// readyStamp is a stamp of a ready window of an empty community whose
// events never expire, as the relay's window gives one.
func readyStamp(t *testing.T) hot.Stamp {
	t.Helper()
	w := hot.New(hot.Config{Events: 10,
		Warm:       func(context.Context, string, int) ([]*hot.Entry, error) { return nil, nil },
		NextExpiry: func(context.Context, string) (int64, error) { return math.MaxInt64, nil }})
	w.SetEnabled(true, "")
	var stamp hot.Stamp
	require.Eventually(t, func() bool {
		var ok bool
		stamp, ok = w.Watch(context.Background(), "c")
		return ok
	}, 5*time.Second, time.Millisecond)
	return stamp
}

func cachePage(n int) search.Result {
	res := search.Result{Page: 1, Hits: make([]search.Hit, n)}
	for i := range res.Hits {
		res.Hits[i].Channel = "c2b7e0f6-3b1f-4c5e-9d7a-0a1b2c3d4e5f"
	}
	return res
}

// The search cache holds at most its bytes (BUZZ_SEARCH_CACHE_MIB): at the
// bound every page stays, one page over it the least recently used goes,
// and a page larger than the whole cache is never kept.
func TestSearchCacheBound(t *testing.T) {
	t.Parallel()
	page := cachePage(10)
	cost := pageCost(&page)
	m := metrics.Disabled().Search
	c := newSearchCache(3*cost, m)
	stamp := readyStamp(t)
	keys := [][32]byte{{1}, {2}, {3}, {4}}
	for _, k := range keys[:3] {
		c.put(k, stamp, page)
	}
	require.Equal(t, 3*cost, c.used, "at the bound")
	for _, k := range keys[:3] {
		_, ok := c.get(k, stamp, now)
		require.True(t, ok)
	}
	_, _ = c.get(keys[0], stamp, now) // the least recently used is now keys[1]
	c.put(keys[3], stamp, page)       // one page over the bound
	require.Equal(t, 3*cost, c.used)
	_, ok := c.get(keys[1], stamp, now)
	require.False(t, ok, "the least recently used page went")
	for _, k := range []([32]byte){keys[0], keys[2], keys[3]} {
		_, ok := c.get(k, stamp, now)
		require.True(t, ok)
	}

	big := cachePage(40)
	require.Greater(t, pageCost(&big), 3*cost)
	c.put([32]byte{5}, stamp, big)
	_, ok = c.get([32]byte{5}, stamp, now)
	require.False(t, ok, "a page larger than the cache is not kept")
	require.Equal(t, 3*cost, c.used)
	require.Equal(t, float64(3*cost), testutil.ToFloat64(m.CacheBytes))
	require.Nil(t, newSearchCache(0, m), "0 turns it off")
}
