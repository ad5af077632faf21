package pubsub

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

func TestDeliver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OtherProcessOnceOwnEchoSkipped", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.a.retain(t, topic)
		bundle.b.retain(t, topic)
		ev := bundle.a.publish(t, topic, eventtest.Tag("h", newUUID()))

		got := bundle.b.next(t)
		require.Equal(t, ev.ID, got.Event.ID)
		require.Equal(t, topic, got.Topic, "the channel comes from the topic, not the h tag")
		require.JSONEq(t, string(ev.AppendJSON(nil)), string(got.JSON))

		bundle.a.barrier(t) // A's own echo came back before its barrier token
		bundle.b.barrier(t)
		bundle.a.requireNoDelivery(t)
		bundle.b.requireNoDelivery(t)
		require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.EchoSkipped))
		require.Zero(t, counter(t, bundle.a.metrics.PubSub.FanoutTotal))
		require.Equal(t, 1.0, counter(t, bundle.b.metrics.PubSub.FanoutTotal))
		require.Equal(t, 1.0, counter(t, bundle.b.metrics.PubSub.MessagesReceived.WithLabelValues("channel")))
	})

	t.Run("GlobalTopic", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := GlobalTopic(newUUID())
		bundle.b.retain(t, topic)
		ev := bundle.a.publish(t, topic)
		got := bundle.b.next(t)
		require.Equal(t, ev.ID, got.Event.ID)
		require.True(t, got.Topic.Global())
		require.Equal(t, 1.0, counter(t, bundle.b.metrics.PubSub.MessagesReceived.WithLabelValues("global")))
	})

	// A stored event goes a second time on its community's window topic,
	// with its channel; an ephemeral one does not. The window topic is
	// subscribed like any other (docs/PROTOCOL.md §16.1).
	t.Run("WindowTopic", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		window := WindowTopic(topic.Community)
		require.Equal(t, "buzz:"+topic.Community+":window", window.String())
		bundle.b.retain(t, window)
		require.True(t, bundle.b.Subscribed(window))
		require.False(t, bundle.b.Subscribed(topic), "not retained")
		ev := bundle.a.publish(t, topic)
		got := bundle.b.next(t)
		require.Equal(t, ev.ID, got.Event.ID)
		require.Equal(t, window, got.Topic)
		require.Equal(t, topic.Channel, got.Channel, "the stored channel travels with the event")
		require.JSONEq(t, string(ev.AppendJSON(nil)), string(got.JSON))
		require.Equal(t, 1.0, counter(t, bundle.b.metrics.PubSub.MessagesReceived.WithLabelValues("window")))

		global := bundle.a.publish(t, GlobalTopic(topic.Community))
		got = bundle.b.next(t)
		require.Equal(t, global.ID, got.Event.ID)
		require.Empty(t, got.Channel)

		eph := newEvent(func(e *event.Event) { e.Kind = 20001 })
		bundle.a.PublishEphemeral(ctx, topic, eph.ID, eph.AppendJSON(nil))
		bundle.b.barrier(t)
		bundle.b.requireNoDelivery(t)

		// A window message must carry a channel id or nothing.
		require.NoError(t, bundle.rc.Publish(ctx, window.String(), `{"channel_id":"general","event":`+string(ev.AppendJSON(nil))+`}`).Err())
		require.NoError(t, bundle.rc.Publish(ctx, window.String(), ev.AppendJSON(nil)).Err())
		bundle.b.barrier(t)
		bundle.b.requireNoDelivery(t)
		require.Equal(t, 2.0, counter(t, bundle.b.metrics.PubSub.InvalidMessages))
	})

	t.Run("InOrder", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.b.retain(t, topic)
		var ids []string
		for i := range 20 {
			ids = append(ids, bundle.a.publish(t, topic, eventtest.Content(strings.Repeat("x", i))).ID)
		}
		for _, id := range ids {
			require.Equal(t, id, bundle.b.next(t).Event.ID)
		}
	})

	t.Run("InvalidDroppedAndCounted", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		topic := newTopic()
		bundle.a.retain(t, topic)

		wrongID := eventtest.NewKey().Signed(t, 9)
		wrongID.Content = "changed after signing"
		valid := newEvent()
		require.NoError(t, bundle.rc.Publish(ctx, topic.String(), "junk").Err())
		require.NoError(t, bundle.rc.Publish(ctx, topic.String(), wrongID.AppendJSON(nil)).Err())
		require.NoError(t, bundle.rc.Publish(ctx, topic.String(), `{"id":"x"}`).Err())
		// Nobody ever subscribes to a name that is not a topic.
		n, err := bundle.rc.Publish(ctx, "buzz:not-a-uuid:global", valid.AppendJSON(nil)).Result()
		require.NoError(t, err)
		require.Zero(t, n)

		bundle.a.barrier(t)
		bundle.a.requireNoDelivery(t)
		require.Equal(t, 3.0, counter(t, bundle.a.metrics.PubSub.InvalidMessages))
		require.Equal(t, "not an event: invalid character 'j' looking for beginning of value", bundle.a.TestSignals.Dropped.WaitOrTimeout(t))
		require.Equal(t, "id does not match the event", bundle.a.TestSignals.Dropped.WaitOrTimeout(t))
		require.Contains(t, bundle.a.TestSignals.Dropped.WaitOrTimeout(t), "not an event")
		require.Equal(t, 1, countLines(bundle.a.logs.String(), "dropped invalid redis message"), "one warning per 10 s")

		// A message on a name that does not parse, had it arrived, is
		// dropped the same way.
		bundle.a.handle(item{topic: "buzz:not-a-uuid:global", payload: string(valid.AppendJSON(nil))})
		require.Equal(t, "topic does not parse", bundle.a.TestSignals.Dropped.WaitOrTimeout(t))
		require.Equal(t, 4.0, counter(t, bundle.a.metrics.PubSub.InvalidMessages))

		// And the bus keeps serving.
		ev := bundle.b.publish(t, topic)
		require.Equal(t, ev.ID, bundle.a.next(t).Event.ID)
	})

	t.Run("QueueOverflowReportsAGap", func(t *testing.T) {
		t.Parallel()
		srv := setup(t).redis
		release := make(chan struct{})
		var a *testBus
		a = startBus(t, srv.URL(), func(cfg *Config) {
			cfg.DeliverFunc = func(m Message) {
				<-release // a consumer stuck on slow fan-out
				a.delivered <- m
			}
		})
		var unblock sync.Once
		t.Cleanup(func() { unblock.Do(func() { close(release) }) }) // before Stop, even on failure
		a.started(t)
		topic := newTopic()
		a.retain(t, topic)

		rc := srv.Client()
		pipe := rc.Pipeline()
		payload := newSampleEvent(t)
		for range QueueSize + 50 {
			pipe.Publish(ctx, topic.String(), payload)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)

		require.Equal(t, LinkEvent{Up: false, Overflow: true}, a.nextLink(t))
		require.Greater(t, counter(t, a.metrics.PubSub.FanoutLag), 0.0)
		unblock.Do(func() { close(release) })
		// Once the consumer has drained the queue the gap closes, even on a
		// link that stays quiet afterwards: nothing more is published.
		select {
		case e := <-a.links:
			require.Equal(t, LinkEvent{Up: true, Overflow: true}, e)
		case <-time.After(3 * healthInterval):
			t.Fatal("the overflow gap never closed on a quiet link")
		}
		require.True(t, a.Connected(), "an overflow is not a disconnection")
	})
}

// A PUBLISH that times out may still have run: when Redis was only slow,
// its echo can come back later, and the publisher must still recognise it
// as its own rather than deliver the event a second time to its local
// subscribers (which the local fan-out already served). A PUBLISH skipped
// while the link is known down never makes one.
func TestEchoKeptAfterPublishTimeout(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	topic := newTopic()
	bundle.a.retain(t, topic)
	bundle.redis.Pause() // Redis reads nothing until Resume: the PUBLISH times out
	ev := bundle.a.publish(t, topic)
	bundle.redis.Resume()
	require.Equal(t, 1.0, counter(t, bundle.a.metrics.PubSub.PublishErrors.WithLabelValues("channel")), "the PUBLISH timed out")
	require.True(t, bundle.a.echo.Has(topic.Community, ev.ID), "a timed-out PUBLISH keeps its echo mark")
}
