package read

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

// lookupTracer counts the accessible-channels lookups a pool runs and,
// once armed, holds the next one after PostgreSQL answered it.
type lookupTracer struct {
	mu      sync.Mutex
	started int
	armed   bool
	reached chan struct{}
	release chan struct{}
}

type heldLookup struct{}

func (l *lookupTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "FROM channels c") || len(d.Args) != 3 || d.Args[2] != nil {
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started++
	if !l.armed {
		return ctx
	}
	l.armed = false
	return context.WithValue(ctx, heldLookup{}, [2]chan struct{}{l.reached, l.release})
}

func (l *lookupTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if chans, ok := ctx.Value(heldLookup{}).([2]chan struct{}); ok {
		close(chans[0])
		<-chans[1]
	}
}

func (l *lookupTracer) take() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.started
	l.started = 0
	return n
}

func (l *lookupTracer) arm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.reached, l.release = true, make(chan struct{}), make(chan struct{})
}

// TestAccessRefreshAhead: live delivery's check (Visible) renews a reader's
// cached set in the background once it is past half its lifetime, so the
// delivery after the old set's expiry does not wait on a lookup; a renewal
// that a Forget overtook is not kept (docs/PROTOCOL.md §5.6).
func TestAccessRefreshAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	trace := &lookupTracer{}
	var clockMu sync.Mutex
	clock := time.Now()
	at := func(d time.Duration) {
		clockMu.Lock()
		defer clockMu.Unlock()
		clock = clock.Add(d)
	}
	e := New(Config{Pool: dbtest.TracedPoolWith(t, pool, trace, 10), CacheTTL: 10 * time.Second,
		NowFunc: func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }})
	settled := func() bool { e.mu.Lock(); defer e.mu.Unlock(); return len(e.refreshing) == 0 }

	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	ch := fixture.Channel(t, pool, cid, owner, fixture.Private(), fixture.Members(reader))
	ev := owner.Signed(t, 9, eventtest.Channel(ch))
	sc := Scope{CommunityID: cid, Reader: reader.PubKey}
	visible := func() bool { return e.Visible(ctx, sc, &ev, ch) }

	require.True(t, visible())
	require.Equal(t, 1, trace.take(), "the first delivery looks the set up")
	at(4 * time.Second)
	require.True(t, visible())
	require.True(t, settled())
	require.Zero(t, trace.take(), "a set younger than half its life is not renewed")

	at(2 * time.Second) // 6 s old
	require.True(t, visible())
	require.Eventually(t, settled, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, trace.take(), "a set past half its life is renewed in the background")
	at(5 * time.Second) // 11 s: the first set has expired, the renewed one has not
	require.True(t, visible())
	require.Zero(t, trace.take(), "the delivery after the expiry uses the renewed set")

	// The next renewal (the set is now 5 s old) is overtaken by a removal
	// and its Forget: it must not bring the old set back.
	trace.arm()
	require.True(t, visible())
	select {
	case <-trace.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal never ran")
	}
	require.NoError(t, store.New(pool).ChannelMemberRemove(ctx, cid, ch, reader.PubKey, owner.PubKey))
	e.Forget(cid, reader.PubKey)
	close(trace.release)
	require.Eventually(t, settled, 10*time.Second, 5*time.Millisecond)
	trace.take()
	require.False(t, visible(), "the removed member's next delivery")
	require.Equal(t, 1, trace.take(), "looked up again, not answered from the overtaken renewal")
}
