package pubsub

import (
	"log/slog"
	"time"
)

// topicState is one topic of the wanted set.
type topicState struct {
	// refs counts the local retains.
	refs int
	// ready is closed once a history query may start (Retain).
	ready       chan struct{}
	readyClosed bool
	readyTimer  *time.Timer
	// unsubscribe is the scheduled UNSUBSCRIBE after refs fell to zero;
	// gen tells a timer that was cancelled from the current one.
	unsubscribe *time.Timer
	gen         int
}

// op is one SUBSCRIBE or UNSUBSCRIBE for the link's writer.
type op struct {
	subscribe bool
	topic     string
}

// closed is a channel that is already closed, for a Retain with nothing
// to wait for.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Retain adds one reference to topic, subscribing to it at Redis when the
// count goes 0 → 1 (docs/PROTOCOL.md §16.1): one retain per channel in a subscription's
// scope, or one of the global topic. It returns a channel that is closed
// when the subscription's history query may start: once Redis has
// confirmed the SUBSCRIBE, after ConfirmTimeout at most, and at once when
// the topic was already confirmed or the link is down (the subscription
// will then be reported interrupted, see LinkEvent). Every Retain needs one
// Release. An invalid topic is logged and never subscribed.
func (b *Bus) Retain(t Topic) <-chan struct{} {
	if !t.Valid() {
		b.log.Warn("retain of an invalid topic ignored", slog.String("topic", t.String()))
		return closed
	}
	name := t.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.topics[name]
	if st == nil {
		st = &topicState{ready: make(chan struct{})}
		b.topics[name] = st
		switch b.state {
		case linkUp:
			b.sendLocked(op{subscribe: true, topic: name})
			st.readyTimer = time.AfterFunc(ConfirmTimeout, func() { b.confirmTimedOut(st) })
		case linkConnecting:
			// Subscribed with the connection's first batch or right after it.
			st.readyTimer = time.AfterFunc(ConfirmTimeout, func() { b.confirmTimedOut(st) })
		default:
			b.closeReadyLocked(st)
		}
	}
	st.refs++
	if st.unsubscribe != nil { // retained again within UnsubscribeDelay
		st.unsubscribe.Stop()
		st.unsubscribe = nil
		st.gen++
	}
	return st.ready
}

// Release drops one reference to topic. When the count reaches zero the
// UNSUBSCRIBE is sent UnsubscribeDelay later, unless a Retain came in
// between. A Release without its Retain is logged and ignored.
func (b *Bus) Release(t Topic) {
	name := t.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.topics[name]
	if st == nil || st.refs == 0 {
		b.log.Warn("release without retain ignored", slog.String("topic", name))
		return
	}
	st.refs--
	if st.refs > 0 {
		return
	}
	st.gen++
	gen := st.gen
	st.unsubscribe = time.AfterFunc(UnsubscribeDelay, func() { b.unsubscribeDue(name, st, gen) })
}

// unsubscribeDue runs UnsubscribeDelay after a topic's count fell to zero:
// unless it was retained since, the topic leaves the wanted set.
func (b *Bus) unsubscribeDue(name string, st *topicState, gen int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[name] != st || st.refs > 0 || st.gen != gen {
		return
	}
	delete(b.topics, name)
	b.closeReadyLocked(st)
	if b.state == linkUp {
		b.sendLocked(op{subscribe: false, topic: name})
	}
	// Connecting or down: the next connection's batch leaves it out.
}

// confirmTimedOut opens a Retain's channel after ConfirmTimeout without a
// confirmation.
func (b *Bus) confirmTimedOut(st *topicState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeReadyLocked(st)
}

// closeReadyLocked closes st.ready once.
func (b *Bus) closeReadyLocked(st *topicState) {
	if st.readyClosed {
		return
	}
	st.readyClosed = true
	close(st.ready)
	if st.readyTimer != nil {
		st.readyTimer.Stop()
		st.readyTimer = nil
	}
}

// sendLocked queues a command for the link's writer and counts it in
// flight. Only while the link is up.
func (b *Bus) sendLocked(o op) {
	b.ops = append(b.ops, o)
	b.inflight[o.topic]++
	select {
	case b.opsWake <- struct{}{}:
	default:
	}
}

// takeOps returns the queued commands and empties the queue.
func (b *Bus) takeOps() []op {
	b.mu.Lock()
	defer b.mu.Unlock()
	ops := b.ops
	b.ops = nil
	return ops
}

// Subscribed reports whether topic is retained and Redis has confirmed its
// SUBSCRIBE on the current connection: from then on every message
// published on it reaches DeliverFunc, until a LinkEvent says otherwise.
// A Retain's channel also closes on ConfirmTimeout or a lost link; this
// tells those apart.
func (b *Bus) Subscribed(t Topic) bool {
	name := t.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.topics[name] != nil && b.state == linkUp && b.inflight[name] == 0
}
