package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// specNames lists every metric of docs/PROTOCOL.md §11.2 with its type.
var specNames = map[string]dto.MetricType{
	"buzz_ws_connections_active":                    dto.MetricType_GAUGE,
	"buzz_ws_connections_total":                     dto.MetricType_COUNTER,
	"buzz_ws_backpressure_disconnects_total":        dto.MetricType_COUNTER,
	"buzz_ws_auth_timeouts_total":                   dto.MetricType_COUNTER,
	"buzz_subscriptions_active":                     dto.MetricType_GAUGE,
	"buzz_events_received_total":                    dto.MetricType_COUNTER,
	"buzz_events_stored_total":                      dto.MetricType_COUNTER,
	"buzz_events_rejected_total":                    dto.MetricType_COUNTER,
	"buzz_event_processing_seconds":                 dto.MetricType_HISTOGRAM,
	"buzz_fanout_recipients":                        dto.MetricType_HISTOGRAM,
	"buzz_fanout_queued":                            dto.MetricType_GAUGE,
	"buzz_post_commit_dispatch_errors_total":        dto.MetricType_COUNTER,
	"buzz_ingest_group_commit_events":               dto.MetricType_HISTOGRAM,
	"buzz_ingest_group_commit_seconds":              dto.MetricType_HISTOGRAM,
	"buzz_ingest_group_commit_retries_total":        dto.MetricType_COUNTER,
	"buzz_ingest_group_commit_second_batches_total": dto.MetricType_COUNTER,
	"buzz_ingest_poster_checks_total":               dto.MetricType_COUNTER,
	// the filter caps (docs/OPERATIONS.md, Filter caps)
	"buzz_filter_cap_refusals_total": dto.MetricType_COUNTER,
	// the per-address connection rate (docs/OPERATIONS.md, Connection storms)
	"buzz_ws_connect_rate_limited_total": dto.MetricType_COUNTER,
	"buzz_ws_messages_sent_total":        dto.MetricType_COUNTER,
	"buzz_ws_socket_writes_total":        dto.MetricType_COUNTER,
	// per-user admission (admission.go)
	"buzz_admission_rejections_total":             dto.MetricType_COUNTER,
	"buzz_admission_fallback_total":               dto.MetricType_COUNTER,
	"buzz_admission_redis_down":                   dto.MetricType_GAUGE,
	"buzz_auth_attempts_total":                    dto.MetricType_COUNTER,
	"buzz_auth_failures_total":                    dto.MetricType_COUNTER,
	"buzz_membership_cache_hits_total":            dto.MetricType_COUNTER,
	"buzz_membership_cache_misses_total":          dto.MetricType_COUNTER,
	"buzz_accessible_channels_cache_hits_total":   dto.MetricType_COUNTER,
	"buzz_accessible_channels_cache_misses_total": dto.MetricType_COUNTER,
	"buzz_accessible_channels_renewals_total":     dto.MetricType_COUNTER,
	"buzz_count_fallback_rejections_total":        dto.MetricType_COUNTER,
	"buzz_channels_created_total":                 dto.MetricType_COUNTER,
	"buzz_partition_maintenance_errors_total":     dto.MetricType_COUNTER,
	"buzz_db_pool_size":                           dto.MetricType_GAUGE,
	"buzz_db_pool_idle":                           dto.MetricType_GAUGE,
	"buzz_db_pool_active":                         dto.MetricType_GAUGE,
	"buzz_db_pool_max":                            dto.MetricType_GAUGE,
	"http_requests_total":                         dto.MetricType_COUNTER,
	"http_request_latency_ms":                     dto.MetricType_HISTOGRAM,
	// the read deadlines and shares (docs/OPERATIONS.md, Running a public relay)
	"buzz_read_timeouts_total":         dto.MetricType_COUNTER,
	"buzz_reads_in_flight":             dto.MetricType_GAUGE,
	"buzz_read_share_rejections_total": dto.MetricType_COUNTER,
	"buzz_http_rejections_total":       dto.MetricType_COUNTER,
	// docs/PROTOCOL.md §13.9
	"buzz_audit_enabled":            dto.MetricType_GAUGE,
	"buzz_audit_send_errors_total":  dto.MetricType_COUNTER,
	"buzz_audit_log_errors_total":   dto.MetricType_COUNTER,
	"buzz_audit_log_seconds":        dto.MetricType_HISTOGRAM,
	"buzz_audit_appended_total":     dto.MetricType_COUNTER,
	"buzz_audit_outbox_pending":     dto.MetricType_GAUGE,
	"buzz_audit_outbox_lag_seconds": dto.MetricType_GAUGE,
	"buzz_audit_suppressed_total":   dto.MetricType_COUNTER,
	// docs/PROTOCOL.md §12.9
	"buzz_search_requests_total": dto.MetricType_COUNTER,
	"buzz_search_query_seconds":  dto.MetricType_HISTOGRAM,
	"buzz_search_hits_total":     dto.MetricType_COUNTER,
	// docs/PROTOCOL.md §16.7, the pub/sub half
	"buzz_pubsub_connected":                       dto.MetricType_GAUGE,
	"buzz_pubsub_reconnects_total":                dto.MetricType_COUNTER,
	"buzz_pubsub_publish_errors_total":            dto.MetricType_COUNTER,
	"buzz_pubsub_topics_subscribed":               dto.MetricType_GAUGE,
	"buzz_pubsub_messages_received_total":         dto.MetricType_COUNTER,
	"buzz_pubsub_echo_skipped_total":              dto.MetricType_COUNTER,
	"buzz_pubsub_invalid_messages_total":          dto.MetricType_COUNTER,
	"buzz_pubsub_presence_errors_total":           dto.MetricType_COUNTER,
	"buzz_multinode_fanout_total":                 dto.MetricType_COUNTER,
	"buzz_multinode_fanout_lag_total":             dto.MetricType_COUNTER,
	"buzz_control_messages_total":                 dto.MetricType_COUNTER,
	"buzz_pubsub_barrier_timeouts_total":          dto.MetricType_COUNTER,
	"buzz_pubsub_interrupted_subscriptions_total": dto.MetricType_COUNTER,
	// docs/PROTOCOL.md §14.8
	"buzz_read_state_writes_total":           dto.MetricType_COUNTER,
	"buzz_read_state_payloads_deleted_total": dto.MetricType_COUNTER,
	"buzz_read_state_fence_errors_total":     dto.MetricType_COUNTER,
	// docs/PROTOCOL.md §16.7, the replica half
	"buzz_db_replica_lag_bytes":     dto.MetricType_GAUGE,
	"buzz_db_replica_reads_total":   dto.MetricType_COUNTER,
	"buzz_db_read_session_degraded": dto.MetricType_COUNTER,
	"buzz_db_read_pool_size":        dto.MetricType_GAUGE,
	"buzz_db_read_pool_idle":        dto.MetricType_GAUGE,
	"buzz_db_read_pool_active":      dto.MetricType_GAUGE,
	"buzz_db_read_pool_max":         dto.MetricType_GAUGE,
	// docs/PROTOCOL.md §15.9
	"buzz_operator_listener_deliveries_total":   dto.MetricType_COUNTER,
	"buzz_operator_listener_enqueued_total":     dto.MetricType_COUNTER,
	"buzz_operator_listener_delivery_seconds":   dto.MetricType_HISTOGRAM,
	"buzz_operator_listener_claim_errors_total": dto.MetricType_COUNTER,
	"buzz_operator_listener_reaped_total":       dto.MetricType_COUNTER,
	"buzz_operator_listener_outbox_rows":        dto.MetricType_GAUGE,
	// docs/PROTOCOL.md §11.2, the NIP-CW windows
	"buzz_window_requests_total":                     dto.MetricType_COUNTER,
	"buzz_thread_window_response_bytes":              dto.MetricType_HISTOGRAM,
	"buzz_thread_window_budget_exhausted_total":      dto.MetricType_COUNTER,
	"buzz_thread_window_authorization_changed_total": dto.MetricType_COUNTER,
	"buzz_channel_window_aux_truncated_total":        dto.MetricType_COUNTER,
	"buzz_db_route_decision":                         dto.MetricType_COUNTER,
	// docs/OPERATIONS.md "Hot window"
	"buzz_hot_window_events":       dto.MetricType_GAUGE,
	"buzz_hot_window_bytes":        dto.MetricType_GAUGE,
	"buzz_hot_window_on":           dto.MetricType_GAUGE,
	"buzz_hot_window_reads_total":  dto.MetricType_COUNTER,
	"buzz_hot_window_resets_total": dto.MetricType_COUNTER,
	"buzz_hot_window_warms_total":  dto.MetricType_COUNTER,
	// docs/OPERATIONS.md "Search cache"
	"buzz_search_cache_total": dto.MetricType_COUNTER,
	"buzz_search_cache_bytes": dto.MetricType_GAUGE,
}

