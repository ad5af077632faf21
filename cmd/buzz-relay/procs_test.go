package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A relay on its private cluster runs its Go code on one processor fewer
// than Go's default (procs.go), a relay on an external database on Go's
// default, and an operator's GOMAXPROCS wins over both. The figures are
// the running relay's own, from its Go runtime.
func TestProcessors(t *testing.T) {
	t.Parallel()
	procs := func(env map[string]string) (float64, map[string]any) {
		p := startReady(t, env)
		for _, rec := range p.logRecords() {
			if rec["msg"] == "processors" {
				got := p.metric("go_sched_gomaxprocs_threads")
				require.Equal(t, got, rec["gomaxprocs"], "the log line tells what is in force")
				return got, rec
			}
		}
		t.Fatalf("no processors line:\n%s", p.Stdout)
		return 0, nil
	}

	external, rec := procs(externalEnv(t))
	require.Equal(t, "go", rec["set_by"])
	private, rec := procs(privateEnv(t))
	require.Equal(t, max(1, external-1), private, "one processor left to the private cluster's PostgreSQL")
	if external > 1 {
		require.Equal(t, "private cluster", rec["set_by"])
	}

	env := privateEnv(t)
	env["GOMAXPROCS"] = "3"
	set, rec := procs(env)
	require.Equal(t, float64(3), set)
	require.Equal(t, "GOMAXPROCS", rec["set_by"])

	// Go ignores a GOMAXPROCS that is not a positive integer; so does the
	// relay, and it says so.
	for _, bad := range []string{"abc", "0", "-2"} {
		env := privateEnv(t)
		env["GOMAXPROCS"] = bad
		p := startReady(t, env)
		warned := false
		for _, rec := range p.logRecords() {
			if rec["msg"] == "GOMAXPROCS is not a positive integer: ignored" {
				warned = rec["GOMAXPROCS"] == bad && rec["level"] == "WARN"
			}
		}
		require.True(t, warned, "GOMAXPROCS=%s: no warning\n%s", bad, p.Stdout)
		require.Equal(t, private, p.metric("go_sched_gomaxprocs_threads"), "GOMAXPROCS=%s", bad)
	}
}
