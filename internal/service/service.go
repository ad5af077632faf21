// Package service is the one shape of the relay's background work: a small
// struct with Start(ctx) error and Stop(), a loop around a runOnce that
// tests call directly, and a TestSignals struct that tests wait on.
//
// It owns the lifecycle (Base: one goroutine, Start and Stop idempotent,
// Stop waits for the loop to end), the ticker loop (Tick) and the adaptor
// that lets an errgroup own a service (Run). It does NOT log, retry or
// know what a service does, and it imports no internal package, so any
// subsystem (audit, relay, maintenance) may give its loops this shape.
package service

import (
	"context"
	"sync"
	"time"
)

// Service is background work with a lifecycle. Start returns once the work
// is running (or failed to start); the work ends when the context passed to
// Start ends or Stop is called. Stop returns once the work has ended; both
// are safe to call twice, and Stop is safe before Start.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// Base is embedded by a service to give it Start and Stop around one
// goroutine. The zero value is ready.
type Base struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
}

// StartLoop runs loop in a new goroutine with a context that ends when ctx
// ends or Stop is called. While a loop is running (even one being stopped)
// it does nothing. After the loop ended, a new StartLoop starts it again.
// It always returns nil, so a service's Start can return it.
func (b *Base) StartLoop(ctx context.Context, loop func(ctx context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	b.cancel, b.stopped = cancel, stopped
	go func() {
		defer func() {
			b.mu.Lock()
			if b.stopped == stopped {
				b.cancel, b.stopped = nil, nil
			}
			b.mu.Unlock()
			cancel()
			close(stopped)
		}()
		loop(ctx)
	}()
	return nil
}

// Stop ends the loop and waits until it has returned. Safe to call twice,
// concurrently, before Start and after the loop ended on its own.
func (b *Base) Stop() {
	b.mu.Lock()
	cancel, stopped := b.cancel, b.stopped
	b.mu.Unlock()
	if stopped == nil {
		return
	}
	cancel()
	<-stopped
}

// Running reports whether a loop is running.
func (b *Base) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped != nil
}

// Tick calls fn every interval, and at once whenever wake delivers, until
// ctx ends; wake may be nil. fn gets ctx and should return soon after it
// ends. A tick that falls due while fn runs is taken right after it (one
// at most, like time.Ticker).
func Tick(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		fn(ctx)
	}
}

// Run starts s, waits for ctx to end, then stops s: the adaptor that lets
// an errgroup own a service. It returns Start's error, or nil.
func Run(ctx context.Context, s Service) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	s.Stop()
	return nil
}
