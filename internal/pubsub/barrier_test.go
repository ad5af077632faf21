package pubsub

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBarrier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AfterEarlierEventsDelivered", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.b.retain(t, topic)
		for round := range 20 {
			const n = 50
			for range n {
				bundle.a.publish(t, topic) // acknowledged on A
			}
			bundle.b.barrier(t) // then a REQ on B reaches its EOSE
			require.Len(t, bundle.b.delivered, n, "round %d: every event published before the barrier is handed over", round)
			for range n {
				<-bundle.b.delivered
			}
		}
		require.Zero(t, counter(t, bundle.b.metrics.PubSub.BarrierTimeouts))
	})

	t.Run("ConcurrentCallersShareRounds", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		const callers = 50
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for range callers {
			wg.Go(func() { errs <- bundle.a.Barrier(ctx) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		rounds := counter(t, bundle.a.metrics.PubSub.MessagesReceived.WithLabelValues("barrier"))
		require.GreaterOrEqual(t, rounds, 1.0)
		require.LessOrEqual(t, rounds, float64(callers))
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.BarrierTimeouts))
	})

	t.Run("OnlyOwnTopic", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.a.barrier(t)
		require.Zero(t, counter(t, bundle.b.metrics.PubSub.MessagesReceived.WithLabelValues("barrier")),
			"B never hears A's barrier")
	})

	t.Run("AtOnceWhenDisconnected", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.redis.Stop()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t)
		start := time.Now()
		require.ErrorIs(t, bundle.a.Barrier(ctx), ErrDisconnected)
		require.Less(t, time.Since(start), 100*time.Millisecond)
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.BarrierTimeouts))
	})

	t.Run("TimeoutWhenTheQueueIsStuck", func(t *testing.T) {
		t.Parallel()
		srv := setup(t).redis
		stuck := make(chan struct{})
		defer close(stuck)
		a := startBus(t, srv.URL(), func(cfg *Config) {
			cfg.DeliverFunc = func(Message) { <-stuck }
		})
		a.TestSignals.Connected.WaitOrTimeout(t)
		topic := newTopic()
		a.retain(t, topic)
		sample := newSampleEvent(t)
		require.NoError(t, srv.Client().Publish(ctx, topic.String(), sample).Err())
		start := time.Now()
		require.ErrorIs(t, a.Barrier(ctx), ErrBarrierTimeout, "the token waits behind the stuck event")
		require.GreaterOrEqual(t, time.Since(start), BarrierTimeout)
		require.Less(t, time.Since(start), BarrierTimeout+500*time.Millisecond)
		require.Equal(t, 1.0, counter(t, a.metrics.PubSub.BarrierTimeouts))
	})

	t.Run("CallerContext", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := bundle.a.Barrier(cctx)
		if err != nil { // the round trip may win the race with the cancel
			require.ErrorIs(t, err, context.Canceled)
		}
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.BarrierTimeouts), "a caller that gives up is not a timeout")
	})
}
