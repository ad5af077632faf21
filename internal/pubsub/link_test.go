package pubsub

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("PublishSkippedWhileDown", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		require.Equal(t, 1.0, gauge(t, bundle.a.metrics.PubSub.Connected))
		bundle.redis.Stop()
		require.Equal(t, LinkEvent{Up: false}, bundle.a.nextLink(t))
		require.False(t, bundle.a.Connected())
		require.Zero(t, gauge(t, bundle.a.metrics.PubSub.Connected))
		require.Zero(t, gauge(t, bundle.a.metrics.PubSub.TopicsSubscribed))

		start := time.Now()
		for range 3 {
			bundle.a.publish(t, newTopic())
			bundle.a.publish(t, GlobalTopic(newUUID()))
		}
		require.Less(t, time.Since(start), 100*time.Millisecond, "skipped, not waited for")
		require.Equal(t, 3.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("channel")))
		require.Equal(t, 3.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("global")))
		require.Zero(t, bundle.a.echo.Len(), "a skipped publish leaves no echo mark")
		logs := bundle.a.logs.String()
		require.Equal(t, 1, countLines(logs, "redis publish failed"), "one warning per 10 s")
		require.Equal(t, 1, countLines(logs, `msg="redis disconnected"`))
	})

	t.Run("WantedSetSubscribedBeforeUp", func(t *testing.T) {
		t.Parallel()
		srv := setup(t).redis
		rc := srv.Client()
		topic := newTopic()
		atUp := make(chan int64, 10)
		a := startBus(t, srv.URL(), func(cfg *Config) {
			cfg.LinkFunc = func(e LinkEvent) {
				if e.Up { // on the link goroutine: nothing else is sent meanwhile
					n, _ := rc.PubSubNumSub(ctx, topic.String()).Result()
					atUp <- n[topic.String()]
				}
			}
		})
		a.TestSignals.Connected.WaitOrTimeout(t)
		require.Zero(t, <-atUp, "the first Up, before the topic was wanted")
		a.retain(t, topic)
		srv.Stop()
		a.TestSignals.Disconnected.WaitOrTimeout(t)
		srv.Restart()
		select {
		case n := <-atUp:
			require.Equal(t, int64(1), n, "the wanted set is subscribed when Up is reported")
		case <-time.After(10 * time.Second):
			t.Fatal("no Up")
		}
	})

	t.Run("PublishSkippedWhileRedisHangs", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.redis.Stop()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t)
		// Something now accepts connections on Redis's address and never
		// answers, as a frozen server or a black-holed route would.
		l, err := net.Listen("tcp", bundle.redis.Addr())
		require.NoError(t, err)
		var held []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			_ = l.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				_ = c.Close()
			}
		})
		start := time.Now()
		bundle.a.publish(t, newTopic())
		require.ErrorIs(t, bundle.a.PublishControl(ctx, Control{Community: newUUID(), Op: OpAccessibleAll}), ErrDisconnected)
		bundle.a.SetPresence(ctx, newUUID(), strings.Repeat("ab", 32), "online")
		require.Less(t, time.Since(start), 200*time.Millisecond, "skipped while down, not left to time out")
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("channel")))
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("control")))
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PresenceErrors))
	})

	t.Run("ReconnectResubscribesTheWantedSet", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		kept, released, global := newTopic(), newTopic(), GlobalTopic(newUUID())
		bundle.a.retain(t, kept)
		bundle.a.retain(t, released)
		bundle.a.retain(t, global)

		bundle.redis.Stop()
		require.Equal(t, LinkEvent{Up: false}, bundle.a.nextLink(t))
		require.Equal(t, LinkEvent{Up: false}, bundle.b.nextLink(t))
		// Retains and releases go on during the outage.
		bundle.a.Release(released)
		added := newTopic()
		select {
		case <-bundle.a.Retain(added):
		default:
			t.Fatal("Retain must not wait while the link is down")
		}
		bundle.a.Release(global)
		bundle.a.retain(t, global)

		bundle.redis.Restart()
		require.Equal(t, LinkEvent{Up: true}, bundle.a.nextLink(t))
		require.Equal(t, LinkEvent{Up: true}, bundle.b.nextLink(t))
		require.True(t, bundle.a.Connected())
		require.Equal(t, 1.0, gauge(t, bundle.a.metrics.PubSub.Connected))
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.Reconnects))

		want := []string{ControlTopic, BarrierTopic(bundle.a.ProcessID()), BarrierTopic(bundle.b.ProcessID()),
			kept.String(), global.String(), added.String()}
		require.Eventually(t, func() bool { return len(bundle.channels(t)) == len(want) }, 5*time.Second, 10*time.Millisecond,
			"the released topic leaves after its delay")
		require.ElementsMatch(t, want, bundle.channels(t))

		for _, topic := range []Topic{kept, added, global} {
			ev := bundle.b.publish(t, topic)
			require.Equal(t, ev.ID, bundle.a.next(t).Event.ID, "delivery resumes on %s", topic)
		}
		logs := bundle.a.logs.String()
		require.Equal(t, 1, countLines(logs, `msg="redis disconnected"`))
		require.Equal(t, 2, countLines(logs, `msg="redis connected"`), "at start and after the outage")
	})

	t.Run("LongerOutageOneLogLine", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.redis.Stop()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t) // the loss
		lost := time.Now()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t) // the retry after 1 s
		first := time.Now()
		bundle.a.TestSignals.Disconnected.WaitOrTimeout(t) // the retry after 2 s more
		second := time.Now()
		require.InDelta(t, FirstRetryDelay.Seconds(), first.Sub(lost).Seconds(), 0.3)
		require.InDelta(t, 2*FirstRetryDelay.Seconds(), second.Sub(first).Seconds(), 0.3, "the delay doubles")
		bundle.redis.Restart()
		bundle.a.TestSignals.Connected.WaitFor(t, 10*time.Second)
		logs := bundle.a.logs.String()
		require.Equal(t, 1, countLines(logs, `msg="redis disconnected"`), "one line per outage, not per attempt")
		require.Equal(t, 2, countLines(logs, `msg="redis reconnect failed"`))
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.Reconnects))
		require.Equal(t, []LinkEvent{{Up: false}, {Up: true}}, []LinkEvent{bundle.a.nextLink(t), bundle.a.nextLink(t)})
	})

	t.Run("StartsWithoutRedis", func(t *testing.T) {
		t.Parallel()
		srv := setup(t).redis
		srv.Stop()
		a := startBus(t, srv.URL(), nil)
		require.Equal(t, LinkEvent{Up: false}, a.nextLink(t), "a failed first connection opens a gap")
		require.False(t, a.Connected())
		require.Zero(t, gauge(t, a.metrics.PubSub.Connected))
		topic := newTopic()
		<-a.Retain(topic) // at once while down

		srv.Restart()
		require.Equal(t, LinkEvent{Up: true}, a.nextLink(t))
		require.True(t, a.Connected())
		rc := srv.Client()
		n, err := rc.PubSubNumSub(ctx, topic.String()).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n[topic.String()])
	})

	t.Run("SlowFirstConnectionIsAGap", func(t *testing.T) {
		t.Parallel()
		srv := setup(t).redis
		srv.Pause() // the first connection hangs, then succeeds
		a := startBus(t, srv.URL(), nil)
		require.Equal(t, LinkEvent{Up: false}, a.nextLink(t), "reported at Start, before any connection")
		start := time.Now()
		<-a.Retain(newTopic()) // gives up waiting for the confirmation after 1 s
		require.Less(t, time.Since(start), 3*time.Second)
		srv.Resume()
		require.Equal(t, LinkEvent{Up: true}, a.nextLink(t),
			"the gap closes at the first Up, so what registered meanwhile is told to resubscribe")
	})

	t.Run("StopAndStartAgain", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.a.Stop()
		require.False(t, bundle.a.Connected())
		bundle.a.publish(t, newTopic()) // skipped, not a panic
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("channel")))
		require.NotContains(t, bundle.channels(t), BarrierTopic(bundle.a.ProcessID()))
		require.NoError(t, bundle.a.Start(ctx))
		bundle.a.TestSignals.Connected.WaitOrTimeout(t)
		require.Contains(t, bundle.channels(t), BarrierTopic(bundle.a.ProcessID()))
	})

	t.Run("Config", func(t *testing.T) {
		t.Parallel()
		_, err := New(Config{URL: "http://:secret@example.com"})
		require.EqualError(t, err, "invalid REDIS_URL: must be a redis:// or rediss:// URL")
		_, err = New(Config{URL: "redis://localhost:1", ProcessID: "A"})
		require.ErrorContains(t, err, "invalid process id")
		b, err := New(Config{URL: "redis://localhost:1"})
		require.NoError(t, err)
		require.True(t, isUUID(b.ProcessID()))
		b.Stop() // before Start
	})
}
