package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// postmasterPID is the pid on the first line of the private cluster's
// postmaster.pid under dataDir (BUZZ_DATA_DIR).
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "pg", "data", "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	require.NoError(t, err)
	return pid
}

// logged returns the relay's log records with message msg.
func logged(p *relayProc, msg string) []map[string]any {
	var out []map[string]any
	for _, rec := range p.logRecords() {
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// waitLogged polls the relay's log until a record with message msg
// appears, failing after d, and returns the records with that message.
func waitLogged(p *relayProc, msg string, d time.Duration) []map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if recs := logged(p, msg); len(recs) > 0 {
			return recs
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q in the log within %s:\n%s", msg, d, p.Stdout)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// The private cluster looks after itself: a postmaster killed with
// SIGKILL under a running relay makes readiness 503 within seconds, the
// relay restarts it (logged), readiness is 200 again, and an EVENT sent on
// a connection opened before the kill is stored and readable. SIGTERM
// then stops the relay and the restarted postmaster, without a restart.
func TestPrivateClusterRestartsAfterKill(t *testing.T) {
	t.Parallel()
	env := privateEnv(t)
	p := startReady(t, env)
	owner := eventtest.NewKey()
	w := authedPeer(t, p, "owner", owner)
	ch := createChannel(t, w, owner)

	pid := postmasterPID(t, env["BUZZ_DATA_DIR"])
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	p.pollHealth("/_readiness", 10*time.Second, func(code int, _ string) bool {
		return code == http.StatusServiceUnavailable
	})
	p.pollHealth("/_readiness", 60*time.Second, func(code int, _ string) bool { return code == http.StatusOK })
	require.False(t, p.exited())

	require.NotEmpty(t, logged(p, "postmaster gone, restarting it"), "the relay logs that the postmaster died:\n%s", p.Stdout)
	attempts := logged(p, "restarting postmaster")
	require.NotEmpty(t, attempts, "the relay logs each restart attempt:\n%s", p.Stdout)
	require.Equal(t, float64(1), attempts[0]["attempt"])
	require.Equal(t, "500ms", attempts[0]["delay"])
	// Readiness may turn 200 a moment before pg_ctl start returns.
	require.Len(t, waitLogged(p, "postmaster restarted", 30*time.Second), 1, "the relay logs the restart once")
	require.NotEqual(t, pid, postmasterPID(t, env["BUZZ_DATA_DIR"]), "a new postmaster runs")

	msg := message(t, owner, ch, "after the restart")
	w.mustPublish(msg)
	r := authedPeer(t, p, "reader", owner)
	history := r.subscribe("s1", channelFilter(ch))
	require.Len(t, history, 1)
	require.Equal(t, msg.ID, history[0].ID)

	// A graceful stop restarts nothing and stops the restarted postmaster.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(time.Minute))
	require.Len(t, logged(p, "postmaster gone, restarting it"), 1, "no restart during the stop:\n%s", p.Stdout)
	require.NoFileExists(t, filepath.Join(env["BUZZ_DATA_DIR"], "pg", "data", "postmaster.pid"))
}

// When the postmaster cannot be brought back (here its data directory was
// moved away under the running relay, then the postmaster killed), the
// relay logs every failed attempt, readiness stays 503, and after the last
// attempt the relay logs the exhaustion and exits 1.
func TestPrivateClusterRestartsExhausted(t *testing.T) {
	t.Parallel()
	env := privateEnv(t)
	p := startReady(t, env)

	pgdata := filepath.Join(env["BUZZ_DATA_DIR"], "pg", "data")
	pid := postmasterPID(t, env["BUZZ_DATA_DIR"])
	require.NoError(t, os.Rename(pgdata, pgdata+".moved"))
	// Put it back when the test ends, so the cleanup finds the cluster.
	t.Cleanup(func() { _ = os.Rename(pgdata+".moved", pgdata) })
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

	p.pollHealth("/_readiness", 10*time.Second, func(code int, _ string) bool {
		return code == http.StatusServiceUnavailable
	})
	// Five attempts after 0.5, 1, 2, 4 and 8 s of backoff.
	require.Equal(t, 1, p.wait(2*time.Minute), "the relay exits 1 once the restarts are exhausted")

	attempts := logged(p, "restarting postmaster")
	require.Len(t, attempts, 5, "one record per attempt:\n%s", p.Stdout)
	for i, rec := range attempts {
		require.Equal(t, float64(i+1), rec["attempt"])
	}
	require.Equal(t, []any{"500ms", "1s", "2s", "4s", "8s"},
		[]any{attempts[0]["delay"], attempts[1]["delay"], attempts[2]["delay"], attempts[3]["delay"], attempts[4]["delay"]})
	failed := logged(p, "postmaster restart failed")
	require.Len(t, failed, 5, "one failure per attempt:\n%s", p.Stdout)
	require.NotEmpty(t, failed[0]["err"])
	require.Empty(t, logged(p, "postmaster restarted"))
	exhausted := logged(p, "postmaster restart attempts exhausted; the database stays down until the relay is restarted")
	require.Len(t, exhausted, 1, "exhaustion is logged:\n%s", p.Stdout)
	require.Equal(t, "ERROR", exhausted[0]["level"])
	stopped := logged(p, "relay stopped")
	require.Len(t, stopped, 1)
	require.Contains(t, stopped[0]["err"], "private cluster restart attempts exhausted")
}
