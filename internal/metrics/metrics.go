package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets of docs/PROTOCOL.md §11.2.
var (
	// SecondsBuckets are the buckets of every *_seconds histogram.
	SecondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}
	// LatencyMsBuckets are the buckets of http_request_latency_ms.
	LatencyMsBuckets = []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
	// FanoutBuckets are the buckets of buzz_fanout_recipients.
	FanoutBuckets = []float64{0, 1, 5, 10, 25, 50, 100, 500, 1000}
)

// Bounded label values. New pre-initialises every combination of these, so
// the series exist (at 0) from the first scrape.
var (
	// RejectReasons are the values of buzz_events_rejected_total's reason label.
	RejectReasons = []string{"auth", "invalid", "restricted", "duplicate", "rate-limited", "error"}
	// Transports are the values of buzz_events_rejected_total's transport label.
	Transports = []string{"ws", "http"}
	// AuthMethods are the values of buzz_auth_attempts_total's method label.
	AuthMethods = []string{"nip42", "nip98"}
	// AuthFailureReasons are the values of buzz_auth_failures_total's reason label.
	AuthFailureReasons = []string{"nip42_invalid", "not_relay_member", "nip98_invalid", "nip98_replay", "timeout"}
	// ChannelTypes are the values of buzz_channels_created_total's type label.
	ChannelTypes = []string{"stream", "forum"}
)

