package pubsub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Barrier waits until every event that Redis delivered to this process
// before now has been handed to DeliverFunc (docs/PROTOCOL.md §16.2): it publishes a
// unique token on the process's own barrier topic and waits until the
// consumer goroutine reaches it, in the same queue as the events. Since
// other processes publish before they answer OK, every event acknowledged
// anywhere before the caller read storage is then delivered. Call it before
// the EOSE of a REQ on a connection that holds other live subscriptions.
//
// Callers that arrive while a round trip is under way share the next one,
// which starts after they called. It returns nil when the token came back,
// ErrDisconnected at once when the link is down, ErrBarrierTimeout after
// BarrierTimeout, or ctx's error. Both failures are counted in
// buzz_pubsub_barrier_timeouts_total; the caller sends EOSE either way.
func (b *Bus) Barrier(ctx context.Context) error {
	if !b.Connected() {
		b.m.BarrierTimeouts.Inc()
		return ErrDisconnected
	}
	done := b.barriers.join()
	timer := time.NewTimer(BarrierTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			b.m.BarrierTimeouts.Inc()
		}
		return err
	case <-timer.C:
		b.m.BarrierTimeouts.Inc()
		return ErrBarrierTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// barriers runs the barrier round trips, one at a time.
type barriers struct {
	wake chan struct{}

	mu      sync.Mutex
	waiting []chan error // joined the next round
	current *round       // in flight, or nil
}

// round is one barrier token on its way through Redis and the queue.
type round struct {
	token   string
	waiters []chan error
	done    chan error // receives the outcome once
}

func (bs *barriers) init() { bs.wake = make(chan struct{}, 1) }

// join adds a caller to the next round and returns where its outcome will
// be sent.
func (bs *barriers) join() <-chan error {
	done := make(chan error, 1)
	bs.mu.Lock()
	bs.waiting = append(bs.waiting, done)
	bs.mu.Unlock()
	select {
	case bs.wake <- struct{}{}:
	default:
	}
	return done
}

// run starts a round whenever callers wait and none is in flight, until
// ctx ends.
func (bs *barriers) run(ctx context.Context, b *Bus) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-bs.wake:
		}
		for bs.roundTrip(ctx, b) {
		}
	}
}

// roundTrip runs one round for the callers waiting now; false when none
// waited.
func (bs *barriers) roundTrip(ctx context.Context, b *Bus) bool {
	r := &round{token: newToken(), done: make(chan error, 1)}
	bs.mu.Lock()
	r.waiters, bs.waiting = bs.waiting, nil
	if len(r.waiters) > 0 {
		bs.current = r
	}
	bs.mu.Unlock()
	if len(r.waiters) == 0 {
		return false
	}

	var err error
	if client := b.pool(); client == nil {
		err = ErrDisconnected
	} else if err = publish(ctx, client, b.barrierTopic, r.token); err == nil {
		timer := time.NewTimer(BarrierTimeout)
		select {
		case err = <-r.done:
		case <-timer.C:
			err = ErrBarrierTimeout
		case <-ctx.Done():
			err = ctx.Err()
		}
		timer.Stop()
	}

	bs.mu.Lock()
	bs.current = nil
	bs.mu.Unlock()
	for _, w := range r.waiters {
		w <- err // buffered: a caller that gave up is not waited for
	}
	return true
}

// arrived is called by the consumer for each token on the barrier topic.
func (bs *barriers) arrived(token string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.current != nil && bs.current.token == token {
		bs.current.finish(nil)
	}
}

// fail ends the round in flight and every waiting caller with err: the
// link went down, so no token can come back.
func (bs *barriers) fail(err error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.current != nil {
		bs.current.finish(err)
	}
	for _, w := range bs.waiting {
		w <- err
	}
	bs.waiting = nil
}

// finish delivers the round's outcome once.
func (r *round) finish(err error) {
	select {
	case r.done <- err:
	default:
	}
}

// newToken returns a random barrier token.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
