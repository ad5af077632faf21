package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The relay's garbage-collector defaults (gc.go) are in force in the
// running process, as its Go runtime reports them, and Go's own variables
// override them.
func TestGarbageCollectorDefaults(t *testing.T) {
	t.Parallel()
	gcLog := func(p *relayProc) map[string]any {
		for _, rec := range p.logRecords() {
			if rec["msg"] == "garbage collector" {
				return rec
			}
		}
		t.Fatalf("no garbage collector line:\n%s", p.Stdout)
		return nil
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		p := startReady(t, externalEnv(t))
		require.Equal(t, float64(defaultGCPercent), p.metric("go_gc_gogc_percent"))
		limit := p.metric("go_gc_gomemlimit_bytes")
		require.Greater(t, limit, float64(0))
		require.Less(t, limit, float64(1<<62), "a limit is set: without one Go reports math.MaxInt64")
		rec := gcLog(p)
		require.Equal(t, "400", rec["gogc"])
		require.Equal(t, limit, rec["memory_limit_bytes"])
	})

	t.Run("OperatorValuesWin", func(t *testing.T) {
		t.Parallel()
		env := externalEnv(t)
		env["GOGC"] = "150"
		env["GOMEMLIMIT"] = "300MiB"
		p := startReady(t, env)
		require.Equal(t, float64(150), p.metric("go_gc_gogc_percent"))
		require.Equal(t, float64(300<<20), p.metric("go_gc_gomemlimit_bytes"))
		rec := gcLog(p)
		require.Equal(t, "150", rec["gogc"])
		require.Equal(t, float64(300<<20), rec["memory_limit_bytes"])
	})
}
