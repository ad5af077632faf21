package pubsub

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/buzz-relay/buzz/internal/event"
)

// consume drains the queue on one goroutine until ctx ends: events go to
// DeliverFunc, control messages to ControlFunc, barrier tokens release
// their Barrier callers, all in the order Redis delivered them.
func (b *Bus) consume(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-b.queue:
			b.handle(it)
		}
	}
}

// handle processes one message from Redis.
func (b *Bus) handle(it item) {
	switch it.topic {
	case b.barrierTopic:
		b.barriers.arrived(it.payload)
	case ControlTopic:
		b.handleControl(it.payload)
	default:
		b.handleEvent(it.topic, it.payload)
	}
}

// handleEvent checks an event message (docs/PROTOCOL.md §16.2) and delivers it
// unless it is this process's own echo. The community and the channel come
// from the topic, never from the event.
func (b *Bus) handleEvent(name, payload string) {
	t, err := ParseTopic(name)
	if err != nil {
		b.drop(name, "topic does not parse")
		return
	}
	raw := []byte(payload)
	var channel string
	if t.Window {
		var msg struct {
			Channel string          `json:"channel_id"`
			Event   json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(raw, &msg); err != nil || (msg.Channel != "" && !isUUID(msg.Channel)) {
			b.drop(name, "not a window message")
			return
		}
		raw, channel = msg.Event, msg.Channel
	}
	ev, err := event.Parse(raw)
	if err != nil {
		b.drop(name, "not an event: "+err.Error())
		return
	}
	if _, ok := ev.CheckID(); !ok {
		b.drop(name, "id does not match the event")
		return
	}
	if b.echo.Has(t.Community, ev.ID) {
		b.m.EchoSkipped.Inc()
		return
	}
	b.m.FanoutTotal.Inc()
	if b.cfg.DeliverFunc != nil {
		b.cfg.DeliverFunc(Message{Topic: t, Event: &ev, JSON: raw, Channel: channel})
	}
}

// drop counts and (rate-limited) logs an invalid message.
func (b *Bus) drop(topic, reason string) {
	b.m.InvalidMessages.Inc()
	b.warnInvalid.Warn(slog.String("topic", topic), slog.String("reason", reason))
	b.TestSignals.Dropped.Signal(reason)
}
