package windowbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/window"
)

// warmTarget is the benchmark's target (a): p50 execution of a warm deep page.
const warmTarget = 5 * time.Millisecond

// warmReport is the warm case.
type warmReport struct {
	// Positions are the newest-first positions of R the cursors come from.
	Positions [2]int `json:"cursor_positions"`
	Warmup    int    `json:"warmup_pages"`
	// EndToEnd is POST /query on loopback, NIP-98 signed before the clock.
	EndToEnd dist    `json:"end_to_end"`
	Slowest  slowest `json:"slowest_page"`
	// Execution and Planning sum the page's scan chunks and load, from
	// EXPLAIN (ANALYZE, TIMING OFF) at sampled cursors.
	Execution dist    `json:"execution"`
	Planning  dist    `json:"planning"`
	Chunks    float64 `json:"scan_chunks_per_page"`
	// ShortPages counts sampled selections that did not retain a full
	// page with more to come (every deep cursor has more than a page left).
	ShortPages int  `json:"short_pages"`
	Pass       bool `json:"pass"`
}

// deepRange is the newest-first positions the benchmark draws deep cursors from:
// 50,000–99,000 of 100,000, scaled to n, and never so close to the end
// that a page of 50 live rows and its probe might not follow (a small
// fixture).
func deepRange(n int) (lo, hi int) { return n / 2, min(n*99/100, n-4*pageLimit) }

// warmCase runs warm-up pages, then the measured pages, then the EXPLAINs.
func warmCase(ctx context.Context, cl *windowClient, pool *pgxpool.Pool, fx *fixture, cfg Config, rng *rand.Rand, p *progress) (*warmReport, []string, error) {
	lo, hi := deepRange(len(fx.replies))
	w := &warmReport{Positions: [2]int{lo, hi}, Warmup: cfg.warmup}
	draw := func() *window.Cursor {
		c := fx.replies[lo+rng.IntN(hi-lo+1)]
		return &c
	}
	var failures []string
	fail := func(format string, args ...any) {
		if len(failures) < 10 {
			failures = append(failures, "warm: "+fmt.Sprintf(format, args...))
		}
	}
	p.logf("warm: %d warm-up pages, %d measured pages at positions %d–%d of R", cfg.warmup, cfg.pages, lo, hi)
	var lat []time.Duration
	for i := range cfg.warmup + cfg.pages {
		cur := draw()
		pg, err := cl.fetch(ctx, fx.channel, fx.root.ID, cur)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case pg.Status != http.StatusOK:
			fail("page at %d:%s: %d %s", cur.CreatedAt, cur.ID, pg.Status, pg.Error)
		case len(pg.Rows) != pageLimit || !pg.HasMore:
			fail("page at %d:%s: %d rows, has_more %v; want %d rows and more", cur.CreatedAt, cur.ID, len(pg.Rows), pg.HasMore, pageLimit)
		}
		if i >= cfg.warmup {
			lat = append(lat, pg.Took)
			w.Slowest.note(pg.Took, fmt.Sprintf("page %d at %d:%s", i-cfg.warmup+1, cur.CreatedAt, cur.ID))
		}
	}
	w.EndToEnd = distOf(lat)
	p.logf("warm: EXPLAIN (ANALYZE, TIMING OFF) of the scan and load statements at %d cursors", cfg.samples)
	var exec, planning []time.Duration
	chunks := 0
	for range cfg.samples {
		cur := draw()
		c, err := explainPage(ctx, pool, fx.communityID, selectionRequest(fx.channel, fx.root.ID, cur))
		if err != nil {
			return nil, nil, fmt.Errorf("warm: %w", err)
		}
		exec, planning = append(exec, c.Execution), append(planning, c.Planning)
		chunks += c.Chunks
		if c.Retained != pageLimit || !c.HasMore {
			w.ShortPages++
			fail("selection at %d:%s retained %d rows, has_more %v", cur.CreatedAt, cur.ID, c.Retained, c.HasMore)
		}
	}
	w.Execution, w.Planning = distOf(exec), distOf(planning)
	w.Chunks = round3(float64(chunks) / float64(cfg.samples))
	w.Pass = percentile(sorted(exec), 50) <= warmTarget
	if !w.Pass {
		fail("p50 execution %.3f ms > %s", w.Execution.P50, warmTarget)
	}
	return w, failures, nil
}
