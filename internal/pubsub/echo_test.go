package pubsub

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clock is a settable time source for the echo set's expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestEchoSet(t *testing.T) {
	t.Parallel()

	setupEcho := func(limit int) (*echoSet, *clock) {
		c := &clock{now: time.Unix(1_700_000_000, 0)}
		return newEchoSet(EchoTTL, limit, c.Now), c
	}

	t.Run("KeyedByCommunityAndID", func(t *testing.T) {
		t.Parallel()
		s, _ := setupEcho(EchoMax)
		s.Mark("c1", "id")
		require.True(t, s.Has("c1", "id"))
		require.False(t, s.Has("c2", "id"), "the same id in another community is not an echo")
		s.Remove("c1", "id")
		require.False(t, s.Has("c1", "id"))
		s.Remove("c1", "id") // twice is fine
	})

	t.Run("ExpiresAfterTTL", func(t *testing.T) {
		t.Parallel()
		s, c := setupEcho(EchoMax)
		s.Mark("c", "old")
		c.Advance(30 * time.Second)
		s.Mark("c", "new")
		c.Advance(EchoTTL - 30*time.Second - time.Millisecond)
		require.True(t, s.Has("c", "old"))
		c.Advance(time.Millisecond)
		require.False(t, s.Has("c", "old"), "60 s after its mark")
		require.True(t, s.Has("c", "new"))
		require.Equal(t, 1, s.Len())
	})

	t.Run("MarkAgainRenews", func(t *testing.T) {
		t.Parallel()
		s, c := setupEcho(EchoMax)
		s.Mark("c", "a")
		c.Advance(50 * time.Second)
		s.Mark("c", "a")
		c.Advance(50 * time.Second)
		require.True(t, s.Has("c", "a"))
	})

	t.Run("BoundedOldestFirst", func(t *testing.T) {
		t.Parallel()
		s, _ := setupEcho(EchoMax)
		for i := range EchoMax + 2 {
			s.Mark("c", strconv.Itoa(i))
		}
		require.Equal(t, EchoMax, s.Len())
		require.False(t, s.Has("c", "0"))
		require.False(t, s.Has("c", "1"))
		require.True(t, s.Has("c", "2"))
		require.True(t, s.Has("c", strconv.Itoa(EchoMax+1)))
	})
}
