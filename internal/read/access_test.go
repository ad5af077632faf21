package read_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestAccessCacheForgetRace: a lookup of a reader's accessible channels
// that PostgreSQL answered before a membership removal committed, and that
// returns after the removal's Forget, must not be cached: the removed
// member's next read sees the channel gone, not the set from before
// (docs/PROTOCOL.md §5.6).
func TestAccessCacheForgetRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	hold := &dbtest.Holder{Match: read.AccessLookup}
	engine := read.New(read.Config{Pool: dbtest.TracedPoolWith(t, pool, hold, 10)})

	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	private := fixture.Channel(t, pool, cid, owner, fixture.Private(), fixture.Members(reader))
	secret := fixture.Event(t, pool, cid, owner, 9, eventtest.Channel(private), eventtest.Content("members only"))
	ids := func() []string {
		return reqIDs(t, engine, read.Scope{CommunityID: cid, Reader: reader.PubKey}, `{"kinds":[9]}`)
	}

	reached := hold.Arm()
	done := make(chan []string)
	go func() { done <- ids() }()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup never ran")
	}
	// The removal commits and forgets while the lookup's answer, taken
	// before it, is on its way.
	require.NoError(t, store.New(pool).ChannelMemberRemove(ctx, cid, private, reader.PubKey, owner.PubKey))
	engine.Forget(cid, reader.PubKey)
	hold.Release()
	require.Equal(t, []string{secret.ID}, <-done, "the read that began before the removal")

	require.Empty(t, ids(), "the read after the removal's Forget")
}

// reqIDs reads one REQ filter (raw JSON) in sc through engine and returns
// the ids it answers, in order.
func reqIDs(t *testing.T, engine *read.Engine, sc read.Scope, raw string) []string {
	t.Helper()
	ctx := context.Background()
	f, err := event.ParseFilter([]byte(raw))
	require.NoError(t, err)
	rd, err := engine.Open(ctx, read.Request{Scope: sc, Surface: read.SurfaceREQ, Filters: []event.Filter{f}})
	require.NoError(t, err)
	defer rd.Close()
	var out []string
	require.NoError(t, rd.Rows(ctx, func(r read.Row) bool { out = append(out, r.Event.ID); return true }))
	return out
}
