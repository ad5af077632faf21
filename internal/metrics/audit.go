package metrics

import "github.com/prometheus/client_golang/prometheus"

// AuditActions are the values of buzz_audit_suppressed_total's action label:
// the sampled observational actions of docs/PROTOCOL.md §13.4.
var AuditActions = []string{"auth_failure", "rate_limit_exceeded", "auth_success"}

// Audit holds the metrics of docs/PROTOCOL.md §13.9. Package audit receives them as its
// own Metrics struct (server copies the fields), so it needs no import of
// this package.
type Audit struct {
	// Enabled is buzz_audit_enabled (gauge): 1 or 0, from BUZZ_AUDIT_ENABLED.
	Enabled prometheus.Gauge
	// SendErrors is buzz_audit_send_errors_total (counter): intents that could
	// not be written to the outbox.
	SendErrors prometheus.Counter
	// LogErrors is buzz_audit_log_errors_total (counter): chainer batches rolled back.
	LogErrors prometheus.Counter
	// LogSeconds is buzz_audit_log_seconds (histogram): one chainer batch, lock to commit.
	LogSeconds prometheus.Histogram
	// Appended is buzz_audit_appended_total (counter): entries appended by this process.
	Appended prometheus.Counter
	// OutboxPending is buzz_audit_outbox_pending (gauge): intents waiting, all communities.
	OutboxPending prometheus.Gauge
	// OutboxLag is buzz_audit_outbox_lag_seconds (gauge): age of the oldest
	// pending intent, 0 when none.
	OutboxLag prometheus.Gauge
	// Suppressed is buzz_audit_suppressed_total{action} (counter): sampled
	// observations not written individually.
	Suppressed *prometheus.CounterVec
}

func newAudit(reg prometheus.Registerer) Audit {
	a := Audit{
		Enabled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_audit_enabled", Help: "1 when BUZZ_AUDIT_ENABLED is on, else 0."}),
		SendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_audit_send_errors_total", Help: "Audit intents that could not be written to the outbox."}),
		LogErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_audit_log_errors_total", Help: "Audit chainer batches rolled back."}),
		LogSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "buzz_audit_log_seconds", Help: "One audit chainer batch, from lock to commit.", Buckets: SecondsBuckets}),
		Appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_audit_appended_total", Help: "Audit entries appended by this process."}),
		OutboxPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_audit_outbox_pending", Help: "Audit intents waiting to be chained, all communities."}),
		OutboxLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_audit_outbox_lag_seconds", Help: "Age of the oldest pending audit intent, 0 when none."}),
		Suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_audit_suppressed_total", Help: "Sampled audit observations not written individually."}, []string{"action"}),
	}
	if reg == nil {
		return a
	}
	reg.MustRegister(a.Enabled, a.SendErrors, a.LogErrors, a.LogSeconds, a.Appended, a.OutboxPending, a.OutboxLag, a.Suppressed)
	for _, action := range AuditActions {
		a.Suppressed.WithLabelValues(action)
	}
	return a
}
