// Package windowbench is "buzz-bench windows", benchmark P7
// (docs/PERFORMANCE.md, "Conversation windows"): newest-first thread
// windows (POST /query with thread_window) on a 100k-reply thread.
//
// It starts everything it measures on loopback: a private PostgreSQL
// cluster from the machine's binaries (pgcluster, the relay's default
// settings, in a temporary directory unless --data-dir names one) and a
// whole relay in this process. Then it
//
//  1. loads the fixture: events through the store's batch insert
//     (internal/benchload, every event really signed, the deleted replies
//     soft-deleted), thread_metadata with COPY (counters as ingest leaves
//     them), then VACUUM ANALYZE;
//  2. warm case: warm-up pages, then pages at cursors drawn from the deep
//     half of root R over NIP-98 POST /query, and EXPLAIN (ANALYZE, TIMING
//     OFF) of the engine's scan and load statements at sampled cursors;
//  3. stale statistics: autovacuum off, a burst of replies to a new root R2
//     through the relay's WebSocket EVENT path, no ANALYZE, then the head
//     page, the walk of every page and random deep cursors; the same for R;
//  4. plan shape: the scan of a deep cursor on R and on R2 walks
//     idx_thread_metadata_window under a Limit, with no Sort over
//     thread_metadata;
//
// and prints one JSON report on stdout and a table on stderr. The exit
// status is 0 when every pass rule holds, 1 when one fails, 2 on an
// error. `go test -bench ThreadWindow ./internal/windowbench` runs the same
// benchmark against the test helper's PostgreSQL.
//
// It does NOT target a relay or database it did not start, and it does NOT
// tune PostgreSQL beyond the relay's own private-cluster settings.
package windowbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

// Config is one run's shape, made by Flags. The defaults are the sizes of
// the benchmark (docs/PERFORMANCE.md, "Thread windows").
type Config struct {
	sizes sizes
	// warmup and pages are the warm case's unmeasured and measured pages.
	warmup, pages int
	// samples is the number of warm cursors whose statements are EXPLAINed.
	samples int
	// burst is the replies inserted through the relay per stale root.
	burst int
	// conns and inflight shape the burst: sockets, EVENTs in flight each.
	conns, inflight int
	// deep is the random deep cursors fetched per stale root.
	deep int
	// dataDir holds the private cluster; "" is a temporary directory.
	dataDir string
	// timeout caps the whole run.
	timeout time.Duration
	seed    uint64
}

// sizes is the benchmark's fixture.
type sizes struct {
	// Replies is root R's reply count; PerSecond of them share a second.
	Replies   int `json:"root_replies"`
	PerSecond int `json:"root_replies_per_second"`
	// OtherRoots and OtherReplies are the other threads of channel C.
	OtherRoots   int `json:"other_roots"`
	OtherReplies int `json:"other_replies"`
	// Communities other than bench.local, each with CommunityEvents events.
	Communities     int `json:"other_communities"`
	CommunityEvents int `json:"events_per_other_community"`
	// DeletedPct of every reply is soft-deleted.
	DeletedPct int `json:"deleted_pct"`
	// ContentBytes is the approximate content length.
	ContentBytes int `json:"content_bytes"`
}

// specSizes are the benchmark's sizes.
var specSizes = sizes{Replies: 100_000, PerSecond: 4, OtherRoots: 10_000, OtherReplies: 1_000_000,
	Communities: 2, CommunityEvents: 200_000, DeletedPct: 5, ContentBytes: 200}

// smallSizes are a quick smoke run's (--small, go test -short).
var smallSizes = sizes{Replies: 2_000, PerSecond: 4, OtherRoots: 100, OtherReplies: 20_000,
	Communities: 2, CommunityEvents: 4_000, DeletedPct: 5, ContentBytes: 200}

// Fixed by the benchmark: the page shape of every request.
const (
	pageLimit = 50
	pageDepth = 100
)

// pageKinds are the requested row kinds.
var pageKinds = []int{9, 40002}

