package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Replica holds the read replica metrics of docs/PROTOCOL.md §16.7. Package replica
// moves all of them; the read engine counts through replica.Read.
//
// LagBytes and the read pool gauges have no series until a replica is
// configured (READ_DATABASE_URL), so their absence says "no replica"
// rather than 0; the two counters exist from New.
type Replica struct {
	// LagBytes is buzz_db_replica_lag_bytes (gauge): the writer's WAL
	// position minus the replica's replay position, measured by the probe.
	// A diagnostic only: the heartbeat row is the proof.
	LagBytes *OptionalGauge
	// Reads is buzz_db_replica_reads_total (counter): reads the replica
	// served.
	Reads prometheus.Counter
	// Degraded is buzz_db_read_session_degraded (counter): replica doubts
	// that sent a read back to the writer.
	Degraded prometheus.Counter

	pool *readPoolCollector
}

func newReplica(reg prometheus.Registerer) Replica {
	r := Replica{
		LagBytes: NewOptionalGauge(prometheus.GaugeOpts{
			Name: "buzz_db_replica_lag_bytes", Help: "Writer WAL position minus the read replica's replay position, in bytes (diagnostic)."}),
		Reads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_db_replica_reads_total", Help: "Reads served by the read replica."}),
		Degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_db_read_session_degraded", Help: "Replica doubts that sent a read back to the writer."}),
		pool: &readPoolCollector{
			size:    prometheus.NewDesc("buzz_db_read_pool_size", "Connections in the read replica pool, idle or in use.", nil, nil),
			idle:    prometheus.NewDesc("buzz_db_read_pool_idle", "Idle connections in the read replica pool.", nil, nil),
			active:  prometheus.NewDesc("buzz_db_read_pool_active", "Read replica pool connections in use.", nil, nil),
			maxConn: prometheus.NewDesc("buzz_db_read_pool_max", "Maximum size of the read replica pool.", nil, nil),
		},
	}
	if reg != nil {
		reg.MustRegister(r.LagBytes, r.Reads, r.Degraded, r.pool)
	}
	return r
}

// SetPoolStatsFunc sets the function read at every scrape to fill
// buzz_db_read_pool_size, _idle, _active and _max. Until it is set (no
// replica), and after it is set to nil, the four gauges have no series. It
// is called from the scraping goroutine and must be fast and safe for
// concurrent use (pgxpool's Stat is). It may be called at any time.
func (r *Replica) SetPoolStatsFunc(f func() (size, idle, active, max int32)) {
	r.pool.f.Store(&f)
}

// readPoolCollector exposes the read pool gauges from one call per scrape,
// and nothing while no function is set.
type readPoolCollector struct {
	f                           atomic.Pointer[func() (size, idle, active, max int32)]
	size, idle, active, maxConn *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *readPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.idle
	ch <- c.active
	ch <- c.maxConn
}

// Collect implements prometheus.Collector.
func (c *readPoolCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.f.Load()
	if f == nil || *f == nil {
		return
	}
	size, idle, active, maxConn := (*f)()
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(size))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(idle))
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(active))
	ch <- prometheus.MustNewConstMetric(c.maxConn, prometheus.GaugeValue, float64(maxConn))
}
