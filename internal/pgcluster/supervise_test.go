package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// postmasterPID is the pid in c's postmaster.pid, 0 when there is none.
func postmasterPID(t *testing.T, c *pgcluster.Cluster) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	require.NoError(t, err)
	return pid
}

// supervise runs c.Supervise until the returned stop is called, which
// returns Supervise's result (safe to call twice). The test fails when Supervise has not
// returned 30 s after stop.
func supervise(t *testing.T, c *pgcluster.Cluster) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Supervise(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Error("Supervise did not return 30 s after its context ended")
			return nil
		}
	})
	t.Cleanup(func() { _ = stop() })
	return stop
}

// killPostmaster sends SIGKILL to c's postmaster and returns its pid.
func killPostmaster(t *testing.T, c *pgcluster.Cluster) int {
	t.Helper()
	pid := postmasterPID(t, c)
	require.Positive(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	return pid
}

// waitServing polls url until SELECT 1 answers, failing after d.
func waitServing(t *testing.T, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			var one int
			err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("private cluster not serving within %s: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

func TestSupervise(t *testing.T) {
	t.Parallel()

	t.Run("RestartsKilledPostmaster", func(t *testing.T) {
		t.Parallel()
		c := startCluster(t, filepath.Join(t.TempDir(), "buzz-data"))
		stop := supervise(t, c)
		old := killPostmaster(t, c)
		waitServing(t, c.URL(), time.Minute)
		require.NotEqual(t, old, postmasterPID(t, c))
		require.NoError(t, stop())

		require.NoError(t, c.Stop(context.Background()))
		require.Zero(t, postmasterPID(t, c), "Stop stops the restarted postmaster")
	})

	t.Run("NoRestartAfterStop", func(t *testing.T) {
		t.Parallel()
		c := startCluster(t, filepath.Join(t.TempDir(), "buzz-data"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- c.Supervise(ctx) }()
		require.NoError(t, c.Stop(ctx))
		// Supervise sees the postmaster gone, finds the cluster stopped on
		// purpose and returns without restarting it, long before ctx ends.
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("Supervise did not return after Stop")
		}
		require.Zero(t, postmasterPID(t, c), "nothing restarted the stopped cluster")
	})

	t.Run("WatchesReusedPostmaster", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "buzz-data")
		first := startCluster(t, dir)
		reused := startCluster(t, dir)
		stop := supervise(t, reused)
		old := killPostmaster(t, first)
		waitServing(t, reused.URL(), time.Minute)
		require.NotEqual(t, old, postmasterPID(t, reused))
		require.NoError(t, stop())
	})
}
