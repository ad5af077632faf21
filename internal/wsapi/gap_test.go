package wsapi

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/wire"
)

// A gap in cross-process delivery (the Bus's LinkFunc) keeps only the
// subscriptions still live: one that ends during the gap is dropped from
// it at once, so a long outage with churning clients holds no ended
// subscription. When the gap closes, the live ones are each told to
// resubscribe, spread over about interruptSpread and no longer.
func TestGapHoldsOnlyLiveSubscriptions(t *testing.T) {
	t.Parallel()
	b := newTestDB(t).setup(t, nil)
	c := b.dial(t)
	c.auth(t)
	const n = 200
	for i := range n {
		c.send(t, "REQ", "s"+strconv.Itoa(i), map[string]any{"kinds": []int{1}, "limit": 0})
		c.expect(t, "EOSE", "s"+strconv.Itoa(i))
	}
	b.srv.LinkChanged(pubsub.LinkEvent{Up: false})
	for i := range n / 2 {
		c.send(t, "CLOSE", "s"+strconv.Itoa(i))
	}
	eventually(t, func() bool {
		b.srv.gap.mu.Lock()
		defer b.srv.gap.mu.Unlock()
		return len(b.srv.gap.interrupted) == n/2
	}, "the gap forgets the closed subscriptions")

	start := time.Now()
	b.srv.LinkChanged(pubsub.LinkEvent{Up: true})
	got := map[string]bool{}
	for len(got) < n/2 {
		f := c.expect(t, "CLOSED")
		if msg := str(t, f[2]); msg != "" { // "" answers a client's CLOSE
			require.Equal(t, wire.MsgLiveInterrupted, msg)
			got[str(t, f[1])] = true
		}
	}
	elapsed := time.Since(start)
	for i := range n / 2 {
		require.False(t, got["s"+strconv.Itoa(i)], "s%d was closed by its client", i)
	}
	require.Greater(t, elapsed, interruptSpread/2, "spread out")
	require.Less(t, elapsed, interruptSpread+2*time.Second, "spread over about 5 s, not more")
}
