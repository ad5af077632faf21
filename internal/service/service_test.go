package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter is the smallest service: its loop counts ticks until ctx ends.
type counter struct {
	service.Base
	interval time.Duration
	wake     chan struct{}
	loops    atomic.Int32 // loops started
	ended    atomic.Int32 // loops that returned
	Signals  struct {
		Started testsignal.Signal[struct{}]
		Ticked  testsignal.Signal[int]
	}
}

func newCounter(interval time.Duration) *counter {
	c := &counter{interval: interval, wake: make(chan struct{}, 1)}
	c.Signals.Started.Init()
	c.Signals.Ticked.Init()
	return c
}

func (c *counter) Start(ctx context.Context) error {
	return c.StartLoop(ctx, func(ctx context.Context) {
		c.loops.Add(1)
		c.Signals.Started.Signal(struct{}{})
		defer c.ended.Add(1)
		n := 0
		service.Tick(ctx, c.interval, c.wake, func(context.Context) {
			n++
			c.Signals.Ticked.Signal(n)
		})
	})
}

func TestBase(t *testing.T) {
	t.Parallel()

	t.Run("StartAndStopTwice", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		require.NoError(t, c.Start(context.Background()))
		require.NoError(t, c.Start(context.Background()))
		c.Signals.Started.WaitOrTimeout(t)
		require.True(t, c.Running())
		c.Stop()
		require.False(t, c.Running())
		require.Equal(t, int32(1), c.loops.Load(), "a second Start while running starts nothing")
		require.Equal(t, int32(1), c.ended.Load(), "Stop returns after the loop returned")
		c.Stop()
		c.Signals.Started.RequireEmpty(t)
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		c.Stop()
		require.False(t, c.Running())
	})

	t.Run("ConcurrentStopsBothWait", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		require.NoError(t, c.Start(context.Background()))
		c.Signals.Started.WaitOrTimeout(t)
		done := make(chan int32, 2)
		for range 2 {
			go func() {
				c.Stop()
				done <- c.ended.Load()
			}()
		}
		require.Equal(t, int32(1), <-done)
		require.Equal(t, int32(1), <-done)
	})

	t.Run("RestartAfterStop", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		require.NoError(t, c.Start(context.Background()))
		c.Stop()
		require.NoError(t, c.Start(context.Background()))
		c.Signals.Started.WaitOrTimeout(t)
		c.Signals.Started.WaitOrTimeout(t)
		c.Stop()
		require.Equal(t, int32(2), c.loops.Load())
		require.Equal(t, int32(2), c.ended.Load())
	})

	t.Run("EndsWithItsContext", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, c.Start(ctx))
		c.Signals.Started.WaitOrTimeout(t)
		cancel()
		c.Stop() // waits for the loop that ctx already ended
		require.Equal(t, int32(1), c.ended.Load())
		require.False(t, c.Running())
	})
}

func TestTick(t *testing.T) {
	t.Parallel()

	t.Run("EveryInterval", func(t *testing.T) {
		t.Parallel()
		c := newCounter(5 * time.Millisecond)
		require.NoError(t, c.Start(context.Background()))
		defer c.Stop()
		for i := 1; i <= 3; i++ {
			require.Equal(t, i, c.Signals.Ticked.WaitOrTimeout(t))
		}
	})

	t.Run("WakeRunsAtOnce", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		require.NoError(t, c.Start(context.Background()))
		defer c.Stop()
		c.Signals.Started.WaitOrTimeout(t)
		c.Signals.Ticked.RequireEmpty(t)
		c.wake <- struct{}{}
		require.Equal(t, 1, c.Signals.Ticked.WaitOrTimeout(t))
		c.wake <- struct{}{}
		require.Equal(t, 2, c.Signals.Ticked.WaitOrTimeout(t))
	})

	t.Run("NoRunBeforeTheFirstInterval", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		require.NoError(t, c.Start(context.Background()))
		c.Signals.Started.WaitOrTimeout(t)
		c.Stop()
		c.Signals.Ticked.RequireEmpty(t)
	})
}

// failing is a service whose Start fails.
type failing struct{ stopped bool }

func (f *failing) Start(context.Context) error { return errors.New("no") }
func (f *failing) Stop()                       { f.stopped = true }

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("StopsWhenContextEnds", func(t *testing.T) {
		t.Parallel()
		c := newCounter(time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- service.Run(ctx, c) }()
		c.Signals.Started.WaitOrTimeout(t)
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, int32(1), c.ended.Load())
		require.False(t, c.Running())
	})

	t.Run("StartError", func(t *testing.T) {
		t.Parallel()
		f := &failing{}
		require.EqualError(t, service.Run(context.Background(), f), "no")
		require.False(t, f.stopped)
	})
}
