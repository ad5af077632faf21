package pubsub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestPresence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pubkey := strings.Repeat("9a", 32)

	t.Run("SetExpiresDelete", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		community := newUUID()
		key := "buzz:" + community + ":presence:" + pubkey

		bundle.a.SetPresence(ctx, community, pubkey, "online")
		got, err := bundle.rc.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, "online", got)
		ttl, err := bundle.rc.TTL(ctx, key).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		require.LessOrEqual(t, ttl, 180*time.Second)

		bundle.a.SetPresence(ctx, community, pubkey, "away")
		got, err = bundle.rc.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, "away", got)

		bundle.a.SetPresence(ctx, community, pubkey, StatusOffline)
		require.ErrorIs(t, bundle.rc.Get(ctx, key).Err(), redis.Nil, "offline deletes the key")

		bundle.a.SetPresence(ctx, community, pubkey, "online")
		bundle.a.ClearPresence(ctx, community, pubkey) // the last connection closed
		require.ErrorIs(t, bundle.rc.Get(ctx, key).Err(), redis.Nil)
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.PresenceErrors))
	})

	t.Run("ErrorsCounted", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.a.SetPresence(ctx, "host.example", pubkey, "online")
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PresenceErrors))
		keys, err := bundle.rc.Keys(ctx, "*").Result()
		require.NoError(t, err)
		require.Empty(t, keys)

		bundle.redis.Stop()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t)
		start := time.Now()
		bundle.a.SetPresence(ctx, newUUID(), pubkey, "online")
		bundle.a.ClearPresence(ctx, newUUID(), pubkey)
		require.Less(t, time.Since(start), 100*time.Millisecond)
		require.Equal(t, 3.0, counter(t, bundle.a.metrics.PubSub.PresenceErrors))
		require.Equal(t, 1, countLines(bundle.a.logs.String(), "presence key not written"))
	})
}
