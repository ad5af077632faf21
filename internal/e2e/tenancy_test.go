package e2e

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestTenancy is checks 10, 11 and 13: the community comes from the Host
// header alone, aliases share their community, and loopback spellings reach
// the deployment community.
func TestTenancy(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	hostA, hostB := r.Community(t, "a.test"), r.Community(t, "b.test")
	alias := "alias.test:" + strconv.Itoa(r.Port)
	_, err := r.App.Store().CommunityAddHost(context.Background(), alias, hostA)
	require.NoError(t, err)

	dial := func(t *testing.T, host string, key eventtest.Key) *relaytest.WS {
		t.Helper()
		w := r.Dial(t, host)
		w.Auth(key)
		return w
	}

	t.Run("InvisibleAcrossCommunities", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		// Bob's live subscription on B exists before Alice publishes on A.
		sub := dial(t, hostB, bob)
		evs, closed, eose := sub.Req("live", map[string]any{"kinds": []int{1}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		wA := dial(t, hostA, alice)
		onA := alice.Signed(t, 1, eventtest.Content("only for A"))
		wA.MustPublish(onA)

		wB := dial(t, hostB, alice)
		evs, closed, eose = wB.Req("ids", map[string]any{"ids": []string{onA.ID}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		evs, closed, eose = wB.Req("authors", map[string]any{"authors": []string{alice.PubKey}, "kinds": []int{1}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		require.Empty(t, query(t, r, hostB, alice, `[{"ids":["`+onA.ID+`"]},{"authors":["`+alice.PubKey+`"],"kinds":[1]}]`))

		// A marker published on B after the OK of A's event: the subscription
		// on B receives the marker and nothing before it.
		marker := bob.Signed(t, 1, eventtest.Content("marker on B"))
		dial(t, hostB, bob).MustPublish(marker)
		msg := sub.Next()
		require.Equal(t, "EVENT", msg[0], msg)
		require.Equal(t, "live", msg[1], msg)
		require.Equal(t, marker.ID, msg[2].(map[string]any)["id"], "the subscription on B must not see A's event")

		// A still reads it, and the very same event is new to B.
		evs, closed, eose = dial(t, hostA, bob).Req("a", map[string]any{"ids": []string{onA.ID}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{onA}, evs)
		wB.MustPublish(onA)
		require.Equal(t, []string{onA.ID}, query(t, r, hostB, alice, `[{"ids":["`+onA.ID+`"]}]`))
		require.Equal(t, 2, countRows(t, r, `SELECT count(*) FROM events WHERE id = $1`, idBytes(t, onA.ID)))
	})
	t.Run("AuthForAnotherCommunityFails", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, hostB)
		ev := alice.Signed(t, event.KindAuth, eventtest.Content(""),
			eventtest.Tag("challenge", w.Challenge), eventtest.Tag("relay", "ws://"+hostA))
		w.Send("AUTH", ev)
		require.Equal(t, []any{"OK", ev.ID, false, "auth-required: verification failed"}, w.Next())
	})
	t.Run("AliasReadsPrimary", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		onA := alice.Signed(t, 1, eventtest.Content("read me through the alias"))
		dial(t, hostA, alice).MustPublish(onA)

		w := dial(t, alias, bob) // Auth signs relay ws://alias.test:<port>
		evs, closed, eose := w.Req("a", map[string]any{"ids": []string{onA.ID}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{onA}, evs)
		require.Equal(t, []string{onA.ID}, query(t, r, alias, bob, `[{"ids":["`+onA.ID+`"]}]`))

		// Writes through the alias land in A.
		viaAlias := bob.Signed(t, 1, eventtest.Content("written through the alias"))
		w.MustPublish(viaAlias)
		require.True(t, eventRow(t, r, communityID(t, r, hostA), viaAlias.ID).live)

		// The AUTH relay tag must name the alias, not the primary host.
		primary := r.Dial(t, alias)
		ev := bob.Signed(t, event.KindAuth, eventtest.Content(""),
			eventtest.Tag("challenge", primary.Challenge), eventtest.Tag("relay", "ws://"+hostA))
		primary.Send("AUTH", ev)
		require.Equal(t, []any{"OK", ev.ID, false, "auth-required: verification failed"}, primary.Next())
	})
	t.Run("LoopbackAddressIsDeploymentCommunity", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		loopback := "127.0.0.1:" + strconv.Itoa(r.Port)
		w := dial(t, loopback, alice) // Auth signs relay ws://127.0.0.1:<port>
		ev := alice.Signed(t, 1, eventtest.Content("from loopback"))
		w.MustPublish(ev)
		evs, closed, eose := w.Req("l", map[string]any{"ids": []string{ev.ID}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{ev}, evs)
		require.Equal(t, "localhost:"+strconv.Itoa(r.Port), r.Host)
		require.True(t, eventRow(t, r, communityID(t, r, r.Host), ev.ID).live)
		evs, closed, eose = dial(t, "", alice).Req("d", map[string]any{"ids": []string{ev.ID}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{ev}, evs)
		require.Equal(t, []string{ev.ID}, query(t, r, loopback, alice, `[{"ids":["`+ev.ID+`"]}]`))
	})
}
