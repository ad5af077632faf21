package pubsub

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// The bounds of docs/PROTOCOL.md §16.1.
const (
	// QueueSize bounds the in-process queue between the Redis reader and the
	// consumer goroutine; a message that finds it full is dropped.
	QueueSize = 4096
	// PublishTimeout bounds one PUBLISH (and one presence write); it is
	// never retried.
	PublishTimeout = time.Second
	// ConfirmTimeout is the longest Retain's channel stays open waiting for
	// Redis to confirm a new SUBSCRIBE.
	ConfirmTimeout = time.Second
	// UnsubscribeDelay is how long a topic whose count fell to zero stays
	// subscribed, so rapid CLOSE/REQ cycles cause no churn at Redis.
	UnsubscribeDelay = 500 * time.Millisecond
	// BarrierTimeout is the longest Barrier waits for its token.
	BarrierTimeout = time.Second
	// PresenceTTL is the lifetime of a presence key: two missed 60 s
	// heartbeats survive, the third expires it.
	PresenceTTL = 180 * time.Second
	// DefaultPoolSize is the default of Config.PoolSize.
	DefaultPoolSize = 16
)

// Reconnect delays of docs/PROTOCOL.md §16.3: 1 s after a loss, doubling up to
// MaxRetryDelay, back to 1 s after a successful connection.
const (
	FirstRetryDelay = time.Second
	MaxRetryDelay   = 30 * time.Second
)

// healthInterval is how long the subscription connection may be silent
// before it is sent a PING; a second silent interval means it is dead.
const healthInterval = 5 * time.Second

var (
	// ErrDisconnected means the subscription link is known to be down, so
	// the operation was skipped rather than left to time out.
	ErrDisconnected = errors.New("redis disconnected")
	// ErrBarrierTimeout means a barrier token did not come back within
	// BarrierTimeout.
	ErrBarrierTimeout = errors.New("delivery barrier timed out")
)

// Config configures a Bus.
type Config struct {
	// URL is the Redis server (REDIS_URL), a redis:// or rediss:// URL.
	// Required.
	URL string
	// PoolSize is the pooled connections for PUBLISH and presence keys
	// (BUZZ_REDIS_POOL_SIZE). The subscriptions use one more, dedicated
	// connection. Default DefaultPoolSize.
	PoolSize int
	// ProcessID names this process in control messages and its barrier
	// topic: a lowercase hyphenated UUID. Default a random one.
	ProcessID string
	// Logger; nil discards. The Bus adds component=pubsub and process_id.
	Logger *slog.Logger
	// Metrics; nil is metrics.Disabled(). The Bus moves Metrics.PubSub.
	Metrics *metrics.Metrics
	// DeliverFunc receives every event from another process, in the order
	// Redis delivered them, on the one consumer goroutine. It must not
	// block (hand the event to local fan-out and return). Nil drops them.
	DeliverFunc func(Message)
	// ControlFunc receives every control message of another process, on the
	// same goroutine as DeliverFunc and in order with the events. Nil drops
	// them.
	ControlFunc func(Control)
	// LinkFunc is told when live delivery from other processes gets a gap
	// and when it is whole again (see LinkEvent). It is called on the link
	// goroutine, never concurrently with itself, and must return quickly.
	// Nil ignores it.
	LinkFunc func(LinkEvent)
}

// Message is an event from another process.
type Message struct {
	// Topic is where it was published: the community, and the channel for
	// a channel event. Take both from here, never from the event's tags.
	Topic Topic
	// Event is the parsed event; its id matches its fields. The signature
	// was not verified (Redis is inside the trust boundary).
	Event *event.Event
	// JSON is the event's NIP-01 object exactly as received, ready to send
	// to clients.
	JSON []byte
	// Channel is, for a message of a window topic (Topic.Window), the
	// channel the event is stored in, "" for a global event.
	Channel string
}

