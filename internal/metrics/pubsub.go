package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of the pub/sub metrics (docs/PROTOCOL.md §16.7).
var (
	// PubSubPublishTopics are the values of
	// buzz_pubsub_publish_errors_total's topic label.
	PubSubPublishTopics = []string{"channel", "global", "control"}
	// PubSubReceiveTopics are the values of
	// buzz_pubsub_messages_received_total's topic label: the publish
	// topics, the window topics of the communities whose hot window the
	// process holds, and the process's own barrier topic.
	PubSubReceiveTopics = []string{"channel", "global", "window", "control", "barrier"}
	// ControlOps are the values of buzz_control_messages_total's op label:
	// the operations of docs/PROTOCOL.md §16.4.
	ControlOps = []string{"membership", "accessible_all", "visibility", "evict",
		"evict_non_members", "evict_all", "relay_member_removed", "gap", "hosts"}
	// ControlDirections are the values of buzz_control_messages_total's
	// direction label.
	ControlDirections = []string{"sent", "received"}
)

// PubSub holds the Redis pub/sub metrics of docs/PROTOCOL.md §16.7 (the replica
// metrics of the same table are not here). Package pubsub moves all of
// them but InterruptedSubscriptions, which the WebSocket server counts when
// it closes a subscription after a live-delivery gap.
type PubSub struct {
	// Connected is buzz_pubsub_connected (gauge): 1 while the subscription
	// connection is up, else 0. It has no series until its first Set, so a
	// process without REDIS_URL exports none.
	Connected *OptionalGauge
	// Reconnects is buzz_pubsub_reconnects_total (counter): the subscription
	// connection came back after an outage.
	Reconnects prometheus.Counter
	// PublishErrors is buzz_pubsub_publish_errors_total{topic} (counter):
	// PUBLISH failed or skipped; topic in PubSubPublishTopics.
	PublishErrors *prometheus.CounterVec
	// TopicsSubscribed is buzz_pubsub_topics_subscribed (gauge): Redis
	// topics the subscription connection holds.
	TopicsSubscribed prometheus.Gauge
	// MessagesReceived is buzz_pubsub_messages_received_total{topic}
	// (counter): messages read from Redis; topic in PubSubReceiveTopics.
	MessagesReceived *prometheus.CounterVec
	// EchoSkipped is buzz_pubsub_echo_skipped_total (counter): the process's
	// own events coming back, skipped.
	EchoSkipped prometheus.Counter
	// InvalidMessages is buzz_pubsub_invalid_messages_total (counter):
	// malformed messages dropped.
	InvalidMessages prometheus.Counter
	// PresenceErrors is buzz_pubsub_presence_errors_total (counter): presence
	// keys not written.
	PresenceErrors prometheus.Counter
	// FanoutTotal is buzz_multinode_fanout_total (counter): messages from
	// Redis handed to local fan-out.
	FanoutTotal prometheus.Counter
	// FanoutLag is buzz_multinode_fanout_lag_total (counter): messages
	// dropped because the in-process queue was full.
	FanoutLag prometheus.Counter
	// ControlMessages is buzz_control_messages_total{op,direction}
	// (counter); op in ControlOps, direction in ControlDirections.
	ControlMessages *prometheus.CounterVec
	// BarrierTimeouts is buzz_pubsub_barrier_timeouts_total (counter): EOSE
	// sent without a returned barrier.
	BarrierTimeouts prometheus.Counter
	// InterruptedSubscriptions is
	// buzz_pubsub_interrupted_subscriptions_total (counter): subscriptions
	// closed after a live-delivery gap.
	InterruptedSubscriptions prometheus.Counter
}

func newPubSub(reg prometheus.Registerer) PubSub {
	p := PubSub{
		Connected: NewOptionalGauge(prometheus.GaugeOpts{
			Name: "buzz_pubsub_connected", Help: "1 while the Redis subscription connection is up, else 0."}),
		Reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_pubsub_reconnects_total", Help: "Redis subscription connection restored after an outage."}),
		PublishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_pubsub_publish_errors_total", Help: "Redis PUBLISH failed or skipped, by topic type."}, []string{"topic"}),
		TopicsSubscribed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "buzz_pubsub_topics_subscribed", Help: "Redis topics currently subscribed."}),
		MessagesReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_pubsub_messages_received_total", Help: "Messages read from Redis, by topic type."}, []string{"topic"}),
		EchoSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_pubsub_echo_skipped_total", Help: "Own events coming back from Redis, skipped."}),
		InvalidMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_pubsub_invalid_messages_total", Help: "Malformed Redis messages dropped."}),
		PresenceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_pubsub_presence_errors_total", Help: "Presence keys not written to Redis."}),
		FanoutTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_multinode_fanout_total", Help: "Messages from Redis handed to local fan-out."}),
		FanoutLag: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_multinode_fanout_lag_total", Help: "Messages from Redis dropped because the in-process queue was full."}),
		ControlMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "buzz_control_messages_total", Help: "Control messages, by operation and direction."}, []string{"op", "direction"}),
		BarrierTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_pubsub_barrier_timeouts_total", Help: "EOSE sent without a returned delivery barrier."}),
		InterruptedSubscriptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "buzz_pubsub_interrupted_subscriptions_total", Help: "Subscriptions closed after a live-delivery gap."}),
	}
	if reg == nil {
		return p
	}
	reg.MustRegister(p.Connected, p.Reconnects, p.PublishErrors, p.TopicsSubscribed, p.MessagesReceived,
		p.EchoSkipped, p.InvalidMessages, p.PresenceErrors, p.FanoutTotal, p.FanoutLag,
		p.ControlMessages, p.BarrierTimeouts, p.InterruptedSubscriptions)
	for _, topic := range PubSubPublishTopics {
		p.PublishErrors.WithLabelValues(topic)
	}
	for _, topic := range PubSubReceiveTopics {
		p.MessagesReceived.WithLabelValues(topic)
	}
	for _, op := range ControlOps {
		for _, d := range ControlDirections {
			p.ControlMessages.WithLabelValues(op, d)
		}
	}
	return p
}

// OptionalGauge is a gauge that exports no series until its first Set:
// for a value that only means something once a component exists (Redis is
// configured), so its absence says "not configured" rather than 0. Safe
// for concurrent use.
type OptionalGauge struct {
	gauge prometheus.Gauge
	set   atomic.Bool
}

// NewOptionalGauge returns a gauge with the given options, without a
// series.
func NewOptionalGauge(opts prometheus.GaugeOpts) *OptionalGauge {
	return &OptionalGauge{gauge: prometheus.NewGauge(opts)}
}

// Set sets the value; from now on the gauge is exported.
func (g *OptionalGauge) Set(v float64) {
	g.gauge.Set(v)
	g.set.Store(true)
}

// Describe implements prometheus.Collector.
func (g *OptionalGauge) Describe(ch chan<- *prometheus.Desc) { g.gauge.Describe(ch) }

// Collect implements prometheus.Collector: nothing before the first Set.
func (g *OptionalGauge) Collect(ch chan<- prometheus.Metric) {
	if g.set.Load() {
		g.gauge.Collect(ch)
	}
}
