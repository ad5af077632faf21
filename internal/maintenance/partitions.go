package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// PartitionsInterval is how often partition maintenance runs (docs/PROTOCOL.md §3.3).
const PartitionsInterval = 24 * time.Hour

// PartitionsConfig configures Partitions.
type PartitionsConfig struct {
	// Pool is the relay's pool. Required.
	Pool *pgxpool.Pool
	// Logger; nil discards.
	Logger *slog.Logger
	// Errors counts failed runs (buzz_partition_maintenance_errors_total).
	// Nil counts nowhere.
	Errors prometheus.Counter
	// Interval between runs. Default PartitionsInterval.
	Interval time.Duration
	// Ahead is how many months after the current one are kept ready.
	// Default pg.DefaultPartitionsAhead.
	Ahead int
	// NowFunc is the clock that names the months. Default time.Now.
	NowFunc func() time.Time
}

// PartitionsTestSignals are emitted by the loop. Tests only.
type PartitionsTestSignals struct {
	// Ran carries the error of each run of the loop (nil on success), as
	// pg.EnsurePartitions returned it.
	Ran testsignal.Signal[error]
}

// Init initialises every signal.
func (ts *PartitionsTestSignals) Init() { ts.Ran.Init() }

// Partitions keeps the monthly events partitions ready: this month's and
// the next Ahead months' (pg.EnsurePartitions).
type Partitions struct {
	service.Base
	cfg PartitionsConfig
	log *slog.Logger

	TestSignals PartitionsTestSignals
}

// NewPartitions returns the service; call Ensure at startup, then Start.
func NewPartitions(cfg PartitionsConfig) *Partitions {
	if cfg.Interval <= 0 {
		cfg.Interval = PartitionsInterval
	}
	if cfg.Ahead <= 0 {
		cfg.Ahead = pg.DefaultPartitionsAhead
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Errors == nil {
		cfg.Errors = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Partitions{cfg: cfg, log: log}
}

// Start runs the maintenance every Interval until ctx ends or Stop; the
// first run is one Interval after Start (startup calls Ensure itself).
// Safe to call twice.
func (p *Partitions) Start(ctx context.Context) error {
	return p.StartLoop(ctx, func(ctx context.Context) {
		service.Tick(ctx, p.cfg.Interval, nil, func(ctx context.Context) {
			err := p.runOnce(ctx)
			if ctx.Err() != nil {
				return // stopping: a run cut short is not a failure
			}
			_ = p.handle(err) // a current-month failure waits for the next run
			p.TestSignals.Ran.Signal(err)
		})
	})
}

// Ensure runs the maintenance once, as startup does: it returns an error
// only when the current month's partition could not be created, and counts
// and logs a failure for a later month (retried at the next run).
func (p *Partitions) Ensure(ctx context.Context) error {
	return p.handle(p.runOnce(ctx))
}

// runOnce creates the missing partitions.
func (p *Partitions) runOnce(ctx context.Context) error {
	return pg.EnsurePartitions(ctx, p.cfg.Pool, p.cfg.NowFunc(), p.cfg.Ahead)
}

// handle turns a run's error into what the caller acts on: the current
// month's failure is returned, any other is counted and logged.
func (p *Partitions) handle(err error) error {
	if err == nil {
		return nil
	}
	var pe *pg.PartitionError
	if errors.As(err, &pe) && pe.Current {
		return fmt.Errorf("create the current month's events partition: %w", err)
	}
	p.cfg.Errors.Inc()
	p.log.Error("partition maintenance failed", slog.String("err", err.Error()))
	return nil
}
