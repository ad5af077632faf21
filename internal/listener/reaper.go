package listener

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// The retention of docs/PROTOCOL.md §15.8.
const (
	// OutboxReapInterval is how often outbox rows past Eligibility are
	// deleted.
	OutboxReapInterval = 5 * time.Minute
	// RegistrationReapInterval is how often expired registrations are
	// deleted.
	RegistrationReapInterval = 24 * time.Hour
	// RegistrationLifetime is how long a registration lives after it was
	// created or last renewed.
	RegistrationLifetime = 30 * 24 * time.Hour
	// reapTimeout bounds one reap.
	reapTimeout = time.Minute
)

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Pool is the writer pool. Required.
	Pool *pgxpool.Pool
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics receives the reap metrics. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// OutboxInterval between outbox reaps. Default OutboxReapInterval.
	OutboxInterval time.Duration
	// RegistrationInterval between registration reaps. Default
	// RegistrationReapInterval.
	RegistrationInterval time.Duration
}

// ReaperTestSignals are emitted by the loop. Tests only.
type ReaperTestSignals struct {
	// OutboxReaped carries the rows each successful outbox reap deleted.
	OutboxReaped testsignal.Signal[int64]
	// OutboxFailed carries the error of each failed outbox reap, after it
	// was logged.
	OutboxFailed testsignal.Signal[error]
	// RegistrationsReaped carries the rows each successful registration
	// reap deleted.
	RegistrationsReaped testsignal.Signal[int64]
	// RegistrationsFailed carries the error of each failed registration
	// reap, after it was logged.
	RegistrationsFailed testsignal.Signal[error]
}

// Init initialises every signal.
func (ts *ReaperTestSignals) Init() {
	ts.OutboxReaped.Init()
	ts.OutboxFailed.Init()
	ts.RegistrationsReaped.Init()
	ts.RegistrationsFailed.Init()
}

// Reaper deletes outbox rows older than Eligibility and registrations
// older than RegistrationLifetime (docs/PROTOCOL.md §15.8). It runs on every process,
// whether listeners are configured or not, so a deployment that dropped
// its listeners still cleans up; several processes may run it against one
// database (both deletes are idempotent).
type Reaper struct {
	service.Base
	cfg ReaperConfig
	st  *store.Store // on cfg.Pool
	log *slog.Logger
	m   *metrics.Listener

	TestSignals ReaperTestSignals
}

// NewReaper returns the reaper; call Start to run it.
func NewReaper(cfg ReaperConfig) *Reaper {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	if cfg.OutboxInterval <= 0 {
		cfg.OutboxInterval = OutboxReapInterval
	}
	if cfg.RegistrationInterval <= 0 {
		cfg.RegistrationInterval = RegistrationReapInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{cfg: cfg, st: store.New(cfg.Pool), log: log, m: &cfg.Metrics.Listener}
}

// Start logs "operator-listener registration cleanup started", runs both
// reaps at once and then each every its interval, until ctx ends or Stop.
// Safe to call twice.
func (r *Reaper) Start(ctx context.Context) error {
	return r.StartLoop(ctx, func(ctx context.Context) {
		r.log.Info("operator-listener registration cleanup started")
		r.reapOutbox(ctx)
		r.reapRegistrations(ctx)
		outbox := time.NewTicker(r.cfg.OutboxInterval)
		defer outbox.Stop()
		registrations := time.NewTicker(r.cfg.RegistrationInterval)
		defer registrations.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-outbox.C:
				r.reapOutbox(ctx)
			case <-registrations.C:
				r.reapRegistrations(ctx)
			}
		}
	})
}

// reapOutbox is one outbox reap, logged here.
func (r *Reaper) reapOutbox(ctx context.Context) {
	n, err := r.runOutbox(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("operator-listener outbox reap failed", slog.String("err", err.Error()))
		}
		r.TestSignals.OutboxFailed.Signal(err)
		return
	}
	r.TestSignals.OutboxReaped.Signal(n)
}

// reapRegistrations is one registration reap, logged here.
func (r *Reaper) reapRegistrations(ctx context.Context) {
	n, err := r.runRegistrations(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("operator-listener registration cleanup failed", slog.String("err", err.Error()))
		}
		r.TestSignals.RegistrationsFailed.Signal(err)
		return
	}
	r.TestSignals.RegistrationsReaped.Signal(n)
}

// runOutbox deletes the outbox rows past Eligibility, then samples the
// outbox by state.
func (r *Reaper) runOutbox(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	n, err := r.st.ListenerReapOutbox(ctx, Eligibility)
	if err != nil {
		return 0, err
	}
	r.m.Reaped.WithLabelValues("outbox").Add(float64(n))
	pending, sending, err := r.st.ListenerOutboxCounts(ctx)
	if err != nil {
		return n, err
	}
	r.m.OutboxRows.WithLabelValues("pending").Set(float64(pending))
	r.m.OutboxRows.WithLabelValues("sending").Set(float64(sending))
	return n, nil
}

// runRegistrations deletes the registrations past RegistrationLifetime.
func (r *Reaper) runRegistrations(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	n, err := r.st.ListenerReapRegistrations(ctx, RegistrationLifetime)
	if err != nil {
		return 0, err
	}
	r.m.Reaped.WithLabelValues("pubkeys").Add(float64(n))
	return n, nil
}
