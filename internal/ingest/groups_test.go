package ingest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestGroupFamily(t *testing.T) {
	t.Parallel()
	state := []int{event.KindGroupMetadata, event.KindGroupAdmins, event.KindGroupMembers}
	// open makes a channel owned by a fresh key and returns both.
	open := func(t *testing.T, b *testBundle, opts ...eventtest.Option) (eventtest.Key, string) {
		owner := eventtest.NewKey()
		return owner, b.channel(t, owner, opts...)
	}
	channelOf := func(ev event.Event) string { return ev.Tags.First("h").Value() }
	runFamily(t, "group", []familyCase{
		{name: "Create", want: accepted(), build: by(event.KindCreateGroup, eventtest.Tag("name", " #general "), eventtest.Tag("channel_type", "forum")),
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ref, _ := b.lookup(t, ev.ID)
				ch, found, err := store.New(b.pool).ChannelLock(context.Background(), b.tenant.CommunityID, ref.Channel)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, "general", ch.Name)
				require.Equal(t, "forum", ch.Type)
				require.Equal(t, "owner", b.role(t, ref.Channel, eventtest.Key{PubKey: ev.PubKey}))
				require.Equal(t, append(state, event.KindMemberAdded), b.fanout.relayFanout(b.relay.PubKey, ref.Channel))
				for _, k := range state {
					require.Equal(t, 1, b.relayEvents(t, k, ref.Channel), "kind %d", k)
				}
				require.Equal(t, 1, b.intents(t, ref.Channel), "channel_created")
			}},
		{name: "CreateTakenID", want: Result{Code: Conflict, Message: "duplicate: channel already exists"},
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, id := eventtest.NewKey(), uuid.NewString()
				b.mustSubmit(t, k, k.Signed(t, event.KindCreateGroup, eventtest.Channel(id), eventtest.Tag("name", "a")))
				return k, k.Signed(t, event.KindCreateGroup, eventtest.Channel(id), eventtest.Tag("name", "b"))
			}},
		{name: "CreateWithoutName", want: refused("invalid: channel name is required"), build: by(event.KindCreateGroup, eventtest.Tag("name", " # "))},
		{name: "CreateBadVisibility", want: refused("invalid visibility: secret"),
			build: by(event.KindCreateGroup, eventtest.Tag("name", "x"), eventtest.Tag("visibility", "secret"))},
		{name: "PutUser", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				return owner, owner.Signed(t, event.KindPutUser, eventtest.Channel(ch), eventtest.Tag("p", eventtest.NewKey().PubKey), eventtest.Tag("role", "bot"))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ch := channelOf(ev)
				require.Equal(t, "bot", b.role(t, ch, eventtest.Key{PubKey: ev.Tags.First("p").Value()}))
				require.Equal(t, 2, b.relayEvents(t, event.KindMemberAdded, ch), "the creator's and the new member's 44100")
				require.Equal(t, 1, b.relayEvents(t, event.KindGroupMembers, ch), "one live 39002")
			}},
		{name: "PutUserAgainstPolicy", want: refused("invalid: policy:nobody — this agent has disabled external channel additions"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				agent := eventtest.NewKey()
				b.mustSubmit(t, agent, agent.Signed(t, event.KindAgentProfile, eventtest.Content(`{"channel_add_policy":"nobody"}`)))
				return owner, owner.Signed(t, event.KindPutUser, eventtest.Channel(ch), eventtest.Tag("p", agent.PubKey))
			}},
		{name: "JoinOpen", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				_, ch := open(t, b)
				k := eventtest.NewKey()
				return k, k.Signed(t, event.KindJoinRequest, eventtest.Channel(ch))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.Equal(t, "member", b.role(t, channelOf(ev), eventtest.Key{PubKey: ev.PubKey}))
			}},
		{name: "JoinPrivate", want: refused("restricted: channel is private"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				_, ch := open(t, b, eventtest.Tag("visibility", "private"))
				k := eventtest.NewKey()
				return k, k.Signed(t, event.KindJoinRequest, eventtest.Channel(ch))
			}},
		{name: "JoinWithoutH", want: refused("invalid: join request must include an h tag"), build: by(event.KindJoinRequest)},
		{name: "RemoveUser", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				member := eventtest.NewKey()
				b.join(t, member, ch)
				return owner, owner.Signed(t, event.KindRemoveUser, eventtest.Channel(ch), eventtest.Tag("p", member.PubKey))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ch, member := channelOf(ev), ev.Tags.First("p").Value()
				require.Empty(t, b.role(t, ch, eventtest.Key{PubKey: member}))
				require.Equal(t, 1, b.relayEvents(t, event.KindMemberRemoved, ch))
				require.Equal(t, []string{member}, b.evictions(ch), "the removed member's subscriptions end after the answer")
			}},
		{name: "RemoveByMember", want: refused("invalid: actor not authorized"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				member := eventtest.NewKey()
				b.join(t, member, ch)
				return member, member.Signed(t, event.KindRemoveUser, eventtest.Channel(ch), eventtest.Tag("p", owner.PubKey))
			}},
		{name: "LastOwnerLeaves", want: refused("invalid: cannot remove the last owner"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				return owner, owner.Signed(t, event.KindLeaveRequest, eventtest.Channel(ch))
			}},
		{name: "EditByMember", want: refused("invalid: actor not authorized for name/about/archived/visibility/ttl changes"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				_, ch := open(t, b)
				member := eventtest.NewKey()
				b.join(t, member, ch)
				return member, member.Signed(t, event.KindEditMetadata, eventtest.Channel(ch), eventtest.Tag("name", "mine"))
			}},
		{name: "EditToPrivate", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				return owner, owner.Signed(t, event.KindEditMetadata, eventtest.Channel(ch), eventtest.Tag("visibility", "private"), eventtest.Tag("topic", "t"))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ch := channelOf(ev)
				st, err := store.New(b.pool).ChannelStateGet(context.Background(), b.tenant.CommunityID, ch, ev.PubKey)
				require.NoError(t, err)
				require.False(t, st.Open)
				require.Equal(t, []string{"non-members"}, b.evictions(ch))
				require.Equal(t, 1, b.relayEvents(t, event.KindGroupMetadata, ch), "the 39000 is replaced, not added")
			}},
		{name: "AdminDelete", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				member := eventtest.NewKey()
				b.join(t, member, ch)
				msg := b.mustSubmit(t, member, member.Signed(t, event.KindStreamMessage, eventtest.Channel(ch)))
				return owner, owner.Signed(t, event.KindDeleteEvent, eventtest.Channel(ch), eventtest.Tag("e", msg.ID))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				require.False(t, b.live(t, ev.Tags.First("e").Value()))
			}},
		{name: "AdminDeleteByOther", want: refused("invalid: must be event author or channel owner/admin"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				member := eventtest.NewKey()
				b.join(t, member, ch)
				msg := b.mustSubmit(t, owner, owner.Signed(t, event.KindStreamMessage, eventtest.Channel(ch)))
				t.Cleanup(func() { require.True(t, b.live(t, msg.ID)) })
				return member, member.Signed(t, event.KindDeleteEvent, eventtest.Channel(ch), eventtest.Tag("e", msg.ID))
			}},
		{name: "DeleteGroup", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				return owner, owner.Signed(t, event.KindDeleteGroup, eventtest.Channel(ch))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ch := channelOf(ev)
				st, err := store.New(b.pool).ChannelStateGet(context.Background(), b.tenant.CommunityID, ch, ev.PubKey)
				require.NoError(t, err)
				require.True(t, st.Deleted)
				require.Zero(t, b.relayEvents(t, event.KindGroupMetadata, ch))
				require.Equal(t, []string{"*"}, b.evictions(ch))
			}},
		{name: "DeleteGroupByAdmin", want: refused("invalid: only owner can delete group"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				owner, ch := open(t, b)
				admin := eventtest.NewKey()
				b.mustSubmit(t, owner, owner.Signed(t, event.KindPutUser, eventtest.Channel(ch), eventtest.Tag("p", admin.PubKey), eventtest.Tag("role", "admin")))
				return admin, admin.Signed(t, event.KindDeleteGroup, eventtest.Channel(ch))
			}},
	})
}
