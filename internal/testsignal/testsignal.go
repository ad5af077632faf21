// Package testsignal gives background work a way to tell tests that
// something happened, so tests wait for it instead of sleeping.
//
// Production code emits; only tests call Init. A Signal that was never
// initialised is a no-op, so emitting costs one nil check in production
// and never changes which path the code takes. Emitting never blocks: when
// the buffer of an initialised signal is full the value is dropped, so a
// test that must see every value drains as it goes.
//
// It does NOT import any internal package (any package may use it), and it
// does NOT import "testing": waits take the small TB interface, which
// *testing.T satisfies, so production binaries do not link the test
// framework.
package testsignal

import (
	"sync/atomic"
	"time"
)

// Buffer is how many undelivered values an initialised signal holds.
const Buffer = 1000

// Timeout is how long WaitOrTimeout waits.
const Timeout = 10 * time.Second

// TB is the part of testing.TB the waits use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal carries values of T from background work to a test. The zero
// value is ready for emitting (a no-op); Init makes it deliver. A Signal
// must not be copied after first use.
type Signal[T any] struct {
	ch      atomic.Pointer[chan T]
	dropped atomic.Int64
}

// Init makes the signal deliver, from now on. It is safe while the
// emitting goroutine runs; calling it again replaces the buffer and
// forgets what was waiting. Tests only.
func (s *Signal[T]) Init() {
	ch := make(chan T, Buffer)
	s.ch.Store(&ch)
}

// Signal emits v. It is a no-op on a nil or uninitialised signal and never
// blocks: a full buffer drops v.
func (s *Signal[T]) Signal(v T) {
	if s == nil {
		return
	}
	ch := s.ch.Load()
	if ch == nil {
		return
	}
	select {
	case *ch <- v:
	default:
		s.dropped.Add(1)
	}
}

// WaitC is the channel values arrive on, for a test's own select. Nil (it
// never delivers) when the signal was not initialised.
func (s *Signal[T]) WaitC() <-chan T {
	if ch := s.ch.Load(); ch != nil {
		return *ch
	}
	return nil
}

// WaitOrTimeout returns the next value, failing the test after Timeout.
func (s *Signal[T]) WaitOrTimeout(t TB) T {
	t.Helper()
	return s.WaitFor(t, Timeout)
}

// WaitFor returns the next value, failing the test after d.
func (s *Signal[T]) WaitFor(t TB, d time.Duration) T {
	t.Helper()
	ch := s.WaitC()
	if ch == nil {
		t.Fatalf("testsignal: wait on a signal that was not initialised")
		var zero T
		return zero
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("testsignal: no signal within %s", d)
		var zero T
		return zero
	}
}

// RequireEmpty fails the test when a value is waiting.
func (s *Signal[T]) RequireEmpty(t TB) {
	t.Helper()
	select {
	case v := <-s.WaitC():
		t.Fatalf("testsignal: unexpected signal %v", v)
	default:
	}
}

// Dropped is how many values a full buffer dropped.
func (s *Signal[T]) Dropped() int64 { return s.dropped.Load() }