// LinkEvent reports a change in the completeness of live delivery
// (docs/PROTOCOL.md §16.3). Up false opens a gap: every subscription that is live now, or is
// registered before the next Up, may have missed events and must be marked
// interrupted. Up true closes it: Redis holds the whole wanted set again
// and nothing is being dropped, so the interrupted subscriptions can be
// closed with "live delivery interrupted; resubscribe". Events alternate,
// starting with a Down; a Bus that never loses its link reports nothing.
type LinkEvent struct {
	// Up is true when the gap closed, false when it opened.
	Up bool
	// Overflow is true when the in-process queue dropped messages (the link
	// itself stayed up); false when the Redis connection was lost or could
	// not be made.
	Overflow bool
}

// TestSignals are emitted by a Bus. Tests only.
type TestSignals struct {
	// Connected is emitted each time the link came up with the wanted set.
	Connected testsignal.Signal[struct{}]
	// Disconnected carries the error of each failed or lost connection.
	Disconnected testsignal.Signal[error]
	// Unsubscribed carries each topic whose UNSUBSCRIBE Redis confirmed.
	Unsubscribed testsignal.Signal[string]
	// Dropped carries the reason of each invalid message dropped.
	Dropped testsignal.Signal[string]
}

// Init initialises every signal.
func (ts *TestSignals) Init() {
	ts.Connected.Init()
	ts.Disconnected.Init()
	ts.Unsubscribed.Init()
	ts.Dropped.Init()
}

// Bus is a process's connection to Redis pub/sub. Create it with New, then
// Start it; every method is safe for concurrent use, before Start and after
// Stop too (then publishing is skipped and Retain's channels close at
// once).
type Bus struct {
	service.Base
	cfg          Config
	opts         *redis.Options
	log          *slog.Logger
	m            metrics.PubSub
	barrierTopic string

	startMu sync.Mutex
	client  atomic.Pointer[redis.Client] // the pool; nil while not running

	queue    chan item
	echo     *echoSet
	barriers barriers
	missed   missed

	warnPublish  *warner
	warnInvalid  *warner
	warnPresence *warner
	warnControl  *warner
	warnOverflow *warner

	mu    sync.Mutex
	state linkState
	// topics is the wanted set: every topic with a count above zero, and
	// those whose UNSUBSCRIBE is still scheduled.
	topics map[string]*topicState
	// inflight counts, per topic, the SUBSCRIBE and UNSUBSCRIBE commands
	// sent on the current connection whose confirmation has not come back.
	inflight map[string]int
	// ops are the commands waiting for the link's writer, in order.
	ops     []op
	opsWake chan struct{}
	// batch is the set subscribed in one command when the link connected;
	// pending is how many of its confirmations are still missing.
	batch   map[string]bool
	pending int
	// lagging is true from a queue overflow until a message fits again.
	// Written only on the link goroutine (and by Start before it runs), so
	// that goroutine may read it without mu.
	lagging bool
	// reported is the completeness last told to LinkFunc.
	reported bool
	// outage is true from a link loss until the link is up again.
	outage bool

	// TestSignals are emitted for tests.
	TestSignals TestSignals
}

// linkState is the subscription connection's state.
type linkState int

const (
	// linkConnecting: the first connection is being made; nothing is known
	// yet, so publishing is attempted.
	linkConnecting linkState = iota
	// linkUp: connected and the wanted set subscribed.
	linkUp
	// linkDown: known down; publishing is skipped until linkUp.
	linkDown
	// linkStopped: the Bus is not running.
	linkStopped
)

// silenceRedisLog turns off go-redis's own logger, which is process-wide
// and writes unstructured lines to stderr; every failure it would report
// reaches the Bus as an error, which the Bus logs.
var silenceRedisLog sync.Once

