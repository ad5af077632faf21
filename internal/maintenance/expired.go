package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

const (
	// ExpiredPurgeBatch is how many expired events one transaction deletes
	// (docs/PROTOCOL.md §6.6): small enough that the row locks and the WAL
	// of one batch stay short.
	ExpiredPurgeBatch = 500
	// ExpiredPurgeMaxBatches bounds one pass: at most this many batches,
	// so a backlog is worked off over several passes, never in one long
	// run.
	ExpiredPurgeMaxBatches = 20
)

// ExpiredPurgeConfig configures ExpiredPurge.
type ExpiredPurgeConfig struct {
	// Pool is the writer pool; each batch is one transaction on it. Required.
	Pool *pgxpool.Pool
	// Logger; nil discards.
	Logger *slog.Logger
	// Interval between passes (BUZZ_EXPIRED_PURGE_INTERVAL_MS). Required:
	// app passes config.Config.ExpiredPurgeInterval.
	Interval time.Duration
	// Batch is the events deleted per transaction. Default ExpiredPurgeBatch.
	Batch int
	// MaxBatches bounds the batches of one pass. Default
	// ExpiredPurgeMaxBatches.
	MaxBatches int
}

// ExpiredPurgeTestSignals are emitted by the loop. Tests only.
type ExpiredPurgeTestSignals struct {
	// Purged carries the number of events each successful pass deleted.
	Purged testsignal.Signal[int64]
	// Failed carries the error of each failed pass, after it was logged.
	Failed testsignal.Signal[error]
}

// Init initialises every signal.
func (ts *ExpiredPurgeTestSignals) Init() {
	ts.Purged.Init()
	ts.Failed.Init()
}

// ExpiredPurge deletes the events whose NIP-40 expiration has passed
// (docs/PROTOCOL.md §6.6), with their mention and thread rows, in bounded
// batches (store.ExpiredPurge). The audit chain keeps their entries.
type ExpiredPurge struct {
	service.Base
	cfg ExpiredPurgeConfig
	log *slog.Logger

	TestSignals ExpiredPurgeTestSignals
}

// NewExpiredPurge returns the service; call Start to run it.
func NewExpiredPurge(cfg ExpiredPurgeConfig) *ExpiredPurge {
	if cfg.Batch <= 0 {
		cfg.Batch = ExpiredPurgeBatch
	}
	if cfg.MaxBatches <= 0 {
		cfg.MaxBatches = ExpiredPurgeMaxBatches
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ExpiredPurge{cfg: cfg, log: log}
}

// Start runs a pass every Interval until ctx ends or Stop. Safe to call
// twice. An Interval that is not positive is an error.
func (r *ExpiredPurge) Start(ctx context.Context) error {
	if r.cfg.Interval <= 0 {
		return fmt.Errorf("expired purge: interval %v is not positive", r.cfg.Interval)
	}
	return r.StartLoop(ctx, func(ctx context.Context) {
		service.Tick(ctx, r.cfg.Interval, nil, func(ctx context.Context) {
			n, err := r.runOnce(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("expired event purge failed", slog.String("err", err.Error()))
				}
				r.TestSignals.Failed.Signal(err)
				return
			}
			if n > 0 {
				r.log.Debug("expired events purged", slog.Int64("events", n))
			}
			r.TestSignals.Purged.Signal(n)
		})
	})
}

// runOnce deletes expired events batch by batch until a batch is not full
// or MaxBatches ran, and returns how many it deleted.
func (r *ExpiredPurge) runOnce(ctx context.Context) (int64, error) {
	var total int64
	for range r.cfg.MaxBatches {
		var n int64
		err := pg.InTx(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
			var err error
			n, err = store.New(tx).ExpiredPurge(ctx, r.cfg.Batch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("expired purge: %w", err)
		}
		total += n
		if n < int64(r.cfg.Batch) {
			break
		}
	}
	return total, nil
}
