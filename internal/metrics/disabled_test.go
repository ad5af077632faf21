package metrics

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// collectorFields returns every exported prometheus field of v (a struct),
// descending into nested metric structs (Audit, Search, PubSub, Replica).
func collectorFields(t *testing.T, v reflect.Value, prefix string) map[string]reflect.Value {
	t.Helper()
	out := map[string]reflect.Value{}
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		if f.Kind() == reflect.Struct {
			for k, nested := range collectorFields(t, f, prefix+sf.Name+".") {
				out[k] = nested
			}
			continue
		}
		out[prefix+sf.Name] = f
	}
	return out
}

func TestDisabled(t *testing.T) {
	t.Parallel()

	for name, build := range map[string]func() *Metrics{"Disabled": Disabled, "NewNil": func() *Metrics { return New(nil) }} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := build()
			fields := collectorFields(t, reflect.ValueOf(m).Elem(), "")
			require.NotEmpty(t, fields)
			for field, f := range fields {
				require.False(t, f.IsNil(), "%s is nil: call sites would have to check", field)
				_, ok := f.Interface().(prometheus.Collector)
				require.True(t, ok, "%s is not a collector", field)
			}

			// Every method and field works as on a registered set.
			m.InitCommunity("localhost:3000")
			m.InitHTTPAction("POST /events")
			m.SetPoolStatsFunc(func() (size, idle, active, max int32) { return 1, 1, 0, 4 })
			m.EventsStored.WithLabelValues(KindLabel(9)).Inc()
			m.EventProcessingSeconds.Observe(0.01)
			m.Audit.Suppressed.WithLabelValues("auth_failure").Inc()
			m.Search.Requests.WithLabelValues("ws", "ok").Inc()
			m.PubSub.Connected.Set(1)
			m.PubSub.ControlMessages.WithLabelValues("evict", "sent").Inc()
			setReplicaGauges(m)
			m.Replica.Degraded.Inc()
			m.AuditSendErrors.Inc()
			require.Equal(t, 1.0, testutil.ToFloat64(m.EventsStored.WithLabelValues("9")))
			require.Equal(t, 1.0, testutil.ToFloat64(m.Audit.SendErrors), "AuditSendErrors is Audit.SendErrors")
			require.Equal(t, 1.0, testutil.ToFloat64(m.PubSub.Connected))
		})
	}

	t.Run("RegisteredNowhere", func(t *testing.T) {
		t.Parallel()
		m := Disabled()
		m.WSConnectionsActive.Set(7)
		// Not on the default registry...
		families, err := prometheus.DefaultGatherer.Gather()
		require.NoError(t, err)
		for _, f := range families {
			require.False(t, strings.HasPrefix(f.GetName(), "buzz_"), "%s is on the default registry", f.GetName())
		}
		// ...and a registry of its own can still take a full set: nothing
		// Disabled built was claimed by another registry.
		reg := prometheus.NewPedanticRegistry()
		New(reg)
		require.Len(t, gather(t, reg)["buzz_ws_connections_active"].GetMetric(), 1)
		require.Zero(t, gather(t, reg)["buzz_ws_connections_active"].GetMetric()[0].GetGauge().GetValue())
	})

	t.Run("NotShared", func(t *testing.T) {
		t.Parallel()
		a, b := Disabled(), Disabled()
		a.WSBackpressureDisconnects.Inc()
		require.Equal(t, 1.0, testutil.ToFloat64(a.WSBackpressureDisconnects))
		require.Zero(t, testutil.ToFloat64(b.WSBackpressureDisconnects), "each Disabled() is its own set")
	})
}
