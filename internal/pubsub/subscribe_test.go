package pubsub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ExactTopicsOnly", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		ch, global := newTopic(), GlobalTopic(newUUID())
		bundle.a.retain(t, ch)
		bundle.b.retain(t, ch)
		bundle.b.retain(t, global)
		require.ElementsMatch(t, []string{
			ControlTopic,
			BarrierTopic(bundle.a.ProcessID()),
			BarrierTopic(bundle.b.ProcessID()),
			ch.String(),
			global.String(),
		}, bundle.channels(t))
		require.Equal(t, int64(2), bundle.subscribers(t, ch.String()))
		numpat, err := bundle.rc.PubSubNumPat(ctx).Result()
		require.NoError(t, err)
		require.Zero(t, numpat, "never PSUBSCRIBE")
		require.Equal(t, 4.0, gauge(t, bundle.b.metrics.PubSub.TopicsSubscribed), "control, barrier and two topics")
	})

	t.Run("ConfirmedBeforeReady", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		// Each round subscribes a fresh topic and publishes into it the
		// moment Retain's channel closes: a channel that closed before Redis
		// subscribed would lose some of these.
		for range 50 {
			topic := newTopic()
			bundle.a.retain(t, topic)
			ev := bundle.b.publish(t, topic)
			require.Equal(t, ev.ID, bundle.a.next(t).Event.ID)
		}
		require.Zero(t, counter(t, bundle.b.metrics.PubSub.PublishErrors.WithLabelValues("channel")))
	})

	t.Run("RetainAgainIsConfirmedAtOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.a.retain(t, topic)
		select {
		case <-bundle.a.Retain(topic):
		default:
			t.Fatal("a confirmed topic needs no wait")
		}
	})

	t.Run("RefcountAndDebounce", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.a.retain(t, topic)
		bundle.a.retain(t, topic)

		bundle.a.Release(topic)
		time.Sleep(UnsubscribeDelay + 200*time.Millisecond) // the debounce is the subject
		bundle.a.TestSignals.Unsubscribed.RequireEmpty(t)
		require.Equal(t, int64(1), bundle.subscribers(t, topic.String()), "one reference left")

		released := time.Now()
		bundle.a.Release(topic)
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, int64(1), bundle.subscribers(t, topic.String()), "still subscribed 100 ms later")
		require.Equal(t, topic.String(), bundle.a.TestSignals.Unsubscribed.WaitFor(t, 2*time.Second))
		require.GreaterOrEqual(t, time.Since(released), UnsubscribeDelay)
		require.NotContains(t, bundle.channels(t), topic.String())
	})

	t.Run("NoChurnWithinDelay", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		monitor := bundle.redis.Monitor()
		topic := newTopic()
		bundle.a.retain(t, topic)
		for range 3 { // CLOSE then a new REQ within 200 ms
			bundle.a.Release(topic)
			time.Sleep(150 * time.Millisecond)
			bundle.a.retain(t, topic)
		}
		time.Sleep(UnsubscribeDelay + 200*time.Millisecond) // no timer may fire late
		monitor.Sync()
		require.Zero(t, commands(monitor.Lines(), "unsubscribe", topic.String()))
		require.Equal(t, 1, commands(monitor.Lines(), "subscribe", topic.String()))

		// The monitor does see an UNSUBSCRIBE when one is sent.
		bundle.a.Release(topic)
		bundle.a.TestSignals.Unsubscribed.WaitOrTimeout(t)
		monitor.Sync()
		require.Equal(t, 1, commands(monitor.Lines(), "unsubscribe", topic.String()))
	})

	t.Run("RetainAfterUnsubscribeSubscribesAgain", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.a.retain(t, topic)
		bundle.a.Release(topic)
		require.Equal(t, topic.String(), bundle.a.TestSignals.Unsubscribed.WaitOrTimeout(t))
		bundle.a.retain(t, topic)
		ev := bundle.b.publish(t, topic)
		require.Equal(t, ev.ID, bundle.a.next(t).Event.ID)
	})

	t.Run("UnbalancedAndInvalidIgnored", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.a.Release(newTopic())
		<-bundle.a.Retain(GlobalTopic("not-a-uuid")) // closed at once
		require.Contains(t, bundle.a.logs.String(), "release without retain ignored")
		require.Contains(t, bundle.a.logs.String(), "retain of an invalid topic ignored")
		for _, name := range bundle.channels(t) {
			require.NotContains(t, name, "not-a-uuid")
		}
	})
}

// commands counts the MONITOR lines of a command on a topic.
func commands(lines []string, cmd, topic string) int {
	n := 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 5 && strings.EqualFold(f[3], `"`+cmd+`"`) && strings.Contains(l, `"`+topic+`"`) {
			n++
		}
	}
	return n
}
