package pubsub

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBus is one Bus standing for one relay process, with what it hands
// back collected on channels.
type testBus struct {
	*Bus
	metrics   *metrics.Metrics
	logs      *logtest.Buffer
	delivered chan Message
	controls  chan Control
	links     chan LinkEvent
}

type testBundle struct {
	redis *redistest.Server
	rc    *redis.Client // the test's own client, for assertions and raw traffic
	a, b  *testBus      // two processes
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	srv := redistest.Start(t)
	bundle := &testBundle{redis: srv, rc: srv.Client()}
	bundle.a = startBus(t, srv.URL(), nil)
	bundle.b = startBus(t, srv.URL(), nil)
	for _, tb := range []*testBus{bundle.a, bundle.b} {
		tb.started(t)
	}
	return bundle
}

// started waits for the first connection and takes the start-up gap's two
// link events: Start reports {Up:false} at once (live delivery from the
// other processes is not whole before the first connection), the link
// {Up:true} once it is subscribed.
func (tb *testBus) started(t *testing.T) {
	t.Helper()
	tb.TestSignals.Connected.WaitOrTimeout(t)
	require.Equal(t, []LinkEvent{{Up: false}, {Up: true}}, []LinkEvent{tb.nextLink(t), tb.nextLink(t)})
}

// startBus starts a Bus on url; edit may change its Config first.
func startBus(t testing.TB, url string, edit func(*Config)) *testBus {
	t.Helper()
	tb := &testBus{
		metrics:   metrics.New(prometheus.NewPedanticRegistry()),
		logs:      &logtest.Buffer{},
		delivered: make(chan Message, 2*QueueSize),
		controls:  make(chan Control, 100),
		links:     make(chan LinkEvent, 100),
	}
	cfg := Config{
		URL:         url,
		Logger:      slog.New(slog.NewTextHandler(tb.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:     tb.metrics,
		DeliverFunc: func(m Message) { tb.delivered <- m },
		ControlFunc: func(c Control) { tb.controls <- c },
		LinkFunc:    func(e LinkEvent) { tb.links <- e },
	}
	if edit != nil {
		edit(&cfg)
	}
	bus, err := New(cfg)
	require.NoError(t, err)
	bus.TestSignals.Init()
	tb.Bus = bus
	require.NoError(t, bus.Start(context.Background()))
	t.Cleanup(func() {
		bus.Stop()
		if t.Failed() {
			t.Logf("logs of %s:\n%s", bus.ProcessID(), tb.logs.String())
		}
	})
	return tb
}

// retain retains t and waits until Redis confirmed it.
func (tb *testBus) retain(t *testing.T, topic Topic) {
	t.Helper()
	select {
	case <-tb.Retain(topic):
	case <-time.After(5 * time.Second):
		t.Fatalf("retain of %s not confirmed", topic)
	}
}

// barrier runs a Barrier that must succeed: everything Redis delivered
// before it has been handed over.
func (tb *testBus) barrier(t *testing.T) {
	t.Helper()
	require.NoError(t, tb.Barrier(context.Background()))
}

// next returns the next delivered message.
func (tb *testBus) next(t *testing.T) Message {
	t.Helper()
	select {
	case m := <-tb.delivered:
		return m
	case <-time.After(5 * time.Second):
		t.Fatalf("no message delivered")
		return Message{}
	}
}

// requireNoDelivery fails when a message is waiting.
func (tb *testBus) requireNoDelivery(t *testing.T) {
	t.Helper()
	select {
	case m := <-tb.delivered:
		t.Fatalf("unexpected delivery of %s on %s", m.Event.ID, m.Topic)
	default:
	}
}

// nextLink returns the next LinkEvent.
func (tb *testBus) nextLink(t *testing.T) LinkEvent {
	t.Helper()
	select {
	case e := <-tb.links:
		return e
	case <-time.After(40 * time.Second):
		t.Fatalf("no link event")
		return LinkEvent{}
	}
}

// publish publishes a fresh kind 9 event on topic from tb.
func (tb *testBus) publish(t *testing.T, topic Topic, opts ...eventtest.Option) event.Event {
	t.Helper()
	ev := newEvent(opts...)
	tb.Publish(context.Background(), topic, ev.ID, ev.AppendJSON(nil))
	return ev
}

// newEvent is a kind 9 event with a unique, correct id. Its signature is
// a placeholder: the bus checks ids, not signatures (Redis is inside the
// trust boundary), and signing under -race is slow.
func newEvent(opts ...eventtest.Option) event.Event {
	ev := event.Event{PubKey: strings.Repeat("ab", 32), CreatedAt: time.Now().Unix(), Kind: 9,
		Tags: event.Tags{}, Content: newUUID(), Sig: strings.Repeat("cd", 64)}
	for _, o := range opts {
		o(&ev)
	}
	ev.ID = ev.ComputeID()
	return ev
}

func newUUID() string { return uuid.NewString() }

func newTopic() Topic { return ChannelTopic(newUUID(), newUUID()) }

// channels lists the buzz:* topics subscribed at Redis.
func (bundle *testBundle) channels(t *testing.T) []string {
	t.Helper()
	got, err := bundle.rc.PubSubChannels(context.Background(), "buzz:*").Result()
	require.NoError(t, err)
	return got
}

// subscribers is PUBSUB NUMSUB of one topic.
func (bundle *testBundle) subscribers(t *testing.T, topic string) int64 {
	t.Helper()
	got, err := bundle.rc.PubSubNumSub(context.Background(), topic).Result()
	require.NoError(t, err)
	return got[topic]
}

func countLines(logs, substr string) int { return strings.Count(logs, substr) }

func gauge(t *testing.T, g prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(g)
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// newSampleEvent is the JSON of a fresh event.
func newSampleEvent(t *testing.T) []byte {
	t.Helper()
	ev := newEvent()
	return ev.AppendJSON(nil)
}
