package standbytest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
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
