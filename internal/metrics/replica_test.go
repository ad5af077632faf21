package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// replicaGauges have no series until a replica is configured.
var replicaGauges = []string{"buzz_db_replica_lag_bytes", "buzz_db_read_pool_size", "buzz_db_read_pool_idle",
	"buzz_db_read_pool_active", "buzz_db_read_pool_max"}

// setReplicaGauges does what a configured replica does at start.
func setReplicaGauges(m *Metrics) {
	m.Replica.LagBytes.Set(0)
	m.Replica.SetPoolStatsFunc(func() (size, idle, active, max int32) { return 0, 0, 0, 0 })
}

func TestReplica(t *testing.T) {
	t.Parallel()

	t.Run("GaugesAbsentWithoutReplica", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		got := gather(t, reg)
		for _, name := range replicaGauges {
			require.NotContains(t, got, name)
		}
		require.Contains(t, got, "buzz_db_replica_reads_total")
		require.Contains(t, got, "buzz_db_read_session_degraded")
		m.Replica.Reads.Inc()
		m.Replica.Degraded.Inc()
		require.Equal(t, 1.0, testutil.ToFloat64(m.Replica.Reads))
		require.Equal(t, 1.0, testutil.ToFloat64(m.Replica.Degraded))
	})

	t.Run("PoolReadOncePerScrape", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		calls := 0
		m.Replica.SetPoolStatsFunc(func() (size, idle, active, max int32) {
			calls++
			return 5, 2, 3, 20
		})
		m.Replica.LagBytes.Set(4096)
		got := gather(t, reg)
		require.Equal(t, 1, calls)
		for name, want := range map[string]float64{"buzz_db_read_pool_size": 5, "buzz_db_read_pool_idle": 2,
			"buzz_db_read_pool_active": 3, "buzz_db_read_pool_max": 20, "buzz_db_replica_lag_bytes": 4096} {
			require.Equal(t, want, got[name].GetMetric()[0].GetGauge().GetValue(), name)
		}
		// The writer pool's gauges are not the read pool's.
		require.Zero(t, got["buzz_db_pool_size"].GetMetric()[0].GetGauge().GetValue())
		m.Replica.SetPoolStatsFunc(nil)
		require.NotContains(t, gather(t, reg), "buzz_db_read_pool_max")
	})
}
