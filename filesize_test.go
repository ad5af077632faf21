package buzz_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckFileSizes runs scripts/check-file-sizes.sh on throwaway git
// repositories: a tracked file of 1 MiB passes, one byte more fails and is
// named, an untracked big file is not its business. Then on this
// repository, which must pass.
func TestCheckFileSizes(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("scripts/check-file-sizes.sh")
	require.NoError(t, err)
	const mib = 1 << 20
	check := func(t *testing.T, dir string) (string, error) {
		t.Helper()
		out, err := exec.Command(script, dir).CombinedOutput()
		return string(out), err
	}
	repo := func(t *testing.T, files map[string]int, tracked ...string) string {
		t.Helper()
		dir := t.TempDir()
		git := func(args ...string) {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "git %v: %s", args, out)
		}
		git("init", "-q")
		for name, size := range files {
			p := filepath.Join(dir, name)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, make([]byte, size), 0o644))
		}
		git(append([]string{"add", "--"}, tracked...)...)
		return dir
	}

	t.Run("OneMiBPasses", func(t *testing.T) {
		t.Parallel()
		dir := repo(t, map[string]int{"data/exact.bin": mib, "small.go": 10}, "data/exact.bin", "small.go")
		out, err := check(t, dir)
		require.NoError(t, err, out)
		require.Empty(t, out)
	})
	t.Run("OneByteMoreFails", func(t *testing.T) {
		t.Parallel()
		dir := repo(t, map[string]int{"bin/buzz-relay": mib + 1, "data/exact.bin": mib, "small.go": 10},
			"bin/buzz-relay", "data/exact.bin", "small.go")
		out, err := check(t, dir)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, out)
		require.Equal(t, 1, exit.ExitCode())
		require.Contains(t, out, "bin/buzz-relay (1048577 bytes)")
		require.NotContains(t, out, "exact.bin")
		require.NotContains(t, out, "small.go")
	})
	t.Run("UntrackedIsIgnored", func(t *testing.T) {
		t.Parallel()
		dir := repo(t, map[string]int{"buzz-bench": 2 * mib, "small.go": 10}, "small.go")
		out, err := check(t, dir)
		require.NoError(t, err, out)
	})
	t.Run("ThisRepository", func(t *testing.T) {
		t.Parallel()
		out, err := check(t, ".")
		require.NoError(t, err, out)
		require.False(t, strings.Contains(out, "over 1 MiB"), out)
	})
}
