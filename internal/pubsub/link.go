package pubsub

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// item is one message from the subscription connection on its way to the
// consumer goroutine.
type item struct {
	topic   string
	payload string
}

// link keeps the subscription connection up until ctx ends: connect,
// subscribe the wanted set, read; on loss report it and retry after
// FirstRetryDelay, doubling up to MaxRetryDelay, back to FirstRetryDelay
// after a connection that came up (docs/PROTOCOL.md §16.3).
func (b *Bus) link(ctx context.Context, client *redis.Client) {
	delay := FirstRetryDelay
	for {
		wasUp, err := b.session(ctx, client)
		if ctx.Err() != nil {
			return
		}
		b.markDown(err)
		if wasUp {
			delay = FirstRetryDelay
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, MaxRetryDelay)
	}
}

// session runs one subscription connection: it subscribes the control and
// barrier topics and the whole wanted set in one batch, marks the link up
// once Redis confirmed all of them, and then reads until the connection
// fails or ctx ends. It reports whether the link came up.
func (b *Bus) session(ctx context.Context, client *redis.Client) (wasUp bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	ps := client.Subscribe(ctx) // connects on first use
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { // a Close is what ends a blocked read
		<-ctx.Done()
		_ = ps.Close()
	})

	if err := ps.Subscribe(ctx, b.beginSession()...); err != nil {
		return false, err
	}
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthInterval)
		if err != nil {
			if !isTimeout(err) || ctx.Err() != nil {
				return wasUp, err
			}
			b.drained() // a quiet link must still end an overflow
			if pinged {
				return wasUp, errors.New("no answer to PING")
			}
			if err := ps.Ping(ctx); err != nil {
				return wasUp, err
			}
			pinged = true
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if b.confirmed(m) {
				wasUp = true
				b.markUp()
				wg.Go(func() { b.write(ctx, ps, cancel) })
			}
		case *redis.Message:
			b.receive(m.Channel, m.Payload)
		default: // a PONG
			b.drained()
		}
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// beginSession returns the first batch of a new connection: the control
// and barrier topics and every topic of the wanted set.
func (b *Bus) beginSession() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clearSessionLocked()
	names := make([]string, 0, len(b.topics)+2)
	names = append(names, ControlTopic, b.barrierTopic)
	for name := range b.topics {
		names = append(names, name)
	}
	b.batch = make(map[string]bool, len(names))
	for _, name := range names {
		b.batch[name] = true
		b.inflight[name] = 1
	}
	b.pending = len(names)
	return names
}

// clearSessionLocked forgets what was sent on the previous connection.
func (b *Bus) clearSessionLocked() {
	b.ops = nil
	clear(b.inflight)
	b.batch = nil
	b.pending = 0
}

// confirmed records a SUBSCRIBE or UNSUBSCRIBE confirmation and reports
// whether it was the last one of the connection's first batch.
func (b *Bus) confirmed(s *redis.Subscription) (sessionUp bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m.TopicsSubscribed.Set(float64(s.Count))
	if b.inflight[s.Channel] > 0 {
		b.inflight[s.Channel]--
	}
	switch s.Kind {
	case "subscribe":
		// Commands are confirmed in order, so the last one in flight being
		// a SUBSCRIBE means the topic is subscribed now.
		if st := b.topics[s.Channel]; st != nil && b.inflight[s.Channel] == 0 {
			b.closeReadyLocked(st)
		}
		if b.state != linkUp && b.pending > 0 && b.batch[s.Channel] {
			b.pending--
			return b.pending == 0
		}
	case "unsubscribe":
		b.TestSignals.Unsubscribed.Signal(s.Channel)
	}
	return false
}

