package wsapi

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// holdDispatcher queues a job that keeps the dispatcher busy until the
// returned release is called, as a long fan-out ahead in the queue would.
func holdDispatcher(t *testing.T, b *testBundle) (release func()) {
	t.Helper()
	held, free := make(chan struct{}), make(chan struct{})
	b.srv.push(dispatchJob{fn: func() {
		close(held)
		<-free
	}})
	<-held
	done := false
	release = func() {
		if !done {
			done = true
			close(free)
		}
	}
	t.Cleanup(release)
	return release
}

// queuedDelivery sets up a subscriber of channel C on one connection, holds
// the dispatcher, and publishes x in C from another connection: x's
// delivery to the subscriber waits in the queue until release.
func queuedDelivery(t *testing.T, db *testDB) (b *testBundle, sub *client, x event.Event, release func()) {
	t.Helper()
	b = db.setup(t, nil)
	sub, pub := b.dial(t), b.dial(t)
	sub.auth(t)
	pub.auth(t)
	sub.send(t, "REQ", "s", map[string]any{"#h": []string{b.channelC}, "kinds": []int{9}})
	sub.expect(t, "EOSE", "s")
	release = holdDispatcher(t, b)
	x = pub.key.Signed(t, 9, eventtest.Channel(b.channelC))
	pub.publish(t, x)
	return b, sub, x, release
}

// TestDispatcher: other connections are served after the commit by the
// dispatcher, off the publisher's path (docs/PROTOCOL.md §1.3, §7.6).
func TestDispatcher(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	// The publisher's OK does not wait for the other connections: with the
	// dispatcher held, the OK arrives and the subscriber has nothing yet
	// (its COUNT answer comes before any EVENT); once released, the event
	// is delivered.
	t.Run("OKBeforeOtherConnections", func(t *testing.T) {
		t.Parallel()
		b, sub, x, release := queuedDelivery(t, db)
		sub.send(t, "COUNT", "n", map[string]any{"kinds": []int{0}})
		sub.expect(t, "COUNT", "n")
		require.InDelta(t, 1, testutil.ToFloat64(b.metrics.FanoutQueued), 0, "the delivery waits in the queue")
		release()
		require.Equal(t, x.ID, eventID(t, sub.expect(t, "EVENT", "s")))
	})

	// An eviction waits for the deliveries queued before it: the removed
	// reader gets the event committed before its removal, then CLOSED.
	t.Run("EvictionAfterQueuedDeliveries", func(t *testing.T) {
		t.Parallel()
		b, sub, x, release := queuedDelivery(t, db)
		evicted := make(chan struct{})
		go func() {
			defer close(evicted)
			b.srv.Evict(b.communityA, b.channelC, sub.key.PubKey, nil)
		}()
		select {
		case <-evicted:
			t.Fatal("the eviction ran ahead of the queued delivery")
		case <-time.After(100 * time.Millisecond):
		}
		release()
		<-evicted
		require.Equal(t, x.ID, eventID(t, sub.expect(t, "EVENT", "s")))
		sub.expect(t, "CLOSED", "s", "restricted: channel access revoked")
	})

	// A REQ's EOSE on a connection with another live subscription waits
	// for the deliveries queued before it read storage: the live copy of
	// an event committed before the REQ comes before the REQ's EOSE.
	t.Run("EOSEAfterQueuedDeliveries", func(t *testing.T) {
		t.Parallel()
		b, sub, x, release := queuedDelivery(t, db)
		sub.send(t, "REQ", "again", map[string]any{"#h": []string{b.channelC}, "kinds": []int{9}})
		require.Equal(t, x.ID, eventID(t, sub.expect(t, "EVENT", "again")), "history holds the committed event")
		time.Sleep(200 * time.Millisecond) // time for an EOSE that did not wait to be sent
		release()
		require.Equal(t, x.ID, eventID(t, sub.expect(t, "EVENT", "s")), "the live copy comes first")
		sub.expect(t, "EOSE", "again")
	})
}
