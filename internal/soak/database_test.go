package soak

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The database's faults act on the current primary whatever their order:
// a fast stop before the failover stops the first primary; the failover
// kills it with every backend, promotes the standby and clones a new one
// into the dead primary's place; a fast and an immediate stop after it
// stop the promoted primary. The URL reaches the writer throughout, and
// every committed row is on the writer and on the new standby.
func TestDatabaseFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir, err := os.MkdirTemp("", "buzz-soak-db-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d, err := startDatabase(ctx, filepath.Join(dir, "db"), true)
	if d != nil {
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, d.stop(sctx))
		})
	}
	require.NoError(t, err)
	require.True(t, d.hasStandby())
	require.Contains(t, d.URL(), "target_session_attrs=read-write")

	// exec runs sql on the writer that d.URL() reaches, within 20 s.
	exec := func(sql string) error {
		ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ectx, d.URL())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ectx, sql)
		return err
	}
	count := func(url string) int {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*)::int FROM kept").Scan(&n))
		return n
	}
	outage := func(immediate bool) {
		t.Helper()
		require.NoError(t, d.shutdown(ctx, immediate))
		require.Error(t, exec("INSERT INTO kept VALUES (0)"), "no writer while the primary is down")
		require.NoError(t, d.start(ctx))
	}
	require.NoError(t, exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"))

	outage(false)
	require.Equal(t, "a", d.current().name)
	require.NoError(t, exec("INSERT INTO kept VALUES (2)"))

	pid, _, err := d.postmasterPID()
	require.NoError(t, err)
	children := childrenOf(pid)
	require.NotEmpty(t, children, "the postmaster's backends and workers")
	killed, err := d.killPrimary(ctx)
	require.NoError(t, err)
	require.Equal(t, pid, killed)
	for _, p := range append(children, pid) {
		require.False(t, processAlive(p), "process %d of the killed primary", p)
	}
	require.Error(t, exec("INSERT INTO kept VALUES (0)"), "no writer: the standby is read-only")

	require.NoError(t, d.promote(ctx))
	require.Equal(t, "b", d.current().name)
	require.False(t, d.hasStandby())
	require.NoError(t, exec("INSERT INTO kept VALUES (3)"), "the promoted standby commits alone")
	require.NoError(t, d.rebuildStandby(ctx))
	require.True(t, d.hasStandby())
	require.NoError(t, exec("INSERT INTO kept VALUES (4)"), "the new standby is synchronous")

	outage(false)
	outage(true)
	require.Equal(t, "b", d.current().name, "the outages stopped the promoted primary")
	require.NoError(t, exec("INSERT INTO kept VALUES (5)"))
	require.Equal(t, 5, count(d.URL()))
	standby := d.members[0].c
	require.Eventually(t, func() bool { return count(standby.URL()) == 5 }, 30*time.Second, 50*time.Millisecond,
		"the new standby, in the dead primary's place, holds every row")
}
