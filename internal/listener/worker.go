package listener

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/notify"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// The fixed constants of the delivery loop (docs/PROTOCOL.md §15.5).
const (
	// ClaimLimit is how many rows one turn claims at most.
	ClaimLimit = store.ListenerClaimLimit
	// Eligibility is how long after its creation an outbox row may be
	// claimed; older rows wait for the reaper.
	Eligibility = 15 * time.Minute
	// Lease is how long a claimed row stays the claimant's: after it, any
	// claim may take the row again (and spends an attempt).
	Lease = 30 * time.Second
	// IdleMin is the pause after the first empty turn; it doubles after
	// each further empty turn up to IdleMax, and a turn with work resets it.
	IdleMin = 250 * time.Millisecond
	// IdleMax caps the pause between empty turns.
	IdleMax = 2 * time.Second
	// ClaimErrorPause is the pause after a failed claim.
	ClaimErrorPause = 2 * time.Second
	// applyTimeout bounds the statement that records one outcome. It runs
	// after the loop was told to stop as well: the delivery happened.
	applyTimeout = 10 * time.Second
)

// The outcome labels of buzz_operator_listener_deliveries_total.
const (
	outcomeAccepted = "accepted"
	outcomeRetry    = "retry"
	outcomeFailed   = "failed"
)

// Config configures a Worker.
type Config struct {
	// Pool is the writer pool. Required.
	Pool *pgxpool.Pool
	// Listeners maps each listener configured on this process (lowercase
	// hex pubkey) to its normalized delivery URL. Only these listeners'
	// rows are claimed; with none, no claim runs a statement.
	Listeners map[string]string
	// Client sends the notifications. Required.
	Client *notify.Client
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics receives the delivery metrics. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// NowFunc is the clock of the eligibility bound, the lease and the
	// retry schedule. Default time.Now.
	NowFunc func() time.Time
}

// Delivery is what became of one claimed row, as a test signal reports it.
type Delivery struct {
	// ID is the outbox row.
	ID string
	// Listener is the listener's pubkey.
	Listener string
	// Attempt is the claimed attempt (1 on the first send).
	Attempt int
	// Outcome is the metric label: accepted, retry or failed.
	Outcome string
	// Status is the HTTP status, 0 without an answer.
	Status int
	// Reason is the logged reason ("" when accepted).
	Reason string
	// Applied reports whether the fenced transition matched the row;
	// false when the claim was lost or the transition failed.
	Applied bool
}

// WorkerTestSignals are emitted by the loop. Tests only.
type WorkerTestSignals struct {
	// Claimed carries the number of rows of each successful claim, 0
	// included.
	Claimed testsignal.Signal[int]
	// ClaimFailed carries the error of each failed claim, after it was
	// logged.
	ClaimFailed testsignal.Signal[error]
	// Delivered carries each claimed row once its outcome was applied.
	Delivered testsignal.Signal[Delivery]
}

// Init initialises every signal.
func (ts *WorkerTestSignals) Init() {
	ts.Claimed.Init()
	ts.ClaimFailed.Init()
	ts.Delivered.Init()
}

// Worker is the operator-listener delivery loop (docs/PROTOCOL.md §15.5): one per
// process that has a configured listener.
type Worker struct {
	service.Base
	cfg      Config
	st       *store.Store // on cfg.Pool
	log      *slog.Logger
	m        *metrics.Listener
	routable []string

	TestSignals WorkerTestSignals
}

// NewWorker returns the worker; call Start to run it.
func NewWorker(cfg Config) *Worker {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	routable := make([]string, 0, len(cfg.Listeners))
	for pubkey := range cfg.Listeners {
		routable = append(routable, pubkey)
	}
	sort.Strings(routable)
	return &Worker{cfg: cfg, st: store.New(cfg.Pool), log: log, m: &cfg.Metrics.Listener, routable: routable}
}

// Start runs the loop until ctx ends or Stop, logging
// "operator-listener mention delivery worker started" with the number of
// listeners. Stop ends claiming at once; requests already sent finish
// within the client's timeout and their outcomes are applied before Stop
// returns. Safe to call twice.
func (w *Worker) Start(ctx context.Context) error {
	return w.StartLoop(ctx, func(ctx context.Context) {
		w.log.Info("operator-listener mention delivery worker started", slog.Int("listeners", len(w.routable)))
		w.loop(ctx)
	})
}

// Stop ends the loop, waits for the requests in flight and their outcomes,
// then closes the client's idle connections, so nothing of the worker
// outlives it. Safe to call twice.
func (w *Worker) Stop() {
	w.Base.Stop()
	w.cfg.Client.CloseIdleConnections()
}

