package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

const (
	// ReplayPurgeInterval is how often used NIP-98 ids are purged.
	ReplayPurgeInterval = 60 * time.Second
	// ReplayMaxAge is how long a used NIP-98 id is kept: longer than the
	// ±60 s acceptance window on both sides (docs/PROTOCOL.md §3.2).
	ReplayMaxAge = 180 * time.Second
)

// ReplayPurgeConfig configures ReplayPurge.
type ReplayPurgeConfig struct {
	// Store is the relay's store. Required.
	Store *store.Store
	// Logger; nil discards.
	Logger *slog.Logger
	// Interval between runs. Default ReplayPurgeInterval.
	Interval time.Duration
	// MaxAge of the rows kept. Default ReplayMaxAge.
	MaxAge time.Duration
}

// ReplayPurgeTestSignals are emitted by the loop. Tests only.
type ReplayPurgeTestSignals struct {
	// Purged carries the number of rows each successful run deleted.
	Purged testsignal.Signal[int64]
	// Failed carries the error of each failed run, after it was logged.
	Failed testsignal.Signal[error]
}

// Init initialises every signal.
func (ts *ReplayPurgeTestSignals) Init() {
	ts.Purged.Init()
	ts.Failed.Init()
}

// ReplayPurge deletes the NIP-98 replay rows older than MaxAge.
type ReplayPurge struct {
	service.Base
	cfg ReplayPurgeConfig
	log *slog.Logger

	TestSignals ReplayPurgeTestSignals
}

// NewReplayPurge returns the service; call Start to run it.
func NewReplayPurge(cfg ReplayPurgeConfig) *ReplayPurge {
	if cfg.Interval <= 0 {
		cfg.Interval = ReplayPurgeInterval
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = ReplayMaxAge
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ReplayPurge{cfg: cfg, log: log}
}

// Start runs the purge every Interval until ctx ends or Stop. Safe to call
// twice.
func (r *ReplayPurge) Start(ctx context.Context) error {
	return r.StartLoop(ctx, func(ctx context.Context) {
		service.Tick(ctx, r.cfg.Interval, nil, func(ctx context.Context) {
			n, err := r.runOnce(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("nip98 replay purge failed", slog.String("err", err.Error()))
				}
				r.TestSignals.Failed.Signal(err)
				return
			}
			r.TestSignals.Purged.Signal(n)
		})
	})
}

// runOnce deletes the expired rows and returns how many.
func (r *ReplayPurge) runOnce(ctx context.Context) (int64, error) {
	return r.cfg.Store.NIP98Purge(ctx, r.cfg.MaxAge)
}
