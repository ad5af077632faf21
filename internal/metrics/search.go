package metrics

import "github.com/prometheus/client_golang/prometheus"

// Label values of the search metrics (docs/PROTOCOL.md §12.9).
var (
	SearchTransports = []string{"ws", "http"}
	SearchOutcomes   = []string{"ok", "error", "timeout"}
	SearchResults    = []string{"sent", "missing", "filter", "channel", "visibility", "edit_target", "duplicate"}
	// SearchCacheResults are the outcomes of a search page's cache lookup
	// (docs/ARCHITECTURE.md "Search cache"): served from the cache, not in
	// it, in it but changed since, or not cacheable because the
	// community's hot window was not ready to vouch for it.
	SearchCacheResults = []string{"hit", "miss", "stale", "unwatched"}
)

// Search holds the NIP-50 metrics of docs/PROTOCOL.md §12.9.
type Search struct {
	// Requests is buzz_search_requests_total{transport,outcome}: search
	// filters served (one per search filter of a REQ or /query call).
	Requests *prometheus.CounterVec
	// QuerySeconds is buzz_search_query_seconds{transport}: one FTS statement.
	QuerySeconds *prometheus.HistogramVec
	// Hits is buzz_search_hits_total{transport,result}: what happened to
	// each candidate the index returned.
	Hits *prometheus.CounterVec
	// Cache is buzz_search_cache_total{result}: each search page's cache
	// lookup (SearchCacheResults).
	Cache *prometheus.CounterVec
	// CacheBytes is buzz_search_cache_bytes: the cache's estimated size.
	CacheBytes prometheus.Gauge
}

func newSearch(reg prometheus.Registerer) Search {
	s := Search{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_search_requests_total", Help: "Search filters served, by transport and outcome."}, []string{"transport", "outcome"}),
		QuerySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "buzz_search_query_seconds", Help: "Duration of one full-text statement.", Buckets: SecondsBuckets}, []string{"transport"}),
		Hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_search_hits_total", Help: "Search candidates by what happened to them."}, []string{"transport", "result"}),
		Cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_search_cache_total", Help: "Search page cache lookups by result."}, []string{"result"}),
		CacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_search_cache_bytes", Help: "Estimated memory of the search page cache."}),
	}
	if reg == nil {
		return s
	}
	reg.MustRegister(s.Requests, s.QuerySeconds, s.Hits, s.Cache, s.CacheBytes)
	for _, r := range SearchCacheResults {
		s.Cache.WithLabelValues(r)
	}
	for _, t := range SearchTransports {
		s.QuerySeconds.WithLabelValues(t)
		for _, o := range SearchOutcomes {
			s.Requests.WithLabelValues(t, o)
		}
		for _, r := range SearchResults {
			s.Hits.WithLabelValues(t, r)
		}
	}
	return s
}
