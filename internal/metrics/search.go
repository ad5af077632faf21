package metrics

import "github.com/prometheus/client_golang/prometheus"

// Label values of the search metrics (docs/PROTOCOL.md §12.9).
var (
	SearchTransports = []string{"ws", "http"}
	SearchOutcomes   = []string{"ok", "error", "timeout"}
	SearchResults    = []string{"sent", "missing", "filter", "channel", "visibility", "edit_target", "duplicate"}
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
}

func newSearch(reg prometheus.Registerer) Search {
	s := Search{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_search_requests_total", Help: "Search filters served, by transport and outcome."}, []string{"transport", "outcome"}),
		QuerySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "buzz_search_query_seconds", Help: "Duration of one full-text statement.", Buckets: SecondsBuckets}, []string{"transport"}),
		Hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_search_hits_total", Help: "Search candidates by what happened to them."}, []string{"transport", "result"}),
	}
	if reg == nil {
		return s
	}
	reg.MustRegister(s.Requests, s.QuerySeconds, s.Hits)
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
