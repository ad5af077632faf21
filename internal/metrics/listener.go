package metrics

import "github.com/prometheus/client_golang/prometheus"

// Bounded label values of the operator-listener metrics (docs/PROTOCOL.md §15.9).
var (
	// ListenerOutcomes are the values of
	// buzz_operator_listener_deliveries_total's outcome label.
	ListenerOutcomes = []string{"accepted", "retry", "failed"}
	// ListenerTables are the values of buzz_operator_listener_reaped_total's
	// table label.
	ListenerTables = []string{"outbox", "pubkeys"}
	// ListenerStates are the values of buzz_operator_listener_outbox_rows's
	// state label.
	ListenerStates = []string{"pending", "sending"}
)

// Listener holds the operator-listener metrics of docs/PROTOCOL.md §15.9. The
// delivery worker and the reapers move them, except Enqueued, which the
// ingest pipeline moves. No label carries a pubkey, URL or host.
type Listener struct {
	// Deliveries is buzz_operator_listener_deliveries_total{outcome}
	// (counter): delivery attempts by what became of the row: accepted
	// (2xx, deleted), retry (put back for a later attempt) and failed
	// (deleted without delivery: terminal answer or retries exhausted).
	Deliveries *prometheus.CounterVec
	// Enqueued is buzz_operator_listener_enqueued_total (counter): outbox
	// rows created.
	Enqueued prometheus.Counter
	// DeliverySeconds is buzz_operator_listener_delivery_seconds
	// (histogram): duration of each notification POST.
	DeliverySeconds prometheus.Histogram
	// ClaimErrors is buzz_operator_listener_claim_errors_total (counter):
	// failed outbox claims.
	ClaimErrors prometheus.Counter
	// Reaped is buzz_operator_listener_reaped_total{table} (counter): rows
	// the reapers deleted, table outbox or pubkeys.
	Reaped *prometheus.CounterVec
	// OutboxRows is buzz_operator_listener_outbox_rows{state} (gauge):
	// outbox rows by state (pending, sending), sampled at each outbox reap.
	OutboxRows *prometheus.GaugeVec
}

func newListener(reg prometheus.Registerer) Listener {
	l := Listener{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_operator_listener_deliveries_total", Help: "Operator-listener delivery attempts, by outcome."},
			[]string{"outcome"}),
		Enqueued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_operator_listener_enqueued_total", Help: "Operator-listener outbox rows created."}),
		DeliverySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "buzz_operator_listener_delivery_seconds", Help: "Duration of each operator-listener notification POST.",
			Buckets: SecondsBuckets}),
		ClaimErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_operator_listener_claim_errors_total", Help: "Failed operator-listener outbox claims."}),
		Reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_operator_listener_reaped_total", Help: "Operator-listener rows deleted by the reapers, by table."},
			[]string{"table"}),
		OutboxRows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "buzz_operator_listener_outbox_rows", Help: "Operator-listener outbox rows by state, sampled at each outbox reap."},
			[]string{"state"}),
	}
	for _, o := range ListenerOutcomes {
		l.Deliveries.WithLabelValues(o)
	}
	for _, t := range ListenerTables {
		l.Reaped.WithLabelValues(t)
	}
	for _, s := range ListenerStates {
		l.OutboxRows.WithLabelValues(s)
	}
	if reg != nil {
		reg.MustRegister(l.Deliveries, l.Enqueued, l.DeliverySeconds, l.ClaimErrors, l.Reaped, l.OutboxRows)
	}
	return l
}
