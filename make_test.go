package buzz_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeBench checks what the bench targets would run: `make bench` only
// the quick benchmarks (go test's default 10-minute timeout is enough),
// `make bench-1m` the 1M-event search benchmarks and `make bench-windows`
// the thread-window benchmark, each with a timeout that fits its dataset
// load; bench-req-1m, bench-fanout and bench-idle the relay-level P3, P5
// and P6 runs of scripts/bench-1m.sh and scripts/bench.sh.
func TestMakeBench(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed; the targets are plain go test lines in Makefile")
	}
	dry := func(target string) string {
		out, err := exec.Command("make", "-n", target).CombinedOutput()
		require.NoError(t, err, "make -n %s: %s", target, out)
		return string(out)
	}
	quick := dry("bench")
	require.Contains(t, quick, "-bench=.")
	require.Contains(t, quick, "-skip='SearchP4|SearchZipf|ThreadWindow'")

	long := dry("bench-1m")
	require.Contains(t, long, "-bench='SearchP4|SearchZipf'")
	require.Contains(t, long, "-timeout=120m")
	require.True(t, strings.Contains(long, "./internal/search"), long)

	windows := dry("bench-windows")
	require.Contains(t, windows, "-bench=ThreadWindow")
	require.Contains(t, windows, "-timeout=90m")
	require.True(t, strings.Contains(windows, "./internal/windowbench"), windows)

	// The relay-level benchmarks run a fresh relay through the scripts.
	req := dry("bench-req-1m")
	require.Contains(t, req, "scripts/bench-1m.sh 3")
	fanout := dry("bench-fanout")
	require.Contains(t, fanout, "scripts/bench.sh 3 fanout --subscribers 1000 --rate 100 --fanout-seconds 10")
	idle := dry("bench-idle")
	require.Contains(t, idle, "BUZZ_PPROF_ENABLED=true")
	require.Contains(t, idle, "scripts/bench.sh 1 idle --idle-conns 10000")
	require.Contains(t, idle, "--pprof http://127.0.0.1:3392/debug/pprof/heap --heap-profile")
}
