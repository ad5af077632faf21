package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestPubSub(t *testing.T) {
	t.Parallel()

	t.Run("ConnectedAbsentUntilSet", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		require.NotContains(t, gather(t, reg), "buzz_pubsub_connected", "no series without Redis")
		m.PubSub.Connected.Set(0)
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP buzz_pubsub_connected 1 while the Redis subscription connection is up, else 0.
# TYPE buzz_pubsub_connected gauge
buzz_pubsub_connected 0
`), "buzz_pubsub_connected"))
		m.PubSub.Connected.Set(1)
		require.Equal(t, 1.0, gather(t, reg)["buzz_pubsub_connected"].GetMetric()[0].GetGauge().GetValue())
	})

	t.Run("LabelsPresentFromNew", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		got := gather(t, reg)
		var ops []string
		for _, metric := range got["buzz_control_messages_total"].GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["direction"] == "sent" {
				ops = append(ops, labels["op"])
			}
		}
		require.ElementsMatch(t, ControlOps, ops)
		m.PubSub.PublishErrors.WithLabelValues("control").Inc()
		require.Equal(t, 1.0, testutil.ToFloat64(m.PubSub.PublishErrors.WithLabelValues("control")))
		require.Zero(t, testutil.ToFloat64(m.PubSub.PublishErrors.WithLabelValues("channel")))
	})

	t.Run("OptionalGaugeOnPedanticRegistry", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewPedanticRegistry()
		g := NewOptionalGauge(prometheus.GaugeOpts{Name: "x_gauge", Help: "x."})
		reg.MustRegister(g)
		families, err := reg.Gather()
		require.NoError(t, err)
		require.Empty(t, families)
		g.Set(2)
		require.Equal(t, 2.0, testutil.ToFloat64(g))
	})
}
