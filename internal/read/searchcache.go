package read

import (
	"container/list"
	"sync"
	"unsafe"

	"github.com/buzz-relay/buzz/internal/hot"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/search"
)

// searchCache keeps the pages of recent search statements, each with the
// hot window's stamp of its community taken before the statement ran
// (docs/ARCHITECTURE.md "Search cache"). A page is served again only while
// the stamp is unchanged: the window has taken no commit of the community
// and has not been reset since, so PostgreSQL would return the same page.
// It holds at most max bytes, the least recently used page going first.
type searchCache struct {
	max int64
	m   metrics.Search

	mu    sync.Mutex
	used  int64
	order *list.List // of *cachedPage, most recently used first
	pages map[[32]byte]*list.Element
}

type cachedPage struct {
	key   [32]byte
	stamp hot.Stamp
	res   search.Result
	cost  int64
}

// newSearchCache returns a cache of max bytes, nil (off) when max is 0.
func newSearchCache(max int64, m metrics.Search) *searchCache {
	if max <= 0 {
		return nil
	}
	return &searchCache{max: max, m: m, order: list.New(), pages: map[[32]byte]*list.Element{}}
}

// hitCost is what one hit is charged: the struct and its channel id's bytes.
const hitCost = int64(unsafe.Sizeof(search.Hit{}))

// pageCost estimates a cached page's memory: its hits, the key and the
// list and map entries.
func pageCost(res *search.Result) int64 {
	n := int64(160)
	for i := range res.Hits {
		n += hitCost + int64(len(res.Hits[i].Channel))
	}
	return n
}

// get returns the page stored under key when cur, the community's current
// stamp, still vouches for the stamp it was stored under at now (unix
// seconds). The page is shared: callers only read it.
func (c *searchCache) get(key [32]byte, cur hot.Stamp, now int64) (search.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.pages[key]
	if el == nil {
		c.m.Cache.WithLabelValues("miss").Inc()
		return search.Result{}, false
	}
	p := el.Value.(*cachedPage)
	if !p.stamp.Vouches(cur, now) {
		c.removeLocked(el)
		c.m.Cache.WithLabelValues("stale").Inc()
		return search.Result{}, false
	}
	c.order.MoveToFront(el)
	c.m.Cache.WithLabelValues("hit").Inc()
	return p.res, true
}

// put stores res under key with the stamp taken before its statement ran.
// A page larger than the whole cache is not kept.
func (c *searchCache) put(key [32]byte, stamp hot.Stamp, res search.Result) {
	p := &cachedPage{key: key, stamp: stamp, res: res, cost: pageCost(&res)}
	if p.cost > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.pages[key]; el != nil {
		c.removeLocked(el)
	}
	c.pages[key] = c.order.PushFront(p)
	c.used += p.cost
	for c.used > c.max {
		c.removeLocked(c.order.Back())
	}
	c.m.CacheBytes.Set(float64(c.used))
}

// removeLocked drops one page (the caller holds c.mu).
func (c *searchCache) removeLocked(el *list.Element) {
	p := c.order.Remove(el).(*cachedPage)
	delete(c.pages, p.key)
	c.used -= p.cost
	c.m.CacheBytes.Set(float64(c.used))
}
