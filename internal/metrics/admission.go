package metrics

import "github.com/prometheus/client_golang/prometheus"

// Bounded label values of the admission metrics.
var (
	// AdmissionLimits are the values of buzz_admission_rejections_total's
	// limit label: the quotas of package admission.
	AdmissionLimits = []string{"messages", "api_calls", "ws_events", "channel_creates"}
)

// Admission holds the metrics of per-user admission (package admission).
// No label carries a pubkey or a community.
type Admission struct {
	// Rejections is buzz_admission_rejections_total{limit,transport}
	// (counter): requests refused past a quota; limit in AdmissionLimits,
	// transport in Transports.
	Rejections *prometheus.CounterVec
	// Fallback is buzz_admission_fallback_total (counter): charges counted
	// in this process because Redis did not answer.
	Fallback prometheus.Counter
	// RedisDown is buzz_admission_redis_down (gauge): 1 while the shared
	// counters in Redis are unreachable and this process counts alone.
	RedisDown prometheus.Gauge
}

func newAdmission(reg prometheus.Registerer) Admission {
	a := Admission{
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_admission_rejections_total",
			Help: "Requests refused past a per-user quota, by limit and transport."},
			[]string{"limit", "transport"}),
		Fallback: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_admission_fallback_total",
			Help: "Quota charges counted in this process because Redis did not answer."}),
		RedisDown: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_admission_redis_down",
			Help: "1 while the shared quota counters in Redis are unreachable and this process counts alone."}),
	}
	for _, l := range AdmissionLimits {
		for _, tr := range Transports {
			a.Rejections.WithLabelValues(l, tr)
		}
	}
	if reg != nil {
		reg.MustRegister(a.Rejections, a.Fallback, a.RedisDown)
	}
	return a
}
