package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// A PUBLISH that fails while every link stays up is a gap too (docs/PROTOCOL.md §16.3, no
// silent gaps). Redis holds writes (CLIENT PAUSE … WRITE blocks PUBLISH but
// answers PING and keeps subscriptions), so A's PUBLISH of X times out
// while B's link never drops. A still acknowledges X, and then announces
// the gap: K, which was live on B when X was committed, is told to
// resubscribe; L, registered on B after that, is left open and keeps
// receiving; A's own subscriber, which had X locally, is left open too.
func TestScaleOutPublishFailureIsAGap(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "publisher on A", owner)
	ch := createChannel(t, pubA, owner)
	k := authedPeer(t, s.b, "K on B", reader)
	k.subscribe("live", channelFilter(ch))
	local := authedPeer(t, s.a, "subscriber on A", reader)
	local.subscribe("live", channelFilter(ch))

	rc := s.redis.Client()
	require.NoError(t, rc.Do(context.Background(), "CLIENT", "PAUSE", "2500", "WRITE").Err())
	x := message(t, owner, ch, "published while Redis holds writes")
	began := time.Now()
	pubA.mustPublish(x)
	require.GreaterOrEqual(t, time.Since(began), 900*time.Millisecond, "A waited out its 1 s PUBLISH bound")
	require.Positive(t, s.a.metric("buzz_pubsub_publish_errors_total"))
	local.take(deliveryWait, "X on A's own subscriber", isEvent("live", x.ID))
	time.Sleep(2 * time.Second) // past A's failure plus the clock margin
	l := authedPeer(t, s.b, "L on B", reader)
	history := l.subscribe("live", channelFilter(ch))
	require.Contains(t, idsOf(history), x.ID, "L registered after X's commit: its history holds X")

	// The pause ends about 2.5 s after it began; the announcement follows.
	k.take(frameWait, "K told to resubscribe", isFrame("CLOSED", "live", wire.MsgLiveInterrupted))
	require.Positive(t, s.b.metric("buzz_pubsub_interrupted_subscriptions_total"))
	require.Equal(t, 1.0, s.b.metric("buzz_pubsub_connected"), "B's link never dropped")

	y := message(t, owner, ch, "after the gap")
	pubA.mustPublish(y)
	_, before := l.expect(deliveryWait, "Y live on L", isEvent("live", y.ID))
	for _, f := range before {
		require.NotEqual(t, "CLOSED", f[0], "L was registered after the gap: %v", f)
	}
	_, before = local.expect(deliveryWait, "Y live on A's own subscriber", isEvent("live", y.ID))
	for _, f := range before {
		require.NotEqual(t, "CLOSED", f[0], "A's subscriber missed nothing: %v", f)
	}
}