// Metrics holds every metric of docs/PROTOCOL.md §11.2. Create it once with New and
// share it; all fields are safe for concurrent use.
//
// Label values that are not bounded in advance appear only once used or
// initialised: the community label (InitCommunity does it for a host) and the
// code and action labels of the HTTP metrics (InitHTTPAction). All other
// labelled series exist from New on.
type Metrics struct {
	// WSConnectionsActive is buzz_ws_connections_active (gauge): open
	// WebSockets past the AUTH challenge. The autoscaling signal.
	WSConnectionsActive prometheus.Gauge
	// WSConnectionsTotal is buzz_ws_connections_total{community} (counter):
	// accepted WebSockets, by tenant host.
	WSConnectionsTotal *prometheus.CounterVec
	// WSBackpressureDisconnects is buzz_ws_backpressure_disconnects_total
	// (counter): slow clients closed.
	WSBackpressureDisconnects prometheus.Counter
	// WSMessagesSent is buzz_ws_messages_sent_total (counter): WebSocket
	// messages written, and WSSocketWrites buzz_ws_socket_writes_total
	// (counter): the socket writes that carried them. A drained queue goes
	// out in one write, so the ratio is the messages per write.
	WSMessagesSent, WSSocketWrites prometheus.Counter
	// WSConnectRateLimited is buzz_ws_connect_rate_limited_total (counter):
	// upgrades refused 429 by the per-address connection rate.
	WSConnectRateLimited prometheus.Counter
	// WSAuthTimeouts is buzz_ws_auth_timeouts_total (counter): connections
	// closed for not authenticating.
	WSAuthTimeouts prometheus.Counter
	// SubscriptionsActive is buzz_subscriptions_active (gauge): live
	// subscriptions.
	SubscriptionsActive prometheus.Gauge
	// EventsReceived is buzz_events_received_total{kind} (counter): EVENTs
	// received through both doors. Use KindLabel for the label.
	EventsReceived *prometheus.CounterVec
	// EventsStored is buzz_events_stored_total{kind} (counter): events newly
	// committed. Use KindLabel for the label.
	EventsStored *prometheus.CounterVec
	// EventsRejected is buzz_events_rejected_total{reason,transport}
	// (counter): refusals; reason in RejectReasons, transport in Transports.
	EventsRejected *prometheus.CounterVec
	// EventProcessingSeconds is buzz_event_processing_seconds (histogram):
	// EVENT received → OK queued.
	EventProcessingSeconds prometheus.Histogram
	// FanoutRecipients is buzz_fanout_recipients (histogram): subscriptions
	// an event was sent to.
	FanoutRecipients prometheus.Histogram
	// FanoutQueued is buzz_fanout_queued (gauge): deliveries and evictions
	// waiting for this process's fan-out dispatcher.
	FanoutQueued prometheus.Gauge
	// GroupCommitEvents is buzz_ingest_group_commit_events (histogram): the
	// events of each group commit (target P1 of docs/PERFORMANCE.md).
	GroupCommitEvents prometheus.Histogram
	// GroupCommitSeconds is buzz_ingest_group_commit_seconds (histogram):
	// how long each group commit held the writer, from its statement (or,
	// for a batch sent behind another, from that one's answer) to its
	// commit's answer, with the one-by-one retries of a batch that failed. The rate of its sum is the fraction of time the writer was
	// busy (docs/OPERATIONS.md "Group commit").
	GroupCommitSeconds prometheus.Histogram
	// GroupCommitRetries is buzz_ingest_group_commit_retries_total
	// (counter): group commits that failed and whose events were retried
	// one by one.
	GroupCommitRetries prometheus.Counter
	// GroupCommitSecondBatches is
	// buzz_ingest_group_commit_second_batches_total (counter): group
	// commits sent while another was still on its way on the writer's
	// connection (docs/OPERATIONS.md "Group commit").
	GroupCommitSecondBatches prometheus.Counter
	// AmbiguousCommits is buzz_ingest_ambiguous_commits_total{outcome}
	// (counter): writes whose answer was lost after they reached the
	// server, by what was found: fanned_out, interrupted, not_stored.
	AmbiguousCommits *prometheus.CounterVec
	// PosterChecks is buzz_ingest_poster_checks_total{by} (counter): how
	// each channel event's steps 14 and 15 were decided: "read" (a read of
	// the channel's state before the write), "write" (left to the write,
	// the poster cache having a recent pass), "refused_by_write" (the
	// write refused one of those).
	PosterChecks *prometheus.CounterVec
	// PostCommitDispatchErrors is buzz_post_commit_dispatch_errors_total
	// (counter): dispatch failures after commit.
	PostCommitDispatchErrors prometheus.Counter
	// AuthAttempts is buzz_auth_attempts_total{method} (counter); method in
	// AuthMethods.
	AuthAttempts *prometheus.CounterVec
	// AuthFailures is buzz_auth_failures_total{reason} (counter); reason in
	// AuthFailureReasons.
	AuthFailures *prometheus.CounterVec
	// MembershipCacheHits is buzz_membership_cache_hits_total (counter).
	MembershipCacheHits prometheus.Counter
	// MembershipCacheMisses is buzz_membership_cache_misses_total (counter).
	MembershipCacheMisses prometheus.Counter
	// AccessibleChannelsCacheHits is
	// buzz_accessible_channels_cache_hits_total (counter).
	AccessibleChannelsCacheHits prometheus.Counter
	// AccessibleChannelsCacheMisses is
	// buzz_accessible_channels_cache_misses_total (counter).
	AccessibleChannelsCacheMisses prometheus.Counter
	// AccessibleChannelsRenewals is
	// buzz_accessible_channels_renewals_total{outcome} (counter): the
	// background renewals live delivery starts (docs/PROTOCOL.md §5.6),
	// "kept", "overtaken" by a forget, or "failed".
	AccessibleChannelsRenewals *prometheus.CounterVec
	// CountFallbackRejections is buzz_count_fallback_rejections_total
	// (counter): COUNT refused as too broad.
	CountFallbackRejections prometheus.Counter
	// ChannelsCreated is buzz_channels_created_total{community,type}
	// (counter); type in ChannelTypes.
	ChannelsCreated *prometheus.CounterVec
	// PartitionMaintenanceErrors is buzz_partition_maintenance_errors_total
	// (counter): failed partition maintenance runs (docs/PROTOCOL.md §3.3).
	PartitionMaintenanceErrors prometheus.Counter
	// HTTPRequests is http_requests_total{code,action} (counter): bridge and
	// NIP-11 requests, health and metrics excluded. action is the route
	// pattern, code the numeric status ("200").
	HTTPRequests *prometheus.CounterVec
	// HTTPRequestLatencyMs is http_request_latency_ms{action} (histogram), in
	// milliseconds.
	HTTPRequestLatencyMs *prometheus.HistogramVec
	// Audit holds the audit metrics of docs/PROTOCOL.md §13.9.
	Audit Audit
	// Search holds the NIP-50 metrics of docs/PROTOCOL.md §12.9.
	Search Search
	// PubSub holds the Redis pub/sub metrics of docs/PROTOCOL.md §16.7.
	PubSub PubSub
	// Replica holds the read replica metrics of docs/PROTOCOL.md §16.7.
	Replica Replica
	// ReadState holds the NIP-RS read-state metrics of docs/PROTOCOL.md §14.8.
	ReadState ReadState
	// Listener holds the operator-listener metrics of docs/PROTOCOL.md §15.9.
	Listener Listener
	// Window holds the NIP-CW window metrics of docs/PROTOCOL.md §11.2.
	Window Window
	// Admission holds the per-user admission metrics (admission.go).
	Admission Admission
	// HotWindow holds the hot window's metrics (hot.go).
	HotWindow HotWindow
	// Reads holds the read deadline and share metrics (reads.go).
	Reads Reads
	// AuditSendErrors is Audit.SendErrors, for the ingest pipeline.
	AuditSendErrors prometheus.Counter
	// FilterCapRefusals is buzz_filter_cap_refusals_total{cap} (counter):
	// requests refused by a filter cap; cap in FilterCaps (filters.go).
	FilterCapRefusals *prometheus.CounterVec

	pool *poolCollector
}

