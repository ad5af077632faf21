package buzz_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goEnv is the environment for a go command of these tests: this process's,
// with the build tags taken out of GOFLAGS (so a -tags given to the outer go
// test does not reach the build under test) and the given variables set.
// The other flags stay: scripts/test.sh's -trimpath lets the builds here
// reuse the build cache of earlier runs in other folders (docs/PERFORMANCE.md,
// "Test suite time").
func goEnv(vars ...string) []string {
	var kept []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(f, "-tags=") && !strings.HasPrefix(f, "--tags=") {
			kept = append(kept, f)
		}
	}
	env := append(os.Environ(), "GOFLAGS="+strings.Join(kept, " "))
	return append(env, vars...)
}

// TestBuildsWithoutLibsecp256k1 holds "builds anywhere": without the build
// tag libsecp256k1 no package of this module compiles C, so buzz-relay builds
// with cgo on and with cgo off on a machine without libsecp256k1's headers,
// and each binary records the build it is (no tag, the CGO_ENABLED asked
// for). With the tag, internal/event compiles its cgo verifier.
func TestBuildsWithoutLibsecp256k1(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH: this test runs go list and go build")
	}
	dir := t.TempDir()

	// cgoPackages lists the packages of this module that buzz-relay links and
	// that have cgo files, under the given environment and flags.
	cgoPackages := func(env []string, flags ...string) []string {
		args := append([]string{"list", "-deps"}, flags...)
		args = append(args, "-f", `{{if .CgoFiles}}{{.ImportPath}}{{end}}`, "./cmd/buzz-relay")
		cmd := exec.Command("go", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		var ours []string
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, module) {
				ours = append(ours, p)
			}
		}
		return ours
	}

	for _, cgo := range []string{"1", "0"} {
		t.Run("CGO_ENABLED="+cgo, func(t *testing.T) {
			if cgo == "1" {
				cc := os.Getenv("CC")
				if cc == "" {
					cc = "gcc"
				}
				if _, err := exec.LookPath(cc); err != nil {
					t.Skipf("no C compiler (%s) on PATH: a build with CGO_ENABLED=1 needs one for the standard library", cc)
				}
			}
			env := goEnv("CGO_ENABLED=" + cgo)
			require.Empty(t, cgoPackages(env), "packages of this module that compile C without the tag")

			bin := filepath.Join(dir, "buzz-relay-cgo"+cgo)
			build := exec.Command("go", "build", "-o", bin, "./cmd/buzz-relay")
			build.Env = env
			out, err := build.CombinedOutput()
			require.NoError(t, err, "go build with CGO_ENABLED=%s and no tag: %s", cgo, out)

			info := exec.Command("go", "version", "-m", bin)
			info.Env = env
			out, err = info.CombinedOutput()
			require.NoError(t, err, "go version -m: %s", out)
			require.Contains(t, string(out), "\tbuild\tCGO_ENABLED="+cgo+"\n")
			require.NotContains(t, string(out), "-tags=", "the binary was built without build tags")
		})
	}

	withTag := cgoPackages(goEnv("CGO_ENABLED=1"), "-tags=libsecp256k1")
	require.Equal(t, []string{module + "internal/event"}, withTag, "with the tag, only internal/event compiles C")
}

// TestSecp256k1Tags holds scripts/secp256k1-tags.sh, which the scripts and
// the Makefile use to turn the tag on: the flag where the library links,
// nothing where cgo is off or no C compiler exists, and BUZZ_SECP256K1
// forcing either way; `make build` passes what the script prints.
func TestSecp256k1Tags(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed: the scripts are bash")
	}
	run := func(vars ...string) string {
		cmd := exec.Command("scripts/secp256k1-tags.sh")
		cmd.Env = goEnv(vars...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "secp256k1-tags.sh %v: %s", vars, out)
		return strings.TrimSpace(string(out))
	}
	const flag = "-tags=libsecp256k1"
	require.Empty(t, run("CGO_ENABLED=0"), "cgo off")
	require.Empty(t, run("CC=/nonexistent/cc"), "no C compiler")
	if sys, err := exec.LookPath("cc"); err == nil {
		// A compiler that finds no system headers stands for a machine
		// without libsecp256k1-dev.
		blind := filepath.Join(t.TempDir(), "cc")
		require.NoError(t, os.WriteFile(blind, []byte("#!/bin/sh\nexec "+sys+" -nostdinc \"$@\"\n"), 0o755))
		require.Empty(t, run("CC="+blind), "headers missing")
	}
	require.Empty(t, run("BUZZ_SECP256K1=0"), "pure Go asked for")
	require.Equal(t, flag, run("BUZZ_SECP256K1=1", "CGO_ENABLED=0"), "libsecp256k1 asked for")

	// The library's own check: the header Debian's libsecp256k1-dev installs.
	_, err := os.Stat("/usr/include/secp256k1_schnorrsig.h")
	installed := err == nil
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		installed = false
	}
	if out, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		installed = false // cgo is off here, so the library cannot be used
	}
	auto := run()
	if installed {
		require.Equal(t, flag, auto, "the library is installed")
	} else {
		require.Empty(t, auto, "the library is not installed")
	}

	if _, err := exec.LookPath("make"); err != nil {
		return // the Makefile's lines are checked where make is installed
	}
	for _, vars := range [][]string{nil, {"BUZZ_SECP256K1=0"}, {"BUZZ_SECP256K1=1"}} {
		cmd := exec.Command("make", "-n", "build", "bench")
		cmd.Env = goEnv(vars...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make -n build bench: %s", out)
		want := run(vars...)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(line, "go ") {
				continue
			}
			if want == "" {
				require.NotContains(t, line, "-tags", "%v", vars)
			} else {
				require.Contains(t, line, want, "%v", vars)
			}
		}
	}
}
