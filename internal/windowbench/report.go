package windowbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/benchstat"
)

// report is the run's result, printed as JSON and as a table.
type report struct {
	Commit string `json:"commit"`
	// Load is /proc/loadavg at the start of each phase: other work on the
	// machine shows here.
	Load     map[string]string `json:"load_average"`
	Postgres string            `json:"postgres"`
	Settings map[string]string `json:"postgres_settings"`
	Machine  machine           `json:"machine"`
	Sizes    sizes             `json:"sizes"`
	Fixture  *fixture          `json:"fixture"`
	Warm     *warmReport       `json:"warm,omitempty"`
	Stale    []*staleReport    `json:"stale,omitempty"`
	Plans    []planReport      `json:"plans"`
	Pass     bool              `json:"pass"`
	Failures []string          `json:"failures"`
	Seconds  float64           `json:"wall_seconds"`
}

// planReport is one plan-shape check.
type planReport struct {
	Case string `json:"case"`
	shape
}

// slowest names the slowest page of a case.
type slowest struct {
	Page string  `json:"page"`
	Ms   float64 `json:"ms"`
	// Load is /proc/loadavg when it was answered: the machine may be shared.
	Load string `json:"load_average"`
}

func (s *slowest) note(took time.Duration, page string) {
	if ms := msOf(took); ms > s.Ms || s.Page == "" {
		*s = slowest{Page: page, Ms: ms, Load: loadAverage()}
	}
}

// loadAverage is the first three fields of /proc/loadavg, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// machine is what the run ran on.
type machine struct {
	CPU      string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	MemoryMB int64  `json:"memory_mb"`
	OS       string `json:"os"`
	Go       string `json:"go"`
}

// dist is a latency distribution in milliseconds (nearest rank).
type dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func distOf(d []time.Duration) dist {
	s := sorted(d)
	return dist{N: len(s), P50: msOf(percentile(s, 50)), P95: msOf(percentile(s, 95)),
		P99: msOf(percentile(s, 99)), Max: msOf(percentile(s, 100))}
}

// sorted is a sorted copy of d.
func sorted(d []time.Duration) []time.Duration { return benchstat.Sorted(d) }

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	return benchstat.Percentile(sorted, p)
}

func msOf(d time.Duration) float64 { return benchstat.Millis(d, 3) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// describe fills the report's header: commit, PostgreSQL and the machine.
func describe(ctx context.Context, pool *pgxpool.Pool, r *report) error {
	r.Commit = commit()
	if err := pool.QueryRow(ctx, "SELECT version()").Scan(&r.Postgres); err != nil {
		return fmt.Errorf("postgres version: %w", err)
	}
	r.Settings = map[string]string{}
	rows, err := pool.Query(ctx, `SELECT name, setting || COALESCE(unit, '') FROM pg_settings WHERE name = ANY($1)`,
		[]string{"shared_buffers", "effective_cache_size", "work_mem", "random_page_cost", "fsync",
			"synchronous_commit", "max_connections", "autovacuum"})
	if err != nil {
		return fmt.Errorf("postgres settings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		r.Settings[k] = v
	}
	r.Machine = machine{CPU: cpuModel(), CPUs: runtime.NumCPU(), MemoryMB: memoryMB(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	return rows.Err()
}

// commit is the revision the binary was built from (its VCS stamp, with
// "-dirty" when the tree had changes), or, for binaries without one (go
// run, go test), `git rev-parse HEAD` with "-dirty" when the work tree has
// changes; "unknown" outside a checkout.
func commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if rev != "" {
			return rev + dirty
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memoryMB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb / 1024
		}
	}
	return 0
}

// writeReport writes the JSON report to out and the table to table.
func writeReport(out, table io.Writer, r *report) {
	b, _ := json.MarshalIndent(r, "", "  ")
	_, _ = out.Write(append(b, '\n'))
	writeTable(table, r)
}

// writeTable is the short human summary.
func writeTable(w io.Writer, r *report) {
	fmt.Fprintf(w, "\nP7 thread windows (docs/PERFORMANCE.md) at %s\n", r.Commit)
	fmt.Fprintf(w, "%s\n%s, %d CPUs, %d MB; shared_buffers %s, fsync %s\n", r.Postgres, r.Machine.CPU, r.Machine.CPUs,
		r.Machine.MemoryMB, r.Settings["shared_buffers"], r.Settings["fsync"])
	if f := r.Fixture; f != nil {
		s := r.Sizes
		fmt.Fprintf(w, "fixture: R %d replies (%d/s, %d deleted in all), %d other roots with %d replies, %d × %d other events; %d events, %d thread rows, loaded in %.0f s\n",
			s.Replies, s.PerSecond, f.Deleted, s.OtherRoots, s.OtherReplies, s.Communities, s.CommunityEvents,
			f.Events, f.ThreadRows, f.LoadSeconds)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tn\tp50 ms\tp95 ms\tp99 ms\tmax ms\t")
	line := func(name string, d dist) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t\n", name, d.N, d.P50, d.P95, d.P99, d.Max)
	}
	if wr := r.Warm; wr != nil {
		line("warm: execution, scan+load (EXPLAIN ANALYZE)", wr.Execution)
		line("warm: planning, scan+load", wr.Planning)
		line("warm: POST /query end to end", wr.EndToEnd)
	}
	for _, s := range r.Stale {
		line("stale "+s.Root+": deep execution, scan+load", s.DeepExecution)
	}
	for _, s := range r.Stale {
		line("stale "+s.Root+": every page, POST /query", s.Pages)
		line("stale "+s.Root+": deep cursors only", s.Deep)
	}
	_ = tw.Flush()
	for _, s := range r.Stale {
		late := ""
		if !s.Burst.InTime {
			late = fmt.Sprintf(" (not within %d s)", burstSeconds)
		}
		fmt.Fprintf(w, "stale %s: slowest page %.1f ms (%s; load average %s)\n", s.Root, s.Slowest.Ms, s.Slowest.Page, s.Slowest.Load)
		fmt.Fprintf(w, "stale %s: %d replies through the relay in %.1f s%s, %.0f/s, %d refused; thread_metadata: %d rows changed since its last ANALYZE, analyzed during the case: %v; pages ≥ 100 ms: %d, ≥ 1 s: %d, 503: %d\n",
			s.Root, s.Burst.Events, s.Burst.Seconds, late, s.Burst.PerSecond, s.Burst.Refused, s.ModsSinceAnalyze,
			s.AnalyzedDuring, s.Over100ms, s.Over1s, s.Unavailable)
	}
	for _, p := range r.Plans {
		verdict := "ok"
		if !p.OK {
			verdict = "WRONG: " + p.Why
		}
		fmt.Fprintf(w, "plan, %s: %s\n", p.Case, verdict)
		for _, l := range p.Outline {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	if r.Pass {
		fmt.Fprintf(w, "PASS (%.0f s)\n", r.Seconds)
		return
	}
	fmt.Fprintf(w, "FAIL (%.0f s)\n", r.Seconds)
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}
