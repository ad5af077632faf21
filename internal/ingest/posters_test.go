package ingest

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// The channel check inside the write (posters.go): after one read of the
// channel's state, a poster's events are checked by their write, and a
// change of access made elsewhere (another process: here the store
// directly, which this pipeline hears nothing of) still refuses the next
// event with the same answer as the read, and stores nothing.
func TestPosterCheckInWrite(t *testing.T) {
	t.Parallel()
	b, m := setupMetered(t, 0)
	ctx := context.Background()
	s := store.New(b.pool)
	owner, mem := eventtest.NewKey(), eventtest.NewKey()
	ch := b.channel(t, owner, eventtest.Tag("visibility", "private"))
	b.mustSubmit(t, owner, owner.Signed(t, event.KindPutUser, eventtest.Channel(ch), eventtest.Tag("p", mem.PubKey)))
	base := testutil.ToFloat64(m.PosterChecks.WithLabelValues("read")) // the owner's 9000
	checks := func() [3]float64 {
		return [3]float64{testutil.ToFloat64(m.PosterChecks.WithLabelValues("read")) - base,
			testutil.ToFloat64(m.PosterChecks.WithLabelValues("write")),
			testutil.ToFloat64(m.PosterChecks.WithLabelValues("refused_by_write"))}
	}
	n := 0
	post := func(opts ...eventtest.Option) (event.Event, Result) {
		n++
		ev := mem.Signed(t, event.KindStreamMessage, append([]eventtest.Option{eventtest.Channel(ch),
			eventtest.Content("post " + strconv.Itoa(n))}, opts...)...)
		res := b.submit(t, mem, ev)
		return ev, Result{Code: res.Code, Message: res.Message}
	}
	stored := func(ev event.Event) bool { _, ok := b.lookup(t, ev.ID); return ok }
	refusedNotStored := func(want string) {
		t.Helper()
		ev, res := post()
		require.Equal(t, Result{Code: Rejected, Message: want}, res)
		require.False(t, stored(ev))
		require.Zero(t, b.intents(t, ev.ID))
	}

	first, res := post()
	require.Equal(t, Result{Code: Accepted}, res)
	require.Equal(t, [3]float64{1, 0, 0}, checks(), "the first event reads the channel's state")
	second, res := post()
	require.Equal(t, Result{Code: Accepted}, res)
	require.True(t, stored(first) && stored(second))
	require.Equal(t, [3]float64{1, 1, 0}, checks(), "the next one is left to its write")

	// Removed elsewhere: the write refuses, the read names the rule.
	require.NoError(t, s.ChannelMemberRemove(ctx, b.tenant.CommunityID, ch, mem.PubKey, owner.PubKey))
	refusedNotStored(wire.MsgNotChannelMember)
	require.Equal(t, [3]float64{2, 2, 1}, checks())
	refusedNotStored(wire.MsgNotChannelMember) // the pass is forgotten: read again
	require.Equal(t, [3]float64{3, 2, 1}, checks())

	// Back, then the channel archived elsewhere.
	require.NoError(t, s.ChannelMemberUpsert(ctx, b.tenant.CommunityID, ch, mem.PubKey, "member", owner.PubKey))
	_, res = post()
	require.Equal(t, Result{Code: Accepted}, res)
	archived := true
	require.NoError(t, s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: b.tenant.CommunityID, ID: ch,
		Actor: owner.PubKey, Archived: &archived}))
	refusedNotStored("invalid: channel is archived")
	require.Equal(t, [3]float64{5, 3, 2}, checks())

	// A change that is not one statement (a thread reply) reads the
	// channel's state before its transaction, as without the cache.
	archived = false
	require.NoError(t, s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: b.tenant.CommunityID, ID: ch,
		Actor: owner.PubKey, Archived: &archived}))
	root, res := post()
	require.Equal(t, Result{Code: Accepted}, res)
	require.NoError(t, s.ChannelMemberRemove(ctx, b.tenant.CommunityID, ch, mem.PubKey, owner.PubKey))
	before := checks()
	ev, res := post(reply(root.ID))
	require.Equal(t, Result{Code: Rejected, Message: wire.MsgNotChannelMember}, res)
	require.False(t, stored(ev))
	require.Equal(t, [3]float64{before[0] + 1, before[1], before[2]}, checks(), "read, not left to the write")

	// A removal this process commits forgets the pass at once.
	require.NoError(t, s.ChannelMemberUpsert(ctx, b.tenant.CommunityID, ch, mem.PubKey, "member", owner.PubKey))
	_, res = post()
	require.Equal(t, Result{Code: Accepted}, res)
	b.mustSubmit(t, owner, owner.Signed(t, event.KindRemoveUser, eventtest.Channel(ch), eventtest.Tag("p", mem.PubKey)))
	before = checks()
	refusedNotStored(wire.MsgNotChannelMember)
	require.Equal(t, [3]float64{before[0] + 1, before[1], before[2]}, checks())
}
