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
// load.
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
	require.True(t, strings.Contains(windows, "./cmd/windowbench"), windows)
}
