package audit

import (
	"container/list"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// Observer constants of docs/PROTOCOL.md §13.4, §13.8.
const (
	// QueueSize bounds the observational queue; a full queue drops the intent.
	QueueSize = 1000
	// DrainTimeout bounds the queue drain at shutdown.
	DrainTimeout = 5 * time.Second
	// Window is the sampling window, aligned to UTC minutes.
	Window = 60 * time.Second

	authFailureCap   = 10
	rateLimitCap     = 10
	authSuccessCap   = 60
	authSuccessLRU   = 10000
	authSuccessEvery = time.Hour
	writeBatch       = 200
)

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	// Pool is the audit pool. Required.
	Pool    *pgxpool.Pool
	Logger  *slog.Logger
	Metrics *Metrics
	// NowFunc is the clock of the sampling windows. Default time.Now.
	NowFunc func() time.Time
	// WakeFunc, when set, is called after each batch (the local chainer's Wake).
	WakeFunc func()
}

// Observer records the observational actions — auth_success, auth_failure,
// rate_limit_exceeded — that have no transaction of their own
// (docs/PROTOCOL.md §13.4). It samples them per community in fixed 60-second windows,
// queues what passes on a bounded queue and writes it to audit_outbox from
// one goroutine (Start). The handlers that report never wait.
type Observer struct {
	service.Base
	cfg   ObserverConfig
	log   *slog.Logger
	queue chan Intent

	mu      sync.Mutex
	closed  bool
	windows map[string]*window
	seen    map[string]*list.Element // auth_success LRU: key → element holding seenEntry
	order   *list.List

	TestSignals ObserverTestSignals
}

// ObserverTestSignals are emitted by the writer. Tests only.
type ObserverTestSignals struct {
	// Written carries the size of each batch that reached the outbox.
	Written testsignal.Signal[int]
}

// Init initialises every signal.
func (ts *ObserverTestSignals) Init() { ts.Written.Init() }

type seenEntry struct {
	key string
	at  time.Time
}

// window is one community's counts in the current sampling window.
type window struct {
	start time.Time

	failWritten int
	failSupp    map[string]int64 // by reason

	rateWritten int
	rateFirst   map[string]bool  // principal + "\x00" + limit
	rateSupp    map[string]int64 // by limit

	okWritten int
	okSupp    int64
}

// NewObserver returns an Observer; call Start to write what it queues.
func NewObserver(cfg ObserverConfig) *Observer {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Observer{cfg: cfg, log: log.With("component", "audit"), queue: make(chan Intent, QueueSize),
		windows: map[string]*window{}, seen: map[string]*list.Element{}, order: list.New()}
}

// AuthSuccess observes an accepted NIP-42 AUTH or NIP-98 request (method
// "nip42" or "nip98"). The first per (pubkey, method) per hour is written,
// at most 60 per community per window.
func (o *Observer) AuthSuccess(communityID, pubkey, method string) {
	if o == nil {
		return
	}
	now := o.cfg.NowFunc()
	o.mu.Lock()
	key := communityID + "\x00" + pubkey + "\x00" + method
	if el, ok := o.seen[key]; ok && now.Sub(el.Value.(*seenEntry).at) < authSuccessEvery {
		o.order.MoveToFront(el)
		o.mu.Unlock()
		o.cfg.Metrics.suppressed(AuthSuccess) // hourly repeats are only counted
		return
	}
	w := o.windowLocked(communityID, now)
	if w.okWritten >= authSuccessCap {
		w.okSupp++
		o.mu.Unlock()
		o.cfg.Metrics.suppressed(AuthSuccess)
		return
	}
	w.okWritten++
	o.rememberLocked(key, now)
	o.mu.Unlock()
	o.enqueue(newObservation(communityID, AuthSuccess, pubkey, mustJSON(struct {
		Method string `json:"method"`
	}{method})))
}

func (o *Observer) rememberLocked(key string, now time.Time) {
	if el, ok := o.seen[key]; ok {
		el.Value.(*seenEntry).at = now
		o.order.MoveToFront(el)
		return
	}
	o.seen[key] = o.order.PushFront(&seenEntry{key: key, at: now})
	for o.order.Len() > authSuccessLRU {
		last := o.order.Back()
		delete(o.seen, last.Value.(*seenEntry).key)
		o.order.Remove(last)
	}
}

