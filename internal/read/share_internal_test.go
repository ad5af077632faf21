package read

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/metrics"
)

// waiting is the number of reads queued in acquire.
func (s *shares) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters.Len()
}

// TestSharesInArrivalOrder: reads waiting on one pubkey's share get it in
// the order they asked, one per release; a waiter of another pubkey with
// room is not held behind them; a waiter whose context ends leaves the
// queue without taking a share.
func TestSharesInArrivalOrder(t *testing.T) {
	t.Parallel()
	s := newShares(ShareConfig{PerPubkey: 1, AcquireTimeout: 10 * time.Second}, metrics.Disabled())
	ctx := context.Background()
	require.NoError(t, s.acquire(ctx, "c0", "flood"))

	const n = 10
	got := make(chan int, n)
	for i := range n {
		go func() {
			if s.acquire(ctx, "c", "flood") == nil {
				got <- i
			}
		}()
		require.Eventually(t, func() bool { return s.waiting() == i+1 }, 5*time.Second, time.Millisecond)
	}
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() { gone <- s.acquire(cctx, "c", "flood") }()
	require.Eventually(t, func() bool { return s.waiting() == n+1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.True(t, errors.Is(<-gone, context.Canceled))
	require.Equal(t, n, s.waiting(), "the cancelled read left the queue")

	require.NoError(t, s.acquire(ctx, "c1", "honest"), "another pubkey with room does not wait")
	s.release("c1", "honest", 1)

	s.release("c0", "flood", 1)
	for want := range n {
		select {
		case i := <-got:
			require.Equal(t, want, i)
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d never got its share", want)
		}
		select {
		case i := <-got:
			t.Fatalf("waiter %d got a share while %d held the only one", i, want)
		case <-time.After(10 * time.Millisecond):
		}
		s.release("c", "flood", 1)
	}
	require.Zero(t, s.waiting())
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Zero(t, s.total, "every share given back")
}