// New creates every metric of docs/PROTOCOL.md §11.2, registers it on reg and
// pre-initialises the bounded label combinations (kinds, rejection reasons ×
// transports, auth methods and failure reasons). It panics if a metric is
// already registered on reg, so call it once per registry.
//
// With a nil reg it builds the same metrics and registers them nowhere, as
// Disabled does.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		WSConnectionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_ws_connections_active",
			Help: "Open WebSocket connections past the AUTH challenge.",
		}),
		WSConnectionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_ws_connections_total",
			Help: "Accepted WebSocket connections, by community host.",
		}, []string{"community"}),
		WSBackpressureDisconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ws_backpressure_disconnects_total",
			Help: "WebSocket connections closed as slow clients.",
		}),
		WSMessagesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ws_messages_sent_total",
			Help: "WebSocket messages written to clients.",
		}),
		WSSocketWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ws_socket_writes_total",
			Help: "Socket writes carrying WebSocket messages to clients.",
		}),
		WSConnectRateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ws_connect_rate_limited_total",
			Help: "WebSocket upgrades refused with 429 by the per-address connection rate.",
		}),
		WSAuthTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ws_auth_timeouts_total",
			Help: "WebSocket connections closed for not authenticating in time.",
		}),
		SubscriptionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_subscriptions_active",
			Help: "Live subscriptions.",
		}),
		EventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_events_received_total",
			Help: "EVENTs received over WebSocket and POST /events, by bounded kind.",
		}, []string{"kind"}),
		EventsStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_events_stored_total",
			Help: "Events newly committed, by bounded kind.",
		}, []string{"kind"}),
		EventsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_events_rejected_total",
			Help: "EVENTs refused, by reason and transport.",
		}, []string{"reason", "transport"}),
		EventProcessingSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "buzz_event_processing_seconds",
			Help:    "Time from EVENT received to OK queued.",
			Buckets: SecondsBuckets,
		}),
		FanoutRecipients: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "buzz_fanout_recipients",
			Help:    "Subscriptions an event was sent to.",
			Buckets: FanoutBuckets,
		}),
		FanoutQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_fanout_queued",
			Help: "Deliveries and evictions waiting for the fan-out dispatcher.",
		}),
		GroupCommitEvents: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "buzz_ingest_group_commit_events",
			Help:    "Events per group commit of one-statement inserts.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		GroupCommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "buzz_ingest_group_commit_seconds",
			Help:    "How long each group commit held the writer: statement, commit and any one-by-one retries.",
			Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5},
		}),
		GroupCommitRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ingest_group_commit_retries_total",
			Help: "Group commits that failed and were retried event by event.",
		}),
		GroupCommitSecondBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_ingest_group_commit_second_batches_total",
			Help: "Group commits sent while another was still on its way on the writer's connection.",
		}),
		AmbiguousCommits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_ingest_ambiguous_commits_total",
			Help: "Writes whose answer was lost after reaching the server, by what was found.",
		}, []string{"outcome"}),
		PosterChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_ingest_poster_checks_total",
			Help: "Channel posting checks, by how they were decided: read, write, refused_by_write.",
		}, []string{"by"}),
		PostCommitDispatchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_post_commit_dispatch_errors_total",
			Help: "Dispatch failures after commit.",
		}),
		AuthAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_auth_attempts_total",
			Help: "Authentication attempts, by method.",
		}, []string{"method"}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_auth_failures_total",
			Help: "Authentication failures, by reason.",
		}, []string{"reason"}),
		MembershipCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_membership_cache_hits_total",
			Help: "Channel membership cache hits.",
		}),
		MembershipCacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_membership_cache_misses_total",
			Help: "Channel membership cache misses.",
		}),
		AccessibleChannelsCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_accessible_channels_cache_hits_total",
			Help: "Accessible-channel cache hits.",
		}),
		AccessibleChannelsCacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_accessible_channels_cache_misses_total",
			Help: "Accessible-channel cache misses.",
		}),
		AccessibleChannelsRenewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_accessible_channels_renewals_total",
			Help: "Accessible-channel sets renewed in the background for live delivery, by outcome (kept, overtaken, failed).",
		}, []string{"outcome"}),
		CountFallbackRejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_count_fallback_rejections_total",
			Help: "COUNT requests refused as too broad.",
		}),
		ChannelsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_channels_created_total",
			Help: "Channels created, by community host and channel type.",
		}, []string{"community", "type"}),
		PartitionMaintenanceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_partition_maintenance_errors_total",
			Help: "Failed partition maintenance runs.",
		}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "HTTP bridge and NIP-11 requests, by status code and route pattern.",
		}, []string{"code", "action"}),
		HTTPRequestLatencyMs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_latency_ms",
			Help:    "HTTP bridge and NIP-11 request latency in milliseconds, by route pattern.",
			Buckets: LatencyMsBuckets,
		}, []string{"action"}),
		pool: newPoolCollector(),
	}
	m.Audit = newAudit(reg)
	m.Search = newSearch(reg)
	m.PubSub = newPubSub(reg)
	m.Replica = newReplica(reg)
	m.ReadState = newReadState(reg)
	m.Listener = newListener(reg)
	m.Window = newWindow(reg)
	m.Admission = newAdmission(reg)
	m.HotWindow = newHotWindow(reg)
	m.Reads = newReads(reg)
	m.AuditSendErrors = m.Audit.SendErrors
	m.FilterCapRefusals = newFilterCapRefusals(reg)
	if reg == nil {
		return m // nobody can scrape them: skip the zero series
	}
	reg.MustRegister(
		m.WSConnectionsActive, m.WSConnectionsTotal, m.WSBackpressureDisconnects, m.WSMessagesSent, m.WSSocketWrites, m.WSConnectRateLimited, m.WSAuthTimeouts,
		m.SubscriptionsActive, m.EventsReceived, m.EventsStored, m.EventsRejected,
		m.EventProcessingSeconds, m.FanoutRecipients, m.FanoutQueued, m.PostCommitDispatchErrors,
		m.GroupCommitEvents, m.GroupCommitSeconds, m.GroupCommitRetries, m.GroupCommitSecondBatches, m.AmbiguousCommits, m.PosterChecks,
		m.AuthAttempts, m.AuthFailures, m.MembershipCacheHits, m.MembershipCacheMisses,
		m.AccessibleChannelsCacheHits, m.AccessibleChannelsCacheMisses, m.AccessibleChannelsRenewals, m.CountFallbackRejections,
		m.ChannelsCreated, m.PartitionMaintenanceErrors, m.HTTPRequests, m.HTTPRequestLatencyMs,
		m.pool,
	)
	for _, k := range kindLabels() {
		m.EventsReceived.WithLabelValues(k)
		m.EventsStored.WithLabelValues(k)
	}
	for _, r := range RejectReasons {
		for _, tr := range Transports {
			m.EventsRejected.WithLabelValues(r, tr)
		}
	}
	for _, by := range []string{"read", "write", "refused_by_write"} {
		m.PosterChecks.WithLabelValues(by)
	}
	for _, o := range []string{"kept", "overtaken", "failed"} {
		m.AccessibleChannelsRenewals.WithLabelValues(o)
	}
	for _, method := range AuthMethods {
		m.AuthAttempts.WithLabelValues(method)
	}
	for _, r := range AuthFailureReasons {
		m.AuthFailures.WithLabelValues(r)
	}
	return m
}