// AuthFailure observes a rejected AUTH or NIP-98 request after the host
// resolved to a community. actor is the pubkey only when the event passed
// every cryptographic and freshness check and a policy refused it; reason
// is invalid, expired, replay, banned, not_allowlisted or not_relay_member.
// The first 10 per community per window are written.
func (o *Observer) AuthFailure(communityID, actor, method, reason string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	w := o.windowLocked(communityID, o.cfg.NowFunc())
	if w.failWritten >= authFailureCap {
		w.failSupp[reason]++
		o.mu.Unlock()
		o.cfg.Metrics.suppressed(AuthFailure)
		return
	}
	w.failWritten++
	o.mu.Unlock()
	o.enqueue(newObservation(communityID, AuthFailure, actor, mustJSON(struct {
		Method string `json:"method"`
		Reason string `json:"reason"`
	}{method, reason})))
}

// RateLimited observes a "rate-limited:" reply. principal is "" when
// unauthenticated; limit names the limiter; transport is "ws" or "http".
// The first per (principal, limit) per window is written, at most 10 per
// community per window.
func (o *Observer) RateLimited(communityID, principal, limit, transport string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	w := o.windowLocked(communityID, o.cfg.NowFunc())
	k := principal + "\x00" + limit
	if w.rateFirst[k] || w.rateWritten >= rateLimitCap {
		w.rateSupp[limit]++
		o.mu.Unlock()
		o.cfg.Metrics.suppressed(RateLimitExceeded)
		return
	}
	w.rateFirst[k] = true
	w.rateWritten++
	o.mu.Unlock()
	o.enqueue(newObservation(communityID, RateLimitExceeded, principal, mustJSON(struct {
		Limit     string `json:"limit"`
		Transport string `json:"transport"`
	}{limit, transport})))
}

// windowLocked returns the community's window for now, closing an ended
// one (its summaries are queued).
func (o *Observer) windowLocked(communityID string, now time.Time) *window {
	start := now.UTC().Truncate(Window)
	w, ok := o.windows[communityID]
	if ok && w.start.Equal(start) {
		return w
	}
	if ok {
		o.summariesLocked(communityID, w)
	}
	w = &window{start: start, failSupp: map[string]int64{}, rateFirst: map[string]bool{}, rateSupp: map[string]int64{}}
	o.windows[communityID] = w
	return w
}

// summariesLocked queues one summary per action that had overflow in w.
func (o *Observer) summariesLocked(communityID string, w *window) {
	end := w.start.Add(Window)
	type summary struct {
		Summary       bool             `json:"summary"`
		WindowStart   int64            `json:"window_start"`
		WindowSeconds int              `json:"window_seconds"`
		Suppressed    int64            `json:"suppressed"`
		ByReason      map[string]int64 `json:"by_reason,omitempty"`
		ByLimit       map[string]int64 `json:"by_limit,omitempty"`
	}
	base := summary{Summary: true, WindowStart: w.start.Unix(), WindowSeconds: int(Window / time.Second)}
	if n := sum(w.failSupp); n > 0 {
		s := base
		s.Suppressed, s.ByReason = n, w.failSupp
		in := newObservation(communityID, AuthFailure, "", mustJSON(s))
		in.OccurredAt = end
		o.enqueueLocked(in)
	}
	if n := sum(w.rateSupp); n > 0 {
		s := base
		s.Suppressed, s.ByLimit = n, w.rateSupp
		in := newObservation(communityID, RateLimitExceeded, "", mustJSON(s))
		in.OccurredAt = end
		o.enqueueLocked(in)
	}
	if w.okSupp > 0 {
		s := base
		s.Suppressed = w.okSupp
		in := newObservation(communityID, AuthSuccess, "", mustJSON(s))
		in.OccurredAt = end
		o.enqueueLocked(in)
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// CloseWindows queues the summaries of every window that ended before now
// (all windows when all is set). The writer calls it every second and at
// shutdown.
func (o *Observer) CloseWindows(all bool) {
	now := o.cfg.NowFunc().UTC().Truncate(Window)
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, w := range o.windows {
		if all || w.start.Before(now) {
			o.summariesLocked(id, w)
			delete(o.windows, id)
		}
	}
}

func (o *Observer) enqueue(in Intent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.enqueueLocked(in)
}

func (o *Observer) enqueueLocked(in Intent) {
	if o.closed {
		o.log.Warn("Audit channel closed — entry lost: " + string(in.Action))
		o.cfg.Metrics.sendError()
		return
	}
	select {
	case o.queue <- in:
	default:
		o.log.Warn("Audit intent dropped: queue full", slog.String("action", string(in.Action)))
		o.cfg.Metrics.sendError()
	}
}

// Start runs the writer: it writes queued observations to audit_outbox in
// batches and closes ended windows every second, until ctx ends or Stop.
// Then it queues the open windows' summaries, stops accepting observations
// and drains the queue for up to DrainTimeout; Stop returns after that.
// Start and Stop are safe to call twice; an Observer does not accept
// observations again after it stopped.
func (o *Observer) Start(ctx context.Context) error {
	return o.StartLoop(ctx, o.run)
}

func (o *Observer) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			o.shutdown()
			return
		case <-tick.C:
			o.CloseWindows(false)
		case in := <-o.queue:
			// A batch taken off the queue is written even when ctx ends meanwhile.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DrainTimeout)
			o.writeBatch(wctx, o.collect(in))
			cancel()
		}
	}
}