// New checks cfg and returns a Bus that is not running yet.
func New(cfg Config) (*Bus, error) {
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		// The parse error can quote the URL, password included.
		return nil, errors.New("invalid REDIS_URL: must be a redis:// or rediss:// URL")
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = DefaultPoolSize
	}
	if cfg.ProcessID == "" {
		cfg.ProcessID = uuid.NewString()
	}
	if !isUUID(cfg.ProcessID) {
		return nil, errors.New("invalid process id: must be a lowercase hyphenated UUID")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With(slog.String("component", "pubsub"), slog.String("process_id", cfg.ProcessID))
	silenceRedisLog.Do(func() { redis.SetLogger(&logging.VoidLogger{}) })

	opts.PoolSize = cfg.PoolSize
	opts.ClientName = "buzz-relay-" + cfg.ProcessID
	opts.MaxRetries = -1   // a PUBLISH is never retried (docs/PROTOCOL.md §16.2)
	opts.DialerRetries = 1 // one dial per attempt; the link has its own backoff
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.ContextTimeoutEnabled = true // PublishTimeout bounds the whole command
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	b := &Bus{
		cfg:          cfg,
		opts:         opts,
		log:          log,
		m:            cfg.Metrics.PubSub,
		barrierTopic: BarrierTopic(cfg.ProcessID),
		queue:        make(chan item, QueueSize),
		echo:         newEchoSet(EchoTTL, EchoMax, time.Now),
		warnPublish:  &warner{log: log, msg: "redis publish failed"},
		warnInvalid:  &warner{log: log, msg: "dropped invalid redis message"},
		warnPresence: &warner{log: log, msg: "presence key not written"},
		warnControl:  &warner{log: log, msg: "ignored control message"},
		warnOverflow: &warner{log: log, msg: "redis queue full: messages dropped"},
		state:        linkStopped,
		topics:       map[string]*topicState{},
		inflight:     map[string]int{},
		opsWake:      make(chan struct{}, 1),
		reported:     true,
	}
	b.barriers.init()
	b.m.Connected.Set(0)
	return b, nil
}

// ProcessID is this process's id, as in Config.
func (b *Bus) ProcessID() string { return b.cfg.ProcessID }

// Connected reports whether the subscription link is up with the whole
// wanted set subscribed (for /_status).
func (b *Bus) Connected() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == linkUp
}

// Start connects in the background and returns at once: a process starts
// whether or not Redis is reachable, and keeps retrying (docs/PROTOCOL.md §16.3). Safe to
// call twice; a Bus can be started again after Stop.
func (b *Bus) Start(ctx context.Context) error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	if b.Running() {
		return nil
	}
	client := redis.NewClient(b.opts)
	b.client.Store(client)
	// Until the first connection is up and subscribed, live delivery from
	// the other processes is not whole: a subscription registered meanwhile
	// is marked interrupted and told so once the link is up, exactly as
	// after an outage (a slow first connection must not be a silent gap).
	b.mu.Lock()
	b.state = linkConnecting
	b.reported, b.lagging, b.outage = false, false, false
	b.mu.Unlock()
	b.report(true, LinkEvent{Up: false})
	return b.StartLoop(ctx, func(ctx context.Context) { b.run(ctx, client) })
}

// Stop disconnects and waits until every goroutine of the Bus has ended.
// Messages still queued are dropped. Safe to call twice and before Start.
func (b *Bus) Stop() { b.Base.Stop() }

// run owns the Bus's goroutines for one Start: the consumer, the barrier
// rounds and, on this goroutine, the link.
func (b *Bus) run(ctx context.Context, client *redis.Client) {
	var wg sync.WaitGroup
	wg.Go(func() { b.consume(ctx) })
	wg.Go(func() { b.barriers.run(ctx, b) })
	wg.Go(func() { b.announceGaps(ctx) })
	b.link(ctx, client)
	wg.Wait()

	b.client.Store(nil)
	_ = client.Close()
	b.mu.Lock()
	b.state = linkStopped
	b.clearSessionLocked()
	for _, st := range b.topics {
		b.closeReadyLocked(st)
	}
	b.mu.Unlock()
	b.barriers.fail(ErrDisconnected)
	b.m.Connected.Set(0)
	b.m.TopicsSubscribed.Set(0)
}

// pool returns the publish pool, or nil when publishing must be skipped:
// the Bus is not running or the link is known down.
func (b *Bus) pool() *redis.Client {
	b.mu.Lock()
	down := b.state == linkDown || b.state == linkStopped
	b.mu.Unlock()
	if down {
		return nil
	}
	return b.client.Load()
}