// Disabled returns metrics that are registered on no registry: every field
// is set and every method works, but nothing is ever exported. Components
// default a nil Config.Metrics to it in their constructor, so no call site
// checks for nil. Each call returns a fresh, unshared set (so nothing is
// global); it costs a few microseconds, once per component.
func Disabled() *Metrics { return New(nil) }

// InitCommunity creates the zero series of a community host (normalised, as
// in docs/PROTOCOL.md §2.1) for buzz_ws_connections_total and, for every channel type,
// buzz_channels_created_total, so dashboards see them before the first event.
// The caller runs it for the deployment community at start. Idempotent.
func (m *Metrics) InitCommunity(host string) {
	m.WSConnectionsTotal.WithLabelValues(host)
	for _, t := range ChannelTypes {
		m.ChannelsCreated.WithLabelValues(host, t)
	}
}

// InitHTTPAction creates the zero series of a route pattern for
// http_request_latency_ms and for http_requests_total with code "200". The
// HTTP bridge runs it for each route it mounts. Idempotent.
func (m *Metrics) InitHTTPAction(action string) {
	m.HTTPRequests.WithLabelValues("200", action)
	m.HTTPRequestLatencyMs.WithLabelValues(action)
}

// SetPoolStatsFunc sets the function read at every scrape to fill
// buzz_db_pool_size, buzz_db_pool_idle, buzz_db_pool_active and
// buzz_db_pool_max. It is called once per scrape, from the scraping
// goroutine, and must be fast and safe for concurrent use (pgxpool's Stat
// is). Until it is set, or after it is set to nil, the four gauges read 0.
// It may be called at any time, any number of times.
func (m *Metrics) SetPoolStatsFunc(f func() (size, idle, active, max int32)) {
	m.pool.f.Store(&f)
}

// poolCollector exposes the writer pool gauges from one call per scrape.
type poolCollector struct {
	f                           atomic.Pointer[func() (size, idle, active, max int32)]
	size, idle, active, maxConn *prometheus.Desc
}

func newPoolCollector() *poolCollector {
	return &poolCollector{
		size:    prometheus.NewDesc("buzz_db_pool_size", "Connections in the writer pool, idle or in use.", nil, nil),
		idle:    prometheus.NewDesc("buzz_db_pool_idle", "Idle connections in the writer pool.", nil, nil),
		active:  prometheus.NewDesc("buzz_db_pool_active", "Writer pool connections in use.", nil, nil),
		maxConn: prometheus.NewDesc("buzz_db_pool_max", "Maximum size of the writer pool.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.idle
	ch <- c.active
	ch <- c.maxConn
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	var size, idle, active, maxConn int32
	if f := c.f.Load(); f != nil && *f != nil {
		size, idle, active, maxConn = (*f)()
	}
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(size))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(idle))
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(active))
	ch <- prometheus.MustNewConstMetric(c.maxConn, prometheus.GaugeValue, float64(maxConn))
}
