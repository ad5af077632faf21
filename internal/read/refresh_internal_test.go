package read

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/store"
)

// AccessLookup picks the statement that fills the access cache: the
// whole-set lookup passes no requested channels ($3 NULL), the uncached
// confirmation of named channels passes them. For dbtest.Holder, here and
// in package read_test.
func AccessLookup(d pgx.TraceQueryStartData) bool {
	return strings.Contains(d.SQL, "FROM channels c") && len(d.Args) == 3 && d.Args[2] == nil
}

// TestAccessRefreshAhead: live delivery's check (Visible) renews a reader's
// cached set in the background once it is past half its lifetime, so the
// delivery after the old set's expiry does not wait on a lookup; a renewal
// that a Forget overtook is not kept (docs/PROTOCOL.md §5.6).
func TestAccessRefreshAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	trace := &dbtest.Holder{Match: AccessLookup}
	var clockMu sync.Mutex
	clock := time.Now()
	at := func(d time.Duration) {
		clockMu.Lock()
		defer clockMu.Unlock()
		clock = clock.Add(d)
	}
	m := metrics.Disabled()
	renewals := func(outcome string) float64 {
		return testutil.ToFloat64(m.AccessibleChannelsRenewals.WithLabelValues(outcome))
	}
	e := New(Config{Pool: dbtest.TracedPoolWith(t, pool, trace, 10), CacheTTL: 10 * time.Second, Metrics: m,
		NowFunc: func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }})
	settled := func() bool { e.mu.Lock(); defer e.mu.Unlock(); return len(e.refreshing) == 0 }

	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	ch := fixture.Channel(t, pool, cid, owner, fixture.Private(), fixture.Members(reader))
	ev := owner.Signed(t, 9, eventtest.Channel(ch))
	sc := Scope{CommunityID: cid, Reader: reader.PubKey}
	visible := func() bool { return e.Visible(ctx, sc, &ev, ch) }

	require.True(t, visible())
	require.Equal(t, 1, trace.Take(), "the first delivery looks the set up")
	at(4 * time.Second)
	require.True(t, visible())
	require.True(t, settled())
	require.Zero(t, trace.Take(), "a set younger than half its life is not renewed")

	at(2 * time.Second) // 6 s old
	require.True(t, visible())
	require.Eventually(t, settled, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, trace.Take(), "a set past half its life is renewed in the background")
	require.Equal(t, 1.0, renewals("kept"))
	// 10.5 s: the first set has expired; the renewed one has not and, 4.5 s
	// old, starts no renewal of its own that the count below could catch.
	at(4500 * time.Millisecond)
	require.True(t, visible())
	require.Zero(t, trace.Take(), "the delivery after the expiry uses the renewed set")

	// The next renewal (at 11 s the set is 5 s old) is overtaken by a
	// removal and its Forget: it must not bring the old set back.
	at(500 * time.Millisecond)
	reached := trace.Arm()
	require.True(t, visible())
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal never ran")
	}
	require.NoError(t, store.New(pool).ChannelMemberRemove(ctx, cid, ch, reader.PubKey, owner.PubKey))
	e.Forget(cid, reader.PubKey)
	trace.Release()
	require.Eventually(t, settled, 10*time.Second, 5*time.Millisecond)
	trace.Take()
	require.Equal(t, 1.0, renewals("overtaken"))
	require.False(t, visible(), "the removed member's next delivery")
	require.Equal(t, 1, trace.Take(), "looked up again, not answered from the overtaken renewal")
}
