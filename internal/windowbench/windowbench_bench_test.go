package windowbench

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/relaytest"
)

// BenchmarkThreadWindow is P7 (docs/PERFORMANCE.md, "Conversation windows") against
// the test helper's PostgreSQL (dbtest: the throwaway cluster, or
// TEST_DATABASE_URL) and an in-process relay (relaytest): the same
// fixture, warm case, stale-statistics case and plan checks as the
// "buzz-bench windows" command. It fails when a pass rule fails: p50 execution
// above 5 ms, any stale page above 100 ms or at 1 s or more, any 503, a
// wrong plan shape. Figures are reported as metrics and as the table on
// stderr. Use -benchtime 1x: one iteration loads the whole fixture.
//
//	go test -run '^$' -bench ThreadWindow -benchtime 1x -timeout 90m ./internal/windowbench
//	go test -run '^$' -bench ThreadWindow -benchtime 1x -short ./internal/windowbench   # smoke sizes
//
// BUZZ_WINDOWBENCH_FLAGS holds "buzz-bench windows" flags that change the run
// (e.g. "--replies 20000 --other-replies 200000"); BUZZ_WINDOWBENCH_REPORT
// names a file for the JSON report.
func BenchmarkThreadWindow(b *testing.B) {
	args := strings.Fields(os.Getenv("BUZZ_WINDOWBENCH_FLAGS"))
	if testing.Short() {
		args = append([]string{"--small"}, args...)
	}
	cfg, err := parseConfig(args, os.Stderr)
	require.NoError(b, err, "BUZZ_WINDOWBENCH_FLAGS")
	for b.Loop() {
		r := relaytest.Start(b, nil)
		t := &target{App: r.App, Addr: "127.0.0.1:" + strconv.Itoa(r.Port), DBURL: r.DBURL}
		ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
		rep, err := benchmark(ctx, t, cfg, newProgress(os.Stderr))
		cancel()
		require.NoError(b, err)
		writeTable(os.Stderr, rep)
		if path := os.Getenv("BUZZ_WINDOWBENCH_REPORT"); path != "" {
			js, err := json.MarshalIndent(rep, "", "  ")
			require.NoError(b, err)
			require.NoError(b, os.WriteFile(path, append(js, '\n'), 0o644))
		}
		b.ReportMetric(rep.Warm.Execution.P50, "exec-p50-ms")
		b.ReportMetric(rep.Warm.Planning.P50, "plan-p50-ms")
		b.ReportMetric(rep.Warm.EndToEnd.P50, "e2e-p50-ms")
		for _, s := range rep.Stale {
			b.ReportMetric(s.Pages.Max, "stale-"+s.Root+"-max-ms")
		}
		if !rep.Pass {
			b.Fatalf("P7 pass rules failed:\n  %s", strings.Join(rep.Failures, "\n  "))
		}
	}
}
