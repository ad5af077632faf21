package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReadStateOutcomes are the values of buzz_read_state_writes_total's
// outcome label (docs/PROTOCOL.md §14.8).
var ReadStateOutcomes = []string{"inserted", "dominated", "duplicate", "stale_db"}

// ReadState holds the NIP-RS read-state metrics of docs/PROTOCOL.md §14.8. The ingest
// pipeline moves them.
type ReadState struct {
	// Writes is buzz_read_state_writes_total{outcome} (counter): conforming
	// read-state events by outcome: inserted, dominated (lost to the live
	// head or the watermark), duplicate (the exact watermark tuple) and
	// stale_db (the database's watermark trigger refused it).
	Writes *prometheus.CounterVec
	// PayloadsDeleted is buzz_read_state_payloads_deleted_total (counter):
	// superseded read-state rows physically deleted by a replacement.
	PayloadsDeleted prometheus.Counter
	// FenceErrors is buzz_read_state_fence_errors_total (counter): the
	// hard-delete fence refused one of this relay's deletes. Must stay 0.
	FenceErrors prometheus.Counter
}

func newReadState(reg prometheus.Registerer) ReadState {
	r := ReadState{
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_read_state_writes_total", Help: "NIP-RS read-state writes, by outcome."}, []string{"outcome"}),
		PayloadsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_read_state_payloads_deleted_total", Help: "Superseded NIP-RS read-state rows physically deleted."}),
		FenceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_read_state_fence_errors_total", Help: "NIP-RS hard-delete fence errors seen by this relay (must stay 0)."}),
	}
	for _, o := range ReadStateOutcomes {
		r.Writes.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(r.Writes, r.PayloadsDeleted, r.FenceErrors)
	}
	return r
}
