package audit

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the audit series of docs/PROTOCOL.md §13.9, registered by the caller
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

func (m *Metrics) logError() {
	if m != nil && m.LogErrors != nil {
		m.LogErrors.Inc()
	}
}

// batchChained records one committed batch of n entries that took d.
func (m *Metrics) batchChained(d time.Duration, n int) {
	if m == nil {
		return
	}
	if m.LogSeconds != nil {
		m.LogSeconds.Observe(d.Seconds())
	}
	if m.Appended != nil {
		m.Appended.Add(float64(n))
	}
}

// wantsGauges reports whether an outbox gauge is set, so the chainer can
// skip the query that feeds them.
func (m *Metrics) wantsGauges() bool {
	return m != nil && (m.OutboxPending != nil || m.OutboxLag != nil)
}

func (m *Metrics) setGauges(pending int64, lag time.Duration) {
	if m == nil {
		return
	}
	if m.OutboxPending != nil {
		m.OutboxPending.Set(float64(pending))
	}
	if m.OutboxLag != nil {
		m.OutboxLag.Set(lag.Seconds())
	}
}