// collect takes in and whatever else is queued, up to writeBatch.
func (o *Observer) collect(first Intent) []Intent {
	batch := []Intent{first}
	for len(batch) < writeBatch {
		select {
		case in := <-o.queue:
			batch = append(batch, in)
		default:
			return batch
		}
	}
	return batch
}

func (o *Observer) shutdown() {
	o.CloseWindows(true)
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	written := 0
	for {
		select {
		case in := <-o.queue:
			batch := o.collect(in)
			if o.writeBatch(ctx, batch) {
				written += len(batch)
			}
			if ctx.Err() != nil {
				o.drainTimedOut()
				return
			}
			continue
		default:
		}
		o.log.Info("audit worker flushed remaining entries", slog.Int("count", written))
		return
	}
}

func (o *Observer) drainTimedOut() {
	o.log.Warn("Audit worker did not drain in time — exiting anyway")
	for {
		select {
		case <-o.queue:
			o.cfg.Metrics.sendError()
		default:
			return
		}
	}
}

// writeBatch inserts a batch in one statement; a failure drops it.
func (o *Observer) writeBatch(ctx context.Context, batch []Intent) bool {
	k := len(batch)
	cids, keys, actions, objects, details := make([]string, k), make([]string, k), make([]string, k), make([]*string, k), make([]string, k)
	actors, times := make([][]byte, k), make([]*time.Time, k)
	for i, in := range batch {
		cids[i], keys[i], actions[i], objects[i], details[i], actors[i] = in.CommunityID, in.DedupeKey, string(in.Action), in.ObjectID, string(in.Detail), in.ActorBytes()
		if !in.OccurredAt.IsZero() {
			t := in.OccurredAt.UTC().Truncate(time.Microsecond)
			times[i] = &t
		}
	}
	_, err := o.cfg.Pool.Exec(ctx, `INSERT INTO audit_outbox (community_id, dedupe_key, action, actor_pubkey, object_id, detail, occurred_at)
		SELECT c, k, a, ac, ob, d::jsonb, COALESCE(t, clock_timestamp())
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[], $7::timestamptz[]) AS u(c, k, a, ac, ob, d, t)
		ON CONFLICT (community_id, dedupe_key) DO NOTHING`, cids, keys, actions, actors, objects, details, times)
	if err != nil {
		o.log.Error("Audit intent dropped: "+dbError(err).Error(), slog.Int("count", k), slog.Any("cause", err))
		for range batch {
			o.cfg.Metrics.sendError()
		}
		return false
	}
	o.TestSignals.Written.Signal(k)
	if o.cfg.WakeFunc != nil {
		o.cfg.WakeFunc()
	}
	return true
}
