package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestChannelStateGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	owner, member, removed, stranger := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	open := fixture.Channel(t, b.tx, b.a, owner, fixture.Members(member))
	priv := fixture.Channel(t, b.tx, b.a, owner, fixture.Private(), fixture.Members(member, removed))
	require.NoError(t, b.s.ChannelMemberRemove(ctx, b.a, priv, removed.PubKey, owner.PubKey))
	archived := fixture.Channel(t, b.tx, b.a, owner, fixture.Archived())
	deleted := fixture.Channel(t, b.tx, b.a, owner, fixture.Private(), fixture.Deleted(), fixture.Members(member))

	for _, tc := range []struct {
		name            string
		community, ch   string
		key             eventtest.Key
		want            store.ChannelState
		active, canPost bool
	}{
		{"OpenOwner", b.a, open, owner, store.ChannelState{Exists: true, Open: true, Role: "owner"}, true, true},
		{"OpenStranger", b.a, open, stranger, store.ChannelState{Exists: true, Open: true}, false, true},
		{"PrivateMember", b.a, priv, member, store.ChannelState{Exists: true, Role: "member"}, true, true},
		{"PrivateRemoved", b.a, priv, removed, store.ChannelState{Exists: true}, false, false},
		{"PrivateStranger", b.a, priv, stranger, store.ChannelState{Exists: true}, false, false},
		{"Archived", b.a, archived, owner, store.ChannelState{Exists: true, Open: true, Archived: true, Role: "owner"}, true, true},
		{"Deleted", b.a, deleted, member, store.ChannelState{Exists: true, Deleted: true, Role: "member"}, false, false},
		{"Missing", b.a, uuid.NewString(), owner, store.ChannelState{}, false, false},
		{"OtherCommunity", b.b, open, owner, store.ChannelState{}, false, false},
	} {
		got, err := b.s.ChannelStateGet(ctx, tc.community, tc.ch, tc.key.PubKey)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
		require.Equal(t, tc.active, got.ActiveMember(), tc.name)
		require.Equal(t, tc.canPost, got.CanPost(), tc.name)
	}
}

func TestAccessibleChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	q := b.pool
	cid, other := b.community(t), b.community(t)
	owner, member, removed := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	open := fixture.Channel(t, q, cid, owner)
	priv := fixture.Channel(t, q, cid, owner, fixture.Private(), fixture.Members(member, removed))
	require.NoError(t, store.New(q).ChannelMemberRemove(ctx, cid, priv, removed.PubKey, owner.PubKey))
	archivedPriv := fixture.Channel(t, q, cid, owner, fixture.Private(), fixture.Archived(), fixture.Members(member))
	fixture.Channel(t, q, cid, owner, fixture.Deleted())
	deletedPriv := fixture.Channel(t, q, cid, owner, fixture.Private(), fixture.Deleted(), fixture.Members(member))
	otherOpen := fixture.Channel(t, q, other, owner)
	fixture.Channel(t, q, other, owner, fixture.Private(), fixture.Members(member))

	for _, tc := range []struct {
		name string
		key  eventtest.Key
		want []string
	}{
		{"Owner", owner, []string{open, priv, archivedPriv}},
		{"Member", member, []string{open, priv, archivedPriv}},
		{"Removed", removed, []string{open}},
		{"Stranger", eventtest.NewKey(), []string{open}},
	} {
		got, err := b.s.AccessibleChannels(ctx, cid, tc.key.PubKey)
		require.NoError(t, err, tc.name)
		require.ElementsMatch(t, tc.want, got, tc.name)
	}
	got, err := b.s.AccessibleChannels(ctx, other, member.PubKey)
	require.NoError(t, err)
	require.Len(t, got, 2, "only community other's channels")
	require.Contains(t, got, otherOpen)

	t.Run("Confirm", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name      string
			key       eventtest.Key
			requested []string
			want      []string
		}{
			{"MemberGetsItsChannels", member, []string{open, priv, archivedPriv, deletedPriv}, []string{open, priv, archivedPriv}},
			{"StrangerGetsOpenOnly", removed, []string{open, priv}, []string{open}},
			{"OtherCommunityChannelRefused", member, []string{otherOpen}, []string{}},
			{"MalformedIgnored", member, []string{"general", "", open[:35], "AAAAAAAA-AAAA-AAAA-AAAA-AAAAAAAAAAAA"}, nil},
			{"Nothing", member, nil, nil},
		} {
			got, err := b.s.ChannelsAccessible(ctx, cid, tc.key.PubKey, tc.requested)
			require.NoError(t, err, tc.name)
			if tc.want == nil {
				require.Nil(t, got, "%s: no statement for nothing valid", tc.name)
				continue
			}
			require.ElementsMatch(t, tc.want, got, tc.name)
		}
	})
}
