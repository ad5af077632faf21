package audit

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the audit series of spec 30 §9, registered by the caller
// (package metrics) and passed in. Every field may be nil.
type Metrics struct {
	SendErrors    prometheus.Counter     // buzz_audit_send_errors_total
	LogErrors     prometheus.Counter     // buzz_audit_log_errors_total
	LogSeconds    prometheus.Observer    // buzz_audit_log_seconds
	Appended      prometheus.Counter     // buzz_audit_appended_total
	OutboxPending prometheus.Gauge       // buzz_audit_outbox_pending
	OutboxLag     prometheus.Gauge       // buzz_audit_outbox_lag_seconds
	Suppressed    *prometheus.CounterVec // buzz_audit_suppressed_total{action}
}

func (m *Metrics) sendError() {
	if m != nil && m.SendErrors != nil {
		m.SendErrors.Inc()
	}
}

func (m *Metrics) suppressed(a Action) {
	if m != nil && m.Suppressed != nil {
		m.Suppressed.WithLabelValues(string(a)).Inc()
	}
}