// Flags registers the windows benchmark's flags on fs and returns the
// function that checks them once fs is parsed.
func Flags(fs *pflag.FlagSet) func() (Config, error) {
	c := Config{sizes: specSizes}
	small := fs.Bool("small", false, "smoke sizes: 2,000 replies on R, 100 other roots with 20,000 replies, 2 × 4,000 other events, 100 warm pages, 1,000-reply bursts; other flags still apply")
	s := &c.sizes
	fs.IntVar(&s.Replies, "replies", s.Replies, "replies of root R")
	fs.IntVar(&s.PerSecond, "per-second", s.PerSecond, "replies of R per second of created_at")
	fs.IntVar(&s.OtherRoots, "other-roots", s.OtherRoots, "other roots in channel C")
	fs.IntVar(&s.OtherReplies, "other-replies", s.OtherReplies, "replies of the other roots, interleaved with R's")
	fs.IntVar(&s.Communities, "communities", s.Communities, "other communities")
	fs.IntVar(&s.CommunityEvents, "community-events", s.CommunityEvents, "events per other community")
	fs.IntVar(&c.warmup, "warmup", 50, "warm case: warm-up pages")
	fs.IntVar(&c.pages, "pages", 1000, "warm case: measured pages")
	fs.IntVar(&c.samples, "samples", 100, "warm case: cursors whose statements are EXPLAINed")
	fs.IntVar(&c.burst, "burst", 10_000, "stale case: replies inserted through the relay per root")
	fs.IntVar(&c.conns, "conns", 8, "stale case: publishing sockets, one author each")
	fs.IntVar(&c.inflight, "inflight", 8, "stale case: EVENTs in flight per socket")
	fs.IntVar(&c.deep, "deep", 20, "stale case: random deep cursors per root")
	fs.StringVar(&c.dataDir, "data-dir", "", "directory of the private PostgreSQL cluster (default: a temporary one, removed at the end)")
	fs.DurationVar(&c.timeout, "timeout", 90*time.Minute, "cap on the whole run")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the fixture's and the cursors' random choices")
	return func() (Config, error) {
		if fs.NArg() > 0 {
			return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if *small {
			set := map[string]bool{}
			fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
			c.applySmall(set)
		}
		return c, c.check()
	}
}

// applySmall replaces every size and count the command line did not set
// with its smoke value.
func (c *Config) applySmall(set map[string]bool) {
	for name, v := range map[string]struct {
		p   *int
		val int
	}{
		"replies": {&c.sizes.Replies, smallSizes.Replies}, "per-second": {&c.sizes.PerSecond, smallSizes.PerSecond},
		"other-roots": {&c.sizes.OtherRoots, smallSizes.OtherRoots}, "other-replies": {&c.sizes.OtherReplies, smallSizes.OtherReplies},
		"communities": {&c.sizes.Communities, smallSizes.Communities}, "community-events": {&c.sizes.CommunityEvents, smallSizes.CommunityEvents},
		"pages": {&c.pages, 100}, "samples": {&c.samples, 20}, "burst": {&c.burst, 1000},
	} {
		if !set[name] {
			*v.p = v.val
		}
	}
}

func (c Config) check() error {
	s := c.sizes
	switch {
	case s.Replies < 4*pageLimit:
		return fmt.Errorf("--replies must be at least %d", 4*pageLimit)
	case s.PerSecond < 1:
		return errors.New("--per-second must be positive")
	case s.OtherRoots < 0 || s.OtherReplies < 0 || s.Communities < 0 || s.CommunityEvents < 0:
		return errors.New("--other-roots, --other-replies, --communities and --community-events must not be negative")
	case s.OtherReplies > 0 && s.OtherRoots == 0:
		return errors.New("--other-replies needs --other-roots")
	case c.burst < 3*pageLimit:
		return fmt.Errorf("--burst must be at least %d", 3*pageLimit)
	case c.pages < 1 || c.samples < 1 || c.warmup < 0 || c.deep < 1:
		return errors.New("--pages, --samples and --deep must be positive, --warmup not negative")
	case c.conns < 1 || c.inflight < 1:
		return errors.New("--conns and --inflight must be positive")
	case c.timeout <= 0:
		return errors.New("--timeout must be positive")
	}
	return nil
}

// Run starts the private cluster and the relay, runs the benchmark of cfg
// and prints the JSON report on stdout and the table on stderr. It returns
// 0 when every pass rule holds, 1 when one fails, 2 after printing an
// error on stderr.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	progress := newProgress(stderr)
	t, err := startTarget(ctx, cfg.dataDir, progress)
	if err != nil {
		fmt.Fprintf(stderr, "buzz-bench windows: %v\n", err)
		return 2
	}
	rep, err := benchmark(ctx, t, cfg, progress)
	t.close()
	if err != nil {
		fmt.Fprintf(stderr, "buzz-bench windows: %v\n", err)
		return 2
	}
	writeReport(stdout, stderr, rep)
	if !rep.Pass {
		return 1
	}
	return 0
}