// needsInit are the metrics whose labels have no values until InitCommunity
// or InitHTTPAction (or first use), buzz_pubsub_connected, which has no
// series until a Redis bus sets it, and the replica gauges, which have none
// until a replica is configured.
var needsInit = append([]string{"buzz_ws_connections_total", "buzz_channels_created_total", "http_requests_total", "http_request_latency_ms",
	"buzz_pubsub_connected", "buzz_db_route_decision"}, replicaGauges...)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

func setup(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	return New(reg), reg
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("EveryNameAfterStartup", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		m.InitCommunity("localhost:3000")
		m.InitHTTPAction("POST /events")
		m.PubSub.Connected.Set(0)
		setReplicaGauges(m)
		m.Window.RouteDecision.WithLabelValues("thread_window_cursor", "writer", "not_configured").Inc()
		got := gather(t, reg)
		for name, typ := range specNames {
			require.Contains(t, got, name)
			require.Equal(t, typ, got[name].GetType(), name)
		}
		require.Len(t, got, len(specNames), "no metric beyond those of docs/PROTOCOL.md §11.2, §12.9, §13.9, §14.8, §15.9 and §16.7, the group commit, the poster checks, the filter caps, the per-address connection rate, the socket writes, per-user admission, the read limits and the search cache")
	})

	t.Run("BoundedLabelsPresentFromNew", func(t *testing.T) {
		t.Parallel()
		_, reg := setup(t)
		got := gather(t, reg)
		for name := range specNames {
			if slices.Contains(needsInit, name) {
				require.NotContains(t, got, name)
				continue
			}
			require.Contains(t, got, name)
		}
		require.Len(t, got["buzz_events_rejected_total"].GetMetric(), len(RejectReasons)*len(Transports))
		require.Len(t, got["buzz_auth_attempts_total"].GetMetric(), 2)
		require.Len(t, got["buzz_auth_failures_total"].GetMetric(), 5)
		require.Len(t, got["buzz_events_stored_total"].GetMetric(), len(acceptedKinds)+2)
		require.Len(t, got["buzz_pubsub_publish_errors_total"].GetMetric(), 3)
		require.Len(t, got["buzz_pubsub_messages_received_total"].GetMetric(), len(PubSubReceiveTopics))
		require.Len(t, got["buzz_control_messages_total"].GetMetric(), len(ControlOps)*2)
		require.Len(t, got["buzz_operator_listener_deliveries_total"].GetMetric(), 3)
		require.Len(t, got["buzz_operator_listener_reaped_total"].GetMetric(), 2)
		require.Len(t, got["buzz_operator_listener_outbox_rows"].GetMetric(), 2)
	})

	t.Run("Buckets", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		m.InitHTTPAction("GET /")
		got := gather(t, reg)
		bounds := func(name string) []float64 {
			var out []float64
			for _, b := range got[name].GetMetric()[0].GetHistogram().GetBucket() {
				out = append(out, b.GetUpperBound())
			}
			return out
		}
		require.Equal(t, []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}, bounds("buzz_event_processing_seconds"))
		require.Equal(t, []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}, bounds("http_request_latency_ms"))
		require.Equal(t, []float64{0, 1, 5, 10, 25, 50, 100, 500, 1000}, bounds("buzz_fanout_recipients"))
	})

	t.Run("Exposition", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		m.EventsStored.WithLabelValues(KindLabel(9)).Inc()
		m.EventsRejected.WithLabelValues("invalid", "http").Inc()
		m.WSConnectionsActive.Set(3)
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP buzz_ws_connections_active Open WebSocket connections past the AUTH challenge.
# TYPE buzz_ws_connections_active gauge
buzz_ws_connections_active 3
`), "buzz_ws_connections_active"))
		require.Equal(t, 1.0, testutil.ToFloat64(m.EventsStored.WithLabelValues("9")))
		require.Equal(t, 0.0, testutil.ToFloat64(m.EventsStored.WithLabelValues("1")))
		require.Equal(t, 1.0, testutil.ToFloat64(m.EventsRejected.WithLabelValues("invalid", "http")))
	})

	t.Run("TwiceOnOneRegistryPanics", func(t *testing.T) {
		t.Parallel()
		_, reg := setup(t)
		require.Panics(t, func() { New(reg) })
	})
}

func TestPoolStats(t *testing.T) {
	t.Parallel()

	value := func(t *testing.T, reg *prometheus.Registry, name string) float64 {
		t.Helper()
		return gather(t, reg)[name].GetMetric()[0].GetGauge().GetValue()
	}

	t.Run("ZeroUntilSet", func(t *testing.T) {
		t.Parallel()
		_, reg := setup(t)
		for _, name := range []string{"buzz_db_pool_size", "buzz_db_pool_idle", "buzz_db_pool_active", "buzz_db_pool_max"} {
			require.Zero(t, value(t, reg, name))
		}
	})

	t.Run("ReadOncePerScrape", func(t *testing.T) {
		t.Parallel()
		m, reg := setup(t)
		calls := 0
		m.SetPoolStatsFunc(func() (size, idle, active, max int32) {
			calls++
			return 10, 4, 6, 50
		})
		got := gather(t, reg)
		require.Equal(t, 1, calls)
		require.Equal(t, 10.0, got["buzz_db_pool_size"].GetMetric()[0].GetGauge().GetValue())
		require.Equal(t, 4.0, got["buzz_db_pool_idle"].GetMetric()[0].GetGauge().GetValue())
		require.Equal(t, 6.0, got["buzz_db_pool_active"].GetMetric()[0].GetGauge().GetValue())
		require.Equal(t, 50.0, got["buzz_db_pool_max"].GetMetric()[0].GetGauge().GetValue())

		m.SetPoolStatsFunc(nil)
		require.Zero(t, value(t, reg, "buzz_db_pool_max"))
	})
}

func TestKindLabel(t *testing.T) {
	t.Parallel()
	tests := map[int]string{
		0: "0", 1: "1", 9: "9", 1059: "1059", 9007: "9007", 10100: "10100", 30174: "30174",
		45003: "45003", 39000: "39000", 39002: "39002", 44100: "44100", 44101: "44101",
		20001: "20001", 20002: "20002",
		20000: "ephemeral", 20003: "ephemeral", 22242: "ephemeral", 29999: "ephemeral",
		2: "other", 1984: "other", 9030: "other", 30001: "other", 39005: "other", 48002: "other",
		-1: "other", 30000000: "other",
	}
	for kind, want := range tests {
		require.Equal(t, want, KindLabel(kind), "kind %d", kind)
	}
	for _, k := range acceptedKinds {
		require.NotContains(t, []string{"ephemeral", "other"}, KindLabel(k))
	}
}
