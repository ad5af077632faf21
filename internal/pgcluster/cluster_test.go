package pgcluster_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pgcluster"
)

func startCluster(t *testing.T, dataDir string) *pgcluster.Cluster {
	t.Helper()
	return startClusterWith(t, dataDir, map[string]string{"fsync": "off"})
}

func startClusterWith(t *testing.T, dataDir string, settings map[string]string) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{
		DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Settings: settings})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// queryRow runs one query on url in a connection of its own and scans its
// one row into dest.
func queryRow(t *testing.T, url, sql string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(dest...))
}

func selectOne(t *testing.T, url string) {
	t.Helper()
	var one int
	queryRow(t, url, "SELECT 1", nil, &one)
	require.Equal(t, 1, one)
}

// showSetting returns a memory setting of the server in MB ("6144MB"),
// whatever unit SHOW would choose.
func showSetting(t *testing.T, url, name string) string {
	t.Helper()
	var v string
	queryRow(t, url, `SELECT (setting::bigint * pg_size_bytes(unit) / 1048576)::text || 'MB'
		FROM pg_settings WHERE name = $1`, []any{name}, &v)
	return v
}

func TestMemorySettings(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		total          uint64
		shared, cached string
	}{
		{0, "128MB", "512MB"},            // unknown: PostgreSQL's own default
		{256 << 20, "128MB", "512MB"},    // floors
		{2 * gib, "512MB", "1024MB"},     // a quarter, a half
		{24 * gib, "6144MB", "12288MB"},  // this project's reference machine
		{128 * gib, "8192MB", "65536MB"}, // shared_buffers capped at 8GB
	} {
		got := pgcluster.MemorySettings(tc.total)
		require.Equal(t, map[string]string{"shared_buffers": tc.shared, "effective_cache_size": tc.cached}, got, "total %d", tc.total)
	}
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	const meminfo = "MemTotal:       24684096 kB\nMemFree:        1000 kB\n"
	const host = 24684096 << 10
	for _, tc := range []struct {
		name            string
		meminfo, v2, v1 string
		want            uint64
	}{
		{"HostOnly", meminfo, "", "", host},
		{"CgroupV2Unlimited", meminfo, "max\n", "", host},
		{"CgroupV2Limit", meminfo, "4294967296\n", "", 4 << 30},
		{"CgroupV1Unlimited", meminfo, "", "9223372036854771712\n", host},
		{"CgroupV1Limit", meminfo, "", "2147483648\n", 2 << 30},
		{"LimitAboveHost", meminfo, "107374182400", "", host},
		{"NoMeminfo", "", "1073741824", "", 1 << 30},
		{"NothingReadable", "", "", "", 0},
	} {
		require.Equal(t, tc.want, pgcluster.MemoryLimit(tc.meminfo, tc.v2, tc.v1), tc.name)
	}
}

// walAhead counts the WAL files ahead of the server's write position and
// returns the number of the file it writes.
func walAhead(t *testing.T, url string) (ahead int, segment uint64) {
	t.Helper()
	var current string
	queryRow(t, url, `
		SELECT (SELECT count(*) FROM pg_ls_waldir()
		        WHERE name ~ '^[0-9A-F]{24}$' AND name > pg_walfile_name(pg_current_wal_lsn())),
		       pg_walfile_name(pg_current_wal_lsn())`, nil, &ahead, &current)
	segment, err := strconv.ParseUint(current[8:], 16, 64) // log and segment number, after the timeline
	require.NoError(t, err)
	return ahead, segment
}

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("StartStopRestart", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "buzz-data")
		c := startCluster(t, dir)
		require.Contains(t, c.URL(), "/buzz?")
		selectOne(t, c.URL())
		// The memory settings follow the machine (MemorySettings).
		want := pgcluster.MemorySettings(pgcluster.TotalMemory())
		for _, name := range []string{"shared_buffers", "effective_cache_size"} {
			require.Equal(t, want[name], showSetting(t, c.URL(), name), name)
		}

		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.URL())
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
		require.NoError(t, err)
		require.NoError(t, conn.Close(ctx))

		require.NoError(t, c.Stop(ctx))
		require.NoError(t, c.Stop(ctx), "second Stop is a no-op")
		_, err = os.Stat(filepath.Join(c.DataDir(), "postmaster.pid"))
		require.ErrorIs(t, err, os.ErrNotExist)

		c2 := startCluster(t, dir)
		conn, err = pgx.Connect(ctx, c2.URL())
		require.NoError(t, err)
		defer conn.Close(ctx)
		var v int
		require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
		require.Equal(t, 42, v)
	})

	// A new cluster has min_wal_size of WAL files ahead of its write
	// position, so its first writes do not stop to create them; a restart
	// switches no file and still has them ahead (docs/OPERATIONS.md
	// "Private cluster or DATABASE_URL").
	t.Run("ReservesWAL", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "buzz-data")
		settings := map[string]string{"fsync": "off", "min_wal_size": "128MB"} // 8 files of 16 MB
		c := startClusterWith(t, dir, settings)
		ahead, seg := walAhead(t, c.URL())
		require.GreaterOrEqual(t, ahead, 7, "WAL files ahead of a new cluster's write position")

		require.NoError(t, c.Stop(context.Background()))
		c = startClusterWith(t, dir, settings)
		ahead, seg2 := walAhead(t, c.URL())
		require.GreaterOrEqual(t, ahead, 7, "WAL files ahead after a restart")
		require.LessOrEqual(t, seg2-seg, uint64(1), "a restart with its reserve in place switches no WAL file")
	})

	t.Run("ReusesRunningPostmaster", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "buzz-data")
		c := startCluster(t, dir)
		other := startCluster(t, dir)
		require.Equal(t, c.URL(), other.URL())
		require.NoError(t, other.Stop(context.Background()))
		selectOne(t, c.URL()) // the reusing Cluster did not stop it
	})

	t.Run("RecoversFromKilledPostmaster", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "buzz-data")
		c := startCluster(t, dir)
		selectOne(t, c.URL())
		data, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
		require.NoError(t, err)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

		c2 := startCluster(t, dir)
		selectOne(t, c2.URL())
	})

	t.Run("LongDataDirUsesShortSocketDir", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), strings.Repeat("long-directory-name-", 5))
		c := startCluster(t, dir)
		require.Less(t, len(c.SocketDir()), 60)
		selectOne(t, c.URL())
		require.DirExists(t, c.SocketDir())
		require.NoError(t, c.Stop(context.Background()))
		require.NoDirExists(t, c.SocketDir(), "Stop removes the socket directory it made under /tmp")
	})

	t.Run("MissingBinaries", func(t *testing.T) {
		t.Parallel()
		_, err := pgcluster.Start(context.Background(), pgcluster.Config{
			DataDir: t.TempDir(), BinDir: t.TempDir(),
		})
		require.ErrorIs(t, err, pgcluster.ErrBinariesMissing)
		require.ErrorContains(t, err, "initdb, pg_ctl, postgres missing")
		require.ErrorContains(t, err, "apt-get install -y postgresql")
	})
}
