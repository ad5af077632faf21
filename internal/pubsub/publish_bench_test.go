package pubsub

import (
	"context"
	"testing"

	"github.com/buzz-relay/buzz/internal/redistest"
)

// BenchmarkPublish is what a commit's PUBLISH costs the publishing process
// against a real redis-server on loopback, with one other process
// subscribed to the event's channel topic and to its community's window
// topic (a process holding the community's hot window): Stored is Publish (the channel
// topic and the community's window topic in one round trip, what every
// stored event does), ChannelOnly is one PUBLISH of the same event
// (PublishEphemeral's path, what a stored event cost before the window
// topic). docs/PERFORMANCE.md "Hot window" quotes it.
//
//	go test -run '^$' -bench Publish -count 3 ./internal/pubsub
func BenchmarkPublish(b *testing.B) {
	srv := redistest.Start(b)
	pub := startBus(b, srv.URL(), nil)
	sub := startBus(b, srv.URL(), func(c *Config) { c.DeliverFunc = func(Message) {} })
	pub.TestSignals.Connected.WaitOrTimeout(b)
	sub.TestSignals.Connected.WaitOrTimeout(b)
	topic := newTopic()
	<-sub.Retain(topic)
	<-sub.Retain(WindowTopic(topic.Community))
	ev := newEvent()
	js := ev.AppendJSON(nil)
	ctx := context.Background()
	b.Run("Stored", func(b *testing.B) {
		for b.Loop() {
			if !pub.Publish(ctx, topic, ev.ID, js) {
				b.Fatal("publish failed")
			}
		}
	})
	b.Run("ChannelOnly", func(b *testing.B) {
		for b.Loop() {
			pub.PublishEphemeral(ctx, topic, ev.ID, js)
		}
	})
}
