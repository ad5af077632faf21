package pubsub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests wait out the link's health interval: the timing is their
// subject.
func TestHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("IdleLinkStaysUp", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		monitor := bundle.redis.Monitor()
		time.Sleep(2*healthInterval + time.Second)
		bundle.a.TestSignals.Disconnected.RequireEmpty(t)
		require.True(t, bundle.a.Connected())
		monitor.Sync()
		pings := 0
		for _, l := range monitor.Lines() {
			if strings.Contains(strings.ToLower(l), `"ping"`) {
				pings++
			}
		}
		require.GreaterOrEqual(t, pings, 2, "a silent link is checked with PING (two buses)")
	})

	t.Run("FrozenServerDetected", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.redis.Pause()

		start := time.Now()
		bundle.a.publish(t, newTopic())
		took := time.Since(start)
		require.GreaterOrEqual(t, took, PublishTimeout-50*time.Millisecond, "the PUBLISH waited for its bound")
		require.Less(t, took, PublishTimeout+500*time.Millisecond, "and no longer")
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("channel")))
		require.Equal(t, 1, bundle.a.echo.Len(), "a timed-out publish keeps its echo mark: the command may have run")

		require.Equal(t, LinkEvent{Up: false}, bundle.a.nextLink(t))
		require.Less(t, time.Since(start), 2*healthInterval+2*time.Second, "detected by the unanswered PING")
		bundle.redis.Resume()
		require.Equal(t, LinkEvent{Up: true}, bundle.a.nextLink(t))
		require.NoError(t, bundle.a.Barrier(ctx))
	})
}
