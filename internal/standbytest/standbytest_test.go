package standbytest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func count(t *testing.T, dbURL string) (int, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM communities").Scan(&n)
	return n, err
}

func insert(t *testing.T, dbURL string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO communities (host) VALUES ('h' || gen_random_uuid())")
	require.NoError(t, err)
}

func TestPair(t *testing.T) {
	t.Parallel()
	var root string
	t.Run("Lifecycle", func(t *testing.T) {
		p := Start(t)
		root = p.root

		// Streaming: the migrated schema and a new row reach the standby.
		insert(t, p.WriterURL)
		p.WaitReplayed(t)
		n, err := count(t, p.ReplicaURL)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		err = func() error {
			conn, err := pgx.Connect(context.Background(), p.ReplicaURL)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), "INSERT INTO communities (host) VALUES ('x')")
			return err
		}()
		require.ErrorContains(t, err, "read-only transaction", "the replica URL is the standby")

		// Paused replay freezes the standby's snapshots.
		p.PauseReplay(t)
		insert(t, p.WriterURL)
		n, err = count(t, p.ReplicaURL)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		p.ResumeReplay(t)
		p.WaitReplayed(t)
		n, err = count(t, p.ReplicaURL)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		// Stopped, it refuses connections; started, it catches up.
		p.StopStandby(t)
		_, err = count(t, p.ReplicaURL)
		require.Error(t, err)
		insert(t, p.WriterURL)
		p.StartStandby(t)
		p.WaitReplayed(t)
		n, err = count(t, p.ReplicaURL)
		require.NoError(t, err)
		require.Equal(t, 3, n)
	})
	_, err := os.Stat(root)
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is left behind")
}

// shmID is the System V shared memory id the primary's postmaster.pid names.
func shmID(t *testing.T, p *Pair) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.primary.DataDir(), "postmaster.pid"))
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	require.Greater(t, len(lines), 6)
	f := strings.Fields(lines[6])
	require.Len(t, f, 2)
	id, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return id
}

func TestFailover(t *testing.T) {
	t.Parallel()
	p := StartWith(t, Options{Synchronous: true})
	var state string
	p.query(t, p.WriterURL, "SELECT string_agg(sync_state, ',') FROM pg_stat_replication", &state)
	require.Equal(t, "sync", state, "the one standby is synchronous")

	// The failover URL reaches the primary, not the read-only standby.
	insert(t, p.FailoverURL)
	n, err := count(t, p.ReplicaURL)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a synchronous commit is on the standby when it returns")

	shm := shmID(t, p)
	p.KillPrimary(t)
	_, err = os.Stat(filepath.Join(p.primary.DataDir(), "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing will signal the dead postmaster's pid")
	_, err = count(t, p.WriterURL)
	require.Error(t, err, "the primary is dead")
	_, err = count(t, p.FailoverURL)
	require.Error(t, err, "no server accepts writes before the promotion")
	require.Eventually(t, func() bool {
		_, err := unix.SysvShmCtl(shm, unix.IPC_STAT, &unix.SysvShmDesc{})
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the dead primary's shared memory goes with its last backend")

	p.Promote(t)
	insert(t, p.FailoverURL)
	n, err = count(t, p.ReplicaURL)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the promoted standby takes writes through the failover URL")
}