// Publish sends a stored event to the other processes: one PUBLISH of
// eventJSON (the event's NIP-01 object, as sent to clients) on topic and
// one on its community's WindowTopic, in one round trip, bounded by
// PublishTimeout and never retried. Call it after commit and
// local fan-out and before the OK is queued (docs/PROTOCOL.md §16.2). id is the event id,
// marked in the local-echo set first so this process skips its own echo.
//
// While the link is known down the PUBLISH is skipped. A failure keeps the
// echo mark, because the command may have run. Every failure or skip counts
// buzz_pubsub_publish_errors_total and warns at most once per 10 s, and
// owes the other processes a gap announcement (gap.go); there is nothing
// for the caller to do, because an OK means committed, not delivered. The caller's ctx only carries values:
// its cancellation does not abort a PUBLISH of a committed event.
//
// It reports whether Redis took both PUBLISHes. The caller needs that only
// for what must not wait for a gap announcement: a process that holds hot
// windows tells the others through PostgreSQL instead
// (docs/ARCHITECTURE.md "Hot window").
func (b *Bus) Publish(ctx context.Context, t Topic, id string, eventJSON []byte) bool {
	return b.publishEvent(ctx, t, id, eventJSON, true)
}

// PublishEphemeral is Publish for an ephemeral event (kinds 20000–29999,
// never stored), on topic only: a failure owes no gap announcement,
// because a subscription told to resubscribe could not get the event back
// from history anyway, and no hot window holds it.
func (b *Bus) PublishEphemeral(ctx context.Context, t Topic, id string, eventJSON []byte) {
	b.publishEvent(ctx, t, id, eventJSON, false)
}

func (b *Bus) publishEvent(ctx context.Context, t Topic, id string, eventJSON []byte, stored bool) bool {
	label := t.metricLabel()
	if !t.Valid() {
		b.publishFailed(label, t.String(), errors.New("invalid topic"))
		return false
	}
	failed := func(err error) {
		if stored {
			b.missed.note(t.Community, time.Now())
		}
		b.publishFailed(label, t.String(), err)
	}
	client := b.pool()
	if client == nil {
		failed(ErrDisconnected)
		return false
	}
	// The mark stays even when the PUBLISH fails: Redis may have run it
	// before the error (a reset after the write), and a mark costs nothing
	// but expires with the set's 60 s.
	b.echo.Mark(t.Community, id)
	var err error
	if stored {
		err = publishTwice(ctx, client, t.String(), eventJSON, WindowTopic(t.Community).String(), windowPayload(t.Channel, eventJSON))
	} else {
		err = publish(ctx, client, t.String(), eventJSON)
	}
	if err != nil {
		failed(err)
		return false
	}
	return true
}

// publish runs one PUBLISH bounded by PublishTimeout.
func publish(ctx context.Context, client *redis.Client, topic string, payload any) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PublishTimeout)
	defer cancel()
	return client.Publish(ctx, topic, payload).Err()
}

// publishTwice runs a PUBLISH of payload on topic, then one of
// windowPayload on window, in one round trip bounded by PublishTimeout.
// Redis runs them in that order.
func publishTwice(ctx context.Context, client *redis.Client, topic string, payload []byte, window string, windowPayload []byte) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PublishTimeout)
	defer cancel()
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Publish(ctx, topic, payload)
		p.Publish(ctx, window, windowPayload)
		return nil
	})
	return err
}

// windowPayload is a window topic message (docs/PROTOCOL.md §16.1):
// {"channel_id":"<channel id, or empty for a global event>","event":<the event's JSON>}.
// The channel travels with the event because one topic carries every
// channel of the community.
func windowPayload(channel string, eventJSON []byte) []byte {
	out := make([]byte, 0, len(eventJSON)+len(channel)+28)
	out = append(out, `{"channel_id":"`...)
	out = append(out, channel...)
	out = append(out, `","event":`...)
	out = append(out, eventJSON...)
	return append(out, '}')
}

func (b *Bus) publishFailed(label, topic string, err error) {
	b.m.PublishErrors.WithLabelValues(label).Inc()
	b.warnPublish.Warn(slog.String("topic", topic), slog.String("err", err.Error()))
}
