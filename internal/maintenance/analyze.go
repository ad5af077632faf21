package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

const (
	// AnalyzeInterval is how often hot tables are analyzed.
	AnalyzeInterval = 10 * time.Second
	// AnalyzeMinRows is the fewest changed rows that make a table hot
	// (pg.AnalyzeHot's minRows).
	AnalyzeMinRows = 1000
)

// AnalyzeConfig configures Analyze.
type AnalyzeConfig struct {
	// Pool is the relay's pool. Required.
	Pool *pgxpool.Pool
	// Logger; nil discards.
	Logger *slog.Logger
	// Interval between runs. Default AnalyzeInterval.
	Interval time.Duration
	// MinRows is passed to pg.AnalyzeHot. Default AnalyzeMinRows.
	MinRows int64
}

// AnalyzeTestSignals are emitted by the loop. Tests only.
type AnalyzeTestSignals struct {
	// Analyzed carries the tables of each successful run (possibly none).
	Analyzed testsignal.Signal[[]string]
	// Failed carries the error of each failed run, after it was logged.
	Failed testsignal.Signal[error]
}

// Init initialises every signal.
func (ts *AnalyzeTestSignals) Init() {
	ts.Analyzed.Init()
	ts.Failed.Init()
}

// Analyze runs ANALYZE on the events partitions and read-path side tables
// whose statistics fell behind their data (pg.AnalyzeHot), so plans follow
// a young partition's data before autovacuum gets to it.
type Analyze struct {
	service.Base
	cfg AnalyzeConfig
	log *slog.Logger

	TestSignals AnalyzeTestSignals
}

// NewAnalyze returns the service; call Start to run it.
func NewAnalyze(cfg AnalyzeConfig) *Analyze {
	if cfg.Interval <= 0 {
		cfg.Interval = AnalyzeInterval
	}
	if cfg.MinRows <= 0 {
		cfg.MinRows = AnalyzeMinRows
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Analyze{cfg: cfg, log: log}
}

// Start runs the analysis every Interval until ctx ends or Stop. Safe to
// call twice.
func (a *Analyze) Start(ctx context.Context) error {
	return a.StartLoop(ctx, func(ctx context.Context) {
		service.Tick(ctx, a.cfg.Interval, nil, func(ctx context.Context) {
			names, err := a.runOnce(ctx)
			if err != nil && ctx.Err() == nil {
				a.log.Error("analyze failed", slog.String("err", err.Error()))
			} else if len(names) > 0 {
				a.log.Debug("analyzed", slog.Any("tables", names))
			}
			if err != nil {
				a.TestSignals.Failed.Signal(err)
			} else {
				a.TestSignals.Analyzed.Signal(names)
			}
		})
	})
}

// runOnce analyzes the hot tables and returns their names.
func (a *Analyze) runOnce(ctx context.Context) ([]string, error) {
	return pg.AnalyzeHot(ctx, a.cfg.Pool, a.cfg.MinRows)
}
