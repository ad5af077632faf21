package metrics

import "github.com/prometheus/client_golang/prometheus"

// Bounded label values of the NIP-CW window metrics (docs/PROTOCOL.md §11.2).
var (
	// WindowModes are the values of buzz_window_requests_total's mode label.
	WindowModes = []string{"channel", "thread", "resolve_roots"}
	// WindowOutcomes are the values of buzz_window_requests_total's outcome
	// label.
	WindowOutcomes = []string{"ok", "bad_request", "unavailable", "internal"}
	// WindowBudgets are the values of
	// buzz_thread_window_budget_exhausted_total's budget label.
	WindowBudgets = []string{"query", "raw_row", "payload_byte", "response_byte", "deadline", "db_timeout"}
	// RoutePaths are the values of buzz_db_route_decision's path label.
	RoutePaths = []string{"channel_head", "channel_cursor", "thread_window_head", "thread_window_cursor"}
	// RouteReasons are the values of buzz_db_route_decision's reason label.
	RouteReasons = []string{"proved", "head_page", "not_configured", "floor_unverified", "bound", "lag", "replica_error", "missing_root"}
)

// ResponseBytesBuckets are the buckets of buzz_thread_window_response_bytes:
// 1 KiB to the 8 MiB response budget.
var ResponseBytesBuckets = prometheus.ExponentialBuckets(1024, 4, 8)

// Window holds the NIP-CW window metrics of docs/PROTOCOL.md §11.2. The
// replica's own counters (buzz_db_replica_reads_total,
// buzz_db_read_session_degraded) are in Replica; window pages count in
// them too.
type Window struct {
	// Requests is buzz_window_requests_total{mode,outcome} (counter): one
	// per window filter (channel, resolve_roots) or thread batch (thread).
	Requests *prometheus.CounterVec
	// ThreadResponseBytes is buzz_thread_window_response_bytes (histogram):
	// response bytes per served thread window.
	ThreadResponseBytes prometheus.Histogram
	// BudgetExhausted is buzz_thread_window_budget_exhausted_total{budget}
	// (counter): thread batches failed by a budget, a deadline or a
	// database timeout.
	BudgetExhausted *prometheus.CounterVec
	// AuthorizationChanged is
	// buzz_thread_window_authorization_changed_total (counter): thread
	// batches failed because the reader's accessible set changed.
	AuthorizationChanged prometheus.Counter
	// AuxTruncated is buzz_channel_window_aux_truncated_total (counter):
	// channel-window aux closures cut at their page limit.
	AuxTruncated prometheus.Counter
	// RouteDecision is buzz_db_route_decision{path,route,reason} (counter):
	// where each window page was read, and why.
	RouteDecision *prometheus.CounterVec
}

func newWindow(reg prometheus.Registerer) Window {
	w := Window{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_window_requests_total", Help: "NIP-CW window requests, by mode and outcome."},
			[]string{"mode", "outcome"}),
		ThreadResponseBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "buzz_thread_window_response_bytes", Help: "Response bytes per served thread window.",
			Buckets: ResponseBytesBuckets}),
		BudgetExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_thread_window_budget_exhausted_total", Help: "Thread-window batches failed by a budget, deadline or database timeout."},
			[]string{"budget"}),
		AuthorizationChanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_thread_window_authorization_changed_total", Help: "Thread-window batches failed because the reader's accessible channels changed."}),
		AuxTruncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_channel_window_aux_truncated_total", Help: "Channel-window aux closures cut at their page limit."}),
		RouteDecision: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_db_route_decision", Help: "Where each window page was read, and why."},
			[]string{"path", "route", "reason"}),
	}
	for _, m := range WindowModes {
		for _, o := range WindowOutcomes {
			w.Requests.WithLabelValues(m, o)
		}
	}
	for _, b := range WindowBudgets {
		w.BudgetExhausted.WithLabelValues(b)
	}
	if reg != nil {
		reg.MustRegister(w.Requests, w.ThreadResponseBytes, w.BudgetExhausted, w.AuthorizationChanged, w.AuxTruncated, w.RouteDecision)
	}
	return w
}
