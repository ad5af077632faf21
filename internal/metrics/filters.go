package metrics

import "github.com/prometheus/client_golang/prometheus"

// FilterCaps are the label values of buzz_filter_cap_refusals_total{cap}:
// the read door's filter caps and the WebSocket door's subscription and
// connection caps (docs/OPERATIONS.md "Filter caps").
var FilterCaps = []string{
	"ids", "authors", "kinds", "tag_values", "tag_keys",
	"subscription_index_keys", "connection_index_keys", "connection_filter_bytes",
}

// newFilterCapRefusals is buzz_filter_cap_refusals_total{cap}, every cap's
// series created at zero.
func newFilterCapRefusals(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "buzz_filter_cap_refusals_total",
		Help: "Read requests and subscriptions refused by a filter cap, by cap.",
	}, []string{"cap"})
	if reg == nil {
		return c
	}
	reg.MustRegister(c)
	for _, name := range FilterCaps {
		c.WithLabelValues(name)
	}
	return c
}
