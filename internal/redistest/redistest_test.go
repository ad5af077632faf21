package redistest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnswersOnLoopbackWithoutPersistence", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t)
		require.True(t, strings.HasPrefix(s.URL(), "redis://127.0.0.1:"), s.URL())
		opts, err := redis.ParseURL(s.URL())
		require.NoError(t, err)
		require.Equal(t, s.Addr(), opts.Addr)

		c := s.Client()
		require.NoError(t, c.Ping(ctx).Err())
		save, err := c.ConfigGet(ctx, "save").Result()
		require.NoError(t, err)
		require.Equal(t, "", save["save"])
		aof, err := c.ConfigGet(ctx, "appendonly").Result()
		require.NoError(t, err)
		require.Equal(t, "no", aof["appendonly"])
		dir, err := c.ConfigGet(ctx, "dir").Result()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(dir["dir"], os.TempDir()), "the server works under the test's temp dir: %s", dir["dir"])
	})

	t.Run("StopEndsTheProcess", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t)
		c := s.Client()
		require.NoError(t, c.Ping(ctx).Err())
		s.Stop()
		require.Error(t, c.Ping(ctx).Err(), "nothing answers after Stop")
		s.Stop() // twice is fine
	})

	t.Run("RestartSamePortEmptyState", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t)
		url := s.URL()
		c := s.Client()
		require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
		s.Restart()
		require.Equal(t, url, s.URL())
		require.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil, "a restarted server starts empty")

		s.Stop()
		s.Restart() // from stopped, too
		require.NoError(t, c.Ping(ctx).Err())
	})

	t.Run("PauseAndResume", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t)
		c := s.Client()
		require.NoError(t, c.Ping(ctx).Err())
		s.Pause()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		require.Error(t, c.Ping(short).Err(), "a paused server answers nothing")
		s.Resume()
		require.NoError(t, c.Ping(ctx).Err())
	})

	t.Run("DistinctServers", func(t *testing.T) {
		t.Parallel()
		a, b := redistest.Start(t), redistest.Start(t)
		require.NotEqual(t, a.URL(), b.URL())
		a.Stop()
		c := redistest.Start(t)
		require.NotEqual(t, a.URL(), c.URL(), "a stopped server keeps its port")
	})

	t.Run("MonitorSeesCommandsInOrder", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t)
		m := s.Monitor()
		c := s.Client()
		require.NoError(t, c.Set(ctx, "first", "1", 0).Err())
		require.NoError(t, c.Del(ctx, "first").Err())
		m.Sync()
		var seen []string
		for _, l := range m.Lines() {
			if strings.Contains(l, `"first"`) {
				seen = append(seen, strings.Fields(l)[3])
			}
		}
		require.Equal(t, []string{`"set"`, `"del"`}, seen)
	})

	t.Run("LeavesNothingBehind", func(t *testing.T) {
		t.Parallel()
		var dir string
		t.Run("Inner", func(t *testing.T) {
			s := redistest.Start(t)
			got, err := s.Client().ConfigGet(ctx, "dir").Result()
			require.NoError(t, err)
			dir = got["dir"]
			require.DirExists(t, dir)
		})
		_, err := os.Stat(dir)
		require.ErrorIs(t, err, os.ErrNotExist, "the working directory is removed with the test")
	})
}