// markUp runs once the first batch is confirmed: the link is up, then the
// retains and releases that came in meanwhile are sent, in order.
func (b *Bus) markUp() {
	b.mu.Lock()
	b.state = linkUp
	for name := range b.topics {
		if !b.batch[name] {
			b.sendLocked(op{subscribe: true, topic: name})
		}
	}
	for name := range b.batch {
		if _, wanted := b.topics[name]; !wanted && name != ControlTopic && name != b.barrierTopic {
			b.sendLocked(op{subscribe: false, topic: name})
		}
	}
	reconnected := b.outage
	b.outage = false
	whole, changed := b.healthLocked()
	b.mu.Unlock()

	b.m.Connected.Set(1)
	if reconnected {
		b.m.Reconnects.Inc()
	}
	b.log.Info("redis connected")
	b.report(changed, LinkEvent{Up: whole})
	b.TestSignals.Connected.Signal(struct{}{})
}

// markDown runs when a connection failed or could not be made: publishing
// stops, every waiting Retain and Barrier returns, and the first failure of
// an outage is logged and reported.
func (b *Bus) markDown(err error) {
	b.mu.Lock()
	b.state = linkDown
	b.lagging = false // the outage is the larger gap
	b.clearSessionLocked()
	for _, st := range b.topics {
		b.closeReadyLocked(st)
	}
	first := !b.outage
	b.outage = true
	whole, changed := b.healthLocked()
	b.mu.Unlock()

	b.m.Connected.Set(0)
	b.m.TopicsSubscribed.Set(0)
	b.barriers.fail(ErrDisconnected)
	if first {
		b.log.Warn("redis disconnected", slog.String("err", errText(err)))
	} else {
		b.log.Debug("redis reconnect failed", slog.String("err", errText(err)))
	}
	b.report(changed, LinkEvent{Up: whole})
	b.TestSignals.Disconnected.Signal(err)
}

func errText(err error) string {
	if err == nil {
		return "connection closed"
	}
	return err.Error()
}

// healthLocked records whether live delivery is whole now (link up, no
// overflow) and reports whether that changed since LinkFunc was last told.
func (b *Bus) healthLocked() (whole, changed bool) {
	whole = b.state == linkUp && !b.lagging
	if whole == b.reported {
		return whole, false
	}
	b.reported = whole
	return whole, true
}

// report tells LinkFunc about a change, outside the lock.
func (b *Bus) report(changed bool, ev LinkEvent) {
	if changed && b.cfg.LinkFunc != nil {
		b.cfg.LinkFunc(ev)
	}
}

// write sends the queued SUBSCRIBE and UNSUBSCRIBE commands on the
// connection, in order, until ctx ends. A failed write ends the session.
func (b *Bus) write(ctx context.Context, ps *redis.PubSub, endSession context.CancelFunc) {
	for {
		for _, o := range b.takeOps() {
			var err error
			if o.subscribe {
				err = ps.Subscribe(ctx, o.topic)
			} else {
				err = ps.Unsubscribe(ctx, o.topic)
			}
			if err != nil {
				b.log.Debug("redis subscription command failed", slog.String("topic", o.topic), slog.String("err", err.Error()))
				endSession()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-b.opsWake:
		}
	}
}

// receive hands a message to the consumer without ever waiting: when the
// queue is full the message is dropped, counted, and the gap reported.
func (b *Bus) receive(topic, payload string) {
	b.m.MessagesReceived.WithLabelValues(receiveLabel(topic)).Inc()
	select {
	case b.queue <- item{topic: topic, payload: payload}:
		b.drained()
	default:
		b.m.FanoutLag.Inc()
		b.warnOverflow.Warn(slog.Int("queue", QueueSize))
		b.setLagging(true)
	}
}

// drained ends an overflow once the consumer has emptied at least half of
// the queue: checked on every message and on every quiet health interval,
// so a link that goes quiet after an overflow still reports the gap's end
// (and the interrupted subscriptions are told), and a queue that hovers at
// its limit does not flap. Link goroutine only.
func (b *Bus) drained() {
	if b.lagging && len(b.queue) < QueueSize/2 {
		b.setLagging(false)
	}
}

// setLagging records the start or end of a queue overflow and reports the
// change. Link goroutine only.
func (b *Bus) setLagging(lagging bool) {
	if b.lagging == lagging {
		return
	}
	b.mu.Lock()
	b.lagging = lagging
	whole, changed := b.healthLocked()
	b.mu.Unlock()
	b.report(changed, LinkEvent{Up: whole, Overflow: true})
}
