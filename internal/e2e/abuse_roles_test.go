package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// TestAbuseOpenChannelTakeover is the owner takeover of an open channel:
// a fresh key adds itself (or a friend) to an open channel as owner or
// admin, then deletes the channel. Granting an elevated role needs an
// elevated actor in open channels too, so every step is refused with its
// prefixed reason, the channel and its roster are untouched, and its
// members keep posting and reading.
func TestAbuseOpenChannelTakeover(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)
	owner, member, attacker, friend := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	wo := e.dial(t, owner)
	ch := chCreate(t, wo, owner)
	wm := e.dial(t, member)
	wm.MustPublish(chPutEv(t, member, ch, member.PubKey, ""))
	roster := map[string]string{owner.PubKey: "owner", member.PubKey: "member"}
	require.Equal(t, roster, e.chActive(t, ch))

	wa := e.dial(t, attacker)
	for _, add := range []struct{ target, role string }{
		{attacker.PubKey, "owner"},
		{attacker.PubKey, "admin"},
		{friend.PubKey, "owner"},
		{friend.PubKey, "admin"},
	} {
		chRefused(t, wa, chPutEv(t, attacker, ch, add.target, add.role), "invalid: only owners/admins may grant elevated roles")
	}
	// An ordinary member of the channel may not grant one either.
	chRefused(t, wm, chPutEv(t, member, ch, friend.PubKey, "owner"), "invalid: only owners/admins may grant elevated roles")
	chRefused(t, wm, chPutEv(t, member, ch, member.PubKey, "admin"), "invalid: only owners/admins may grant elevated roles")
	chRefused(t, wa, attacker.Signed(t, 9008, chNonce(), eventtest.Channel(ch)), "invalid: only owner can delete group")
	require.Equal(t, roster, e.chActive(t, ch), "no refused command changed the roster")

	// A self-add without a role makes a member, who still cannot delete.
	wa.MustPublish(chPutEv(t, attacker, ch, attacker.PubKey, ""))
	roster[attacker.PubKey] = "member"
	require.Equal(t, roster, e.chActive(t, ch))
	chRefused(t, wa, attacker.Signed(t, 9008, chNonce(), eventtest.Channel(ch)), "invalid: only owner can delete group")

	// The channel keeps working for its members, and its owner still grants.
	msg := chMsg(t, member, ch, "still here")
	wm.MustPublish(msg)
	evs, closed, eose := wm.Req("h", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
	require.True(t, eose, closed)
	require.Equal(t, []string{msg.ID}, ids(evs))
	wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, "admin"))
	roster[member.PubKey] = "admin"
	require.Equal(t, roster, e.chActive(t, ch))
	wm.MustPublish(chPutEv(t, member, ch, friend.PubKey, "admin"))
	roster[friend.PubKey] = "admin"
	require.Equal(t, roster, e.chActive(t, ch))
}
