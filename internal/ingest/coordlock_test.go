package ingest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCoordLocks: one holder per key, other keys free, a waiter that gives
// up leaves nothing behind, and the table empties with the last holder.
func TestCoordLocks(t *testing.T) {
	t.Parallel()
	var l coordLocks
	ctx := context.Background()

	unlock1, err := l.lock(ctx, 7)
	require.NoError(t, err)
	other, err := l.lock(ctx, 8)
	require.NoError(t, err, "another key is free")
	other()

	var got atomic.Bool
	done := make(chan func())
	go func() {
		unlock, err := l.lock(ctx, 7)
		if err == nil {
			got.Store(true)
		}
		done <- unlock
	}()
	time.Sleep(50 * time.Millisecond)
	require.False(t, got.Load(), "a second writer of key 7 waits")

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = l.lock(short, 7)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a waiter whose context ends gives up")

	unlock1()
	unlock2 := <-done
	require.True(t, got.Load(), "the waiter holds key 7 once it is released")
	require.Equal(t, 1, l.size())
	unlock2()
	require.Equal(t, 0, l.size(), "no key is kept once nobody holds or waits for it")
}

// size is the number of keys held or waited for.
func (l *coordLocks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
