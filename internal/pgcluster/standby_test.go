package pgcluster_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pgcluster"
)

func startStandby(t *testing.T, dataDir string, primary *pgcluster.Cluster, name string) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.StartStandby(ctx, pgcluster.Config{
		DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Settings: map[string]string{"fsync": "off"}}, primary, name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func execSQL(t *testing.T, ctx context.Context, url, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func queryInt(t *testing.T, url, sql string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
	return n
}

// A standby cloned from a running cluster streams its commits, becomes
// synchronous on demand, refuses writes until promoted, and once promoted
// commits without waiting for a standby it does not have, even when its
// clone inherited synchronous_standby_names from the primary.
func TestStandby(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := startCluster(t, filepath.Join(root, "p"))
	require.NoError(t, execSQL(t, ctx, primary.URL(), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"))

	_, err := pgcluster.StartStandby(ctx, pgcluster.Config{DataDir: filepath.Join(root, "bad")}, primary, "Bad-Name")
	require.ErrorContains(t, err, "lowercase letters, digits or underscores")

	s1 := startStandby(t, filepath.Join(root, "s1"), primary, "s1")
	require.NotEqual(t, primary.SocketDir(), s1.SocketDir())
	require.Equal(t, 1, queryInt(t, s1.URL(), "SELECT count(*)::int FROM kept"), "the clone holds what the primary committed")
	require.Equal(t, 1, queryInt(t, s1.URL(), "SELECT pg_is_in_recovery()::int"))
	require.ErrorContains(t, execSQL(t, ctx, s1.URL(), "INSERT INTO kept VALUES (9)"), "read-only transaction")

	require.NoError(t, primary.SetSynchronousStandby(ctx, "s1"))
	require.Equal(t, 1, queryInt(t, primary.URL(),
		"SELECT count(*)::int FROM pg_stat_replication WHERE application_name = 's1' AND sync_state = 'sync'"))
	require.NoError(t, execSQL(t, ctx, primary.URL(), "INSERT INTO kept VALUES (2)"))
	require.Eventually(t, func() bool { return queryInt(t, s1.URL(), "SELECT count(*)::int FROM kept") == 2 },
		30*time.Second, 20*time.Millisecond, "the standby replays the primary's commits")

	// s2 is cloned after the primary named s1 synchronous: it inherits
	// that setting, and once promoted alone it must not wait for s1.
	s2 := startStandby(t, filepath.Join(root, "s2"), primary, "s2")
	require.NoError(t, primary.Stop(ctx))
	require.NoError(t, s2.Promote(ctx))
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	require.NoError(t, execSQL(t, wctx, s2.URL(), "INSERT INTO kept VALUES (3)"), "the promoted standby commits alone")
	require.Equal(t, 3, queryInt(t, s2.URL(), "SELECT count(*)::int FROM kept"))
}
