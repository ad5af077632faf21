package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestRelayMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	alice := eventtest.NewKey()
	role := func(cid string) string {
		r, err := b.s.RelayMemberRole(ctx, cid, alice.PubKey)
		require.NoError(t, err)
		return r
	}
	require.Empty(t, role(b.a), "no row, no role")

	m, err := b.s.RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{CommunityID: b.a, Pubkey: alice.PubKey, Role: "member", AddedBy: "cli"})
	require.NoError(t, err)
	require.Equal(t, store.RelayMember{CommunityID: b.a, Pubkey: alice.PubKey, Role: "member", AddedBy: "cli", CreatedAt: m.CreatedAt}, m)
	m, err = b.s.RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{CommunityID: b.a, Pubkey: alice.PubKey, Role: "admin", AddedBy: "other"})
	require.NoError(t, err)
	require.Equal(t, "admin", m.Role)
	require.Equal(t, "cli", m.AddedBy, "a role change keeps who added the member")
	require.Equal(t, "admin", role(b.a))
	require.Empty(t, role(b.b), "no membership through community b")

	// A role outside the check fails; a savepoint keeps the test's transaction usable.
	sp, err := b.tx.Begin(ctx)
	require.NoError(t, err)
	_, err = store.New(sp).RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{CommunityID: b.a, Pubkey: alice.PubKey, Role: "boss"})
	require.Error(t, err)
	require.NoError(t, sp.Rollback(ctx))

	removed, err := b.s.RelayMemberRemove(ctx, b.b, alice.PubKey)
	require.NoError(t, err)
	require.False(t, removed, "community b has no such member")
	removed, err = b.s.RelayMemberRemove(ctx, b.a, alice.PubKey)
	require.NoError(t, err)
	require.True(t, removed)
	require.Empty(t, role(b.a))
	removed, err = b.s.RelayMemberRemove(ctx, b.a, alice.PubKey)
	require.NoError(t, err)
	require.False(t, removed)
}

func TestRelayMemberList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	cid, other := b.community(t), b.community(t)
	first, second := eventtest.NewKey(), eventtest.NewKey()
	fixture.RelayMember(t, b.pool, cid, first, "owner")
	fixture.RelayMember(t, b.pool, cid, second, "member")
	fixture.RelayMember(t, b.pool, other, eventtest.NewKey(), "member")

	list, err := b.s.RelayMemberList(ctx, cid)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []string{first.PubKey, second.PubKey}, []string{list[0].Pubkey, list[1].Pubkey}, "oldest first")
	require.Equal(t, store.RelayMember{CommunityID: cid, Pubkey: first.PubKey, Role: "owner", AddedBy: "cli", CreatedAt: list[0].CreatedAt}, list[0])

	for _, tc := range []struct {
		name      string
		community string
		key       eventtest.Key
		want      bool
	}{
		{"Member", cid, second, true}, {"Stranger", cid, eventtest.NewKey(), false}, {"OtherCommunity", other, first, false},
	} {
		ok, err := b.s.IsRelayMember(ctx, tc.community, tc.key.PubKey)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, ok, tc.name)
	}
}
