package metrics

import "github.com/prometheus/client_golang/prometheus"

// Bounded label values of the read deadline and share metrics
// (docs/OPERATIONS.md "Running a public relay").
var (
	// ReadSurfaces are the values of buzz_read_timeouts_total's surface
	// label: the read door's five surfaces.
	ReadSurfaces = []string{"req", "count", "query", "count_http", "neg"}
	// ReadShareScopes are the values of
	// buzz_read_share_rejections_total's scope label.
	ReadShareScopes = []string{"process", "connection", "pubkey", "read_time"}
	// HTTPRejectReasons are the values of buzz_http_rejections_total's
	// reason label.
	HTTPRejectReasons = []string{"busy", "address_connections"}
)

// Reads holds the metrics of the read deadlines and shares and of the HTTP
// server's admission.
type Reads struct {
	// Timeouts is buzz_read_timeouts_total{surface} (counter): reads that
	// passed their deadline (BUZZ_READ_STATEMENT_TIMEOUT_MS) or whose
	// statement the server cancelled.
	Timeouts *prometheus.CounterVec
	// InFlight is buzz_reads_in_flight (gauge): database connections held
	// by reads in this process.
	InFlight prometheus.Gauge
	// ShareRejections is buzz_read_share_rejections_total{scope}
	// (counter): reads refused because a share stayed full for the
	// acquire timeout, by the share that was full, or ("read_time")
	// because the reader's read-time budget was spent.
	ShareRejections *prometheus.CounterVec
	// HTTPRejections is buzz_http_rejections_total{reason} (counter): HTTP
	// requests refused before they were served: the bridge at
	// BUZZ_HTTP_MAX_CONCURRENT ("busy"), a WebSocket upgrade over
	// BUZZ_MAX_CONNECTIONS_PER_ADDRESS ("address_connections").
	HTTPRejections *prometheus.CounterVec
}

func newReads(reg prometheus.Registerer) Reads {
	r := Reads{
		Timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_read_timeouts_total", Help: "Reads that passed their deadline, by surface."}, []string{"surface"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_reads_in_flight", Help: "Database connections held by reads in this process."}),
		ShareRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_read_share_rejections_total", Help: "Reads refused because a share stayed full or the read-time budget was spent, by share."}, []string{"scope"}),
		HTTPRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_http_rejections_total", Help: "HTTP requests refused before they were served, by reason."}, []string{"reason"}),
	}
	if reg == nil {
		return r
	}
	reg.MustRegister(r.Timeouts, r.InFlight, r.ShareRejections, r.HTTPRejections)
	for _, s := range ReadSurfaces {
		r.Timeouts.WithLabelValues(s)
	}
	for _, s := range ReadShareScopes {
		r.ShareRejections.WithLabelValues(s)
	}
	for _, s := range HTTPRejectReasons {
		r.HTTPRejections.WithLabelValues(s)
	}
	return r
}
