package windowbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/buzz-relay/buzz/internal/benchload"
	"github.com/buzz-relay/buzz/internal/pg"
)

// benchmark runs the whole benchmark against t: fixture, warm case, stale
// case, plan checks, and returns the report. An error means the benchmark
// could not run; failed pass rules are in the report (Pass false).
func benchmark(ctx context.Context, t *target, cfg Config, p *progress) (*report, error) {
	began := time.Now()
	pool, err := pg.Open(ctx, t.DBURL, pg.PoolConfig{MaxConns: benchload.DefaultWriters + 2})
	if err != nil {
		return nil, fmt.Errorf("open the relay's database: %w", err)
	}
	defer pool.Close()
	rep := &report{Sizes: cfg.sizes, Failures: []string{}, Load: map[string]string{"fixture": loadAverage()}}
	if err := describe(ctx, pool, rep); err != nil {
		return nil, err
	}
	fx, err := loadFixture(ctx, pool, t.App.Store(), cfg.sizes, cfg.seed, p)
	if err != nil {
		return nil, err
	}
	rep.Fixture = fx
	rng := rand.New(rand.NewPCG(cfg.seed, 0x7037))
	cl := newWindowClient(t.Addr, benchHost, newAuthor("reader").sk)
	defer cl.close()

	lo, hi := deepRange(len(fx.replies))
	deep := fx.replies[lo+rng.IntN(hi-lo+1)]
	sh, err := scanShape(ctx, pool, fx.communityID, selectionRequest(fx.channel, fx.root.ID, &deep))
	if err != nil {
		return nil, fmt.Errorf("plan check: %w", err)
	}
	rep.Plans = append(rep.Plans, planReport{Case: "R deep cursor, fresh statistics", shape: sh})
	if !sh.OK {
		rep.Failures = append(rep.Failures, "plan, R deep cursor, fresh statistics: "+sh.Why)
	}

	rep.Load["warm"] = loadAverage()
	warm, failures, err := warmCase(ctx, cl, pool, fx, cfg, rng, p)
	if err != nil {
		return nil, err
	}
	rep.Warm, rep.Failures = warm, append(rep.Failures, failures...)

	rep.Load["stale"] = loadAverage()
	stale, plans, failures, err := staleCase(ctx, t, cl, pool, fx, cfg, rng, p)
	if err != nil {
		return nil, err
	}
	rep.Stale, rep.Plans, rep.Failures = stale, append(rep.Plans, plans...), append(rep.Failures, failures...)
	rep.Load["end"] = loadAverage()
	rep.Pass = len(rep.Failures) == 0
	rep.Seconds = round3(time.Since(began).Seconds())
	return rep, nil
}