// loop runs turns: at once after a turn with work, after a pause growing
// from IdleMin to IdleMax after empty ones, ClaimErrorPause after a failed
// claim.
func (w *Worker) loop(ctx context.Context) {
	idle := IdleMin
	for ctx.Err() == nil {
		n, err := w.runOnce(ctx)
		var pause time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			w.m.ClaimErrors.Inc()
			w.log.Error("operator-listener delivery claim failed", slog.String("err", err.Error()))
			w.TestSignals.ClaimFailed.Signal(err)
			pause = ClaimErrorPause
		case n > 0:
			idle = IdleMin
			continue
		default:
			pause = idle
			idle = min(2*idle, IdleMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// runOnce claims up to ClaimLimit rows, delivers them concurrently and
// returns once every outcome was applied. Only the claim can fail it.
// Deliveries do not end with ctx: a request in flight finishes within the
// client's timeout.
func (w *Worker) runOnce(ctx context.Context) (int, error) {
	now := w.cfg.NowFunc()
	rows, err := w.st.ListenerClaim(ctx, w.routable, ClaimLimit, now.Add(-Eligibility), now.Add(Lease))
	if err != nil {
		return 0, err
	}
	w.TestSignals.Claimed.Signal(len(rows))
	dctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, d := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.deliver(dctx, d)
		}()
	}
	wg.Wait()
	return len(rows), nil
}

// deliver sends one claimed row and applies its outcome (docs/PROTOCOL.md §15.7).
func (w *Worker) deliver(ctx context.Context, d store.ListenerDelivery) {
	out := w.send(ctx, d)
	res := Delivery{ID: d.ID, Listener: d.Listener, Attempt: d.Attempts, Status: out.Status}
	attrs := []any{
		slog.String("outbox_id", d.ID), slog.String("listener", d.Listener), slog.String("event_id", d.EventID),
		slog.Int("attempt", d.Attempts), slog.Int("status", out.Status),
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	var (
		applied bool
		err     error
	)
	switch {
	case out.Kind == notify.Accepted:
		res.Outcome = outcomeAccepted
		applied, err = w.st.ListenerComplete(actx, d.ID, d.ClaimID)
	case out.Kind == notify.Retry && d.Attempts < notify.MaxAttempts:
		res.Outcome, res.Reason = outcomeRetry, out.Reason
		delay := notify.RetryDelay(d.Attempts)
		w.log.Warn("operator-listener delivery failed; retrying",
			append(attrs, slog.String("reason", out.Reason), slog.Duration("retry_in", delay))...)
		applied, err = w.st.ListenerRetry(actx, d.ID, d.ClaimID, w.cfg.NowFunc().Add(delay))
	default:
		res.Outcome, res.Reason = outcomeFailed, out.Reason
		if out.Kind == notify.Retry {
			res.Reason = "retries exhausted: " + out.Reason
		}
		w.log.Warn("operator-listener delivery failed permanently", append(attrs, slog.String("reason", res.Reason))...)
		applied, err = w.st.ListenerComplete(actx, d.ID, d.ClaimID)
	}
	w.m.Deliveries.WithLabelValues(res.Outcome).Inc()
	switch {
	case err != nil:
		w.log.Error("operator-listener delivery outcome not recorded",
			append(attrs, slog.String("outcome", res.Outcome), slog.String("err", err.Error()))...)
	case !applied:
		w.log.Warn("operator-listener delivery completion lost its claim", append(attrs, slog.String("outcome", res.Outcome))...)
	}
	res.Applied = applied && err == nil
	w.TestSignals.Delivered.Signal(res)
}

// send POSTs the row's notification to its listener and times the POST.
func (w *Worker) send(ctx context.Context, d store.ListenerDelivery) notify.Outcome {
	url, ok := w.cfg.Listeners[d.Listener]
	if !ok { // claims take only routable listeners
		return notify.Outcome{Kind: notify.Terminal, Reason: "listener not configured"}
	}
	start := time.Now()
	out := w.cfg.Client.Send(ctx, url, notify.Notification{
		Target: d.Target, CommunityHost: d.CommunityHost, EventID: d.EventID,
		EventKind: d.EventKind, EventCreatedAt: d.EventCreatedAt,
	})
	if out.Kind != notify.Terminal || out.Status != 0 { // 0 and terminal: nothing was sent
		w.m.DeliverySeconds.Observe(time.Since(start).Seconds())
	}
	return out
}
