package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestCommunities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)

	t.Run("AddAndResolve", func(t *testing.T) {
		t.Parallel()
		host := fixture.Host()
		c, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: host})
		require.NoError(t, err)
		require.Regexp(t, `^[0-9a-f-]{36}$`, c.ID)
		require.Equal(t, host, c.Host)
		for _, spelled := range []string{host, strings.ToUpper(host)} {
			got, err := b.s.CommunityByHost(ctx, spelled)
			require.NoError(t, err)
			require.Equal(t, c.ID, got.ID)
			require.Equal(t, host, got.Host)
			require.True(t, c.CreatedAt.Equal(got.CreatedAt))
		}
		require.Zero(t, count(t, b.pool, `SELECT count(*) FROM relay_members WHERE community_id = $1`, c.ID))
	})

	t.Run("Get", func(t *testing.T) {
		t.Parallel()
		c, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: fixture.Host()})
		require.NoError(t, err)
		got, err := b.s.CommunityGet(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, c.Host, got.Host)
		_, err = b.s.CommunityGet(ctx, "00000000-0000-0000-0000-000000000000")
		require.ErrorIs(t, err, pg.ErrNotFound)
	})

	t.Run("UnknownHost", func(t *testing.T) {
		t.Parallel()
		_, err := b.s.CommunityByHost(ctx, fixture.Host())
		require.ErrorIs(t, err, pg.ErrNotFound)
	})

	t.Run("AddWithOwner", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey()
		c, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: fixture.Host(), Owner: owner.PubKey})
		require.NoError(t, err)
		ms, err := b.s.RelayMemberList(ctx, c.ID)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, store.RelayMember{CommunityID: c.ID, Pubkey: owner.PubKey, Role: "owner", AddedBy: "cli",
			CreatedAt: ms[0].CreatedAt}, ms[0])
	})

	t.Run("HostTaken", func(t *testing.T) {
		t.Parallel()
		host, alias := fixture.Host(), fixture.Host()
		c, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: host})
		require.NoError(t, err)
		_, err = b.s.CommunityAddHost(ctx, alias, host)
		require.NoError(t, err)
		for _, h := range []string{host, strings.ToUpper(host), alias, strings.ToUpper(alias)} {
			_, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: h, Owner: eventtest.NewKey().PubKey})
			require.ErrorIs(t, err, store.ErrHostTaken, h)
		}
		ms, err := b.s.RelayMemberList(ctx, c.ID)
		require.NoError(t, err)
		require.Empty(t, ms, "a refused add writes no owner anywhere")
	})

	t.Run("AddHost", func(t *testing.T) {
		t.Parallel()
		a, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: fixture.Host()})
		require.NoError(t, err)
		other, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: fixture.Host()})
		require.NoError(t, err)
		alias, second := fixture.Host(), fixture.Host()
		id, err := b.s.CommunityAddHost(ctx, alias, strings.ToUpper(a.Host))
		require.NoError(t, err)
		require.Equal(t, a.ID, id)
		id, err = b.s.CommunityAddHost(ctx, second, alias) // an alias is a valid target too
		require.NoError(t, err)
		require.Equal(t, a.ID, id)
		got, err := b.s.CommunityByHost(ctx, second)
		require.NoError(t, err)
		require.Equal(t, a, store.Community{ID: got.ID, Host: got.Host, CreatedAt: a.CreatedAt})

		_, err = b.s.CommunityAddHost(ctx, alias, other.Host)
		require.ErrorIs(t, err, store.ErrHostTaken, "already an alias of a")
		_, err = b.s.CommunityAddHost(ctx, other.Host, a.Host)
		require.ErrorIs(t, err, store.ErrHostTaken, "already a primary host")
		_, err = b.s.CommunityAddHost(ctx, fixture.Host(), fixture.Host())
		require.ErrorIs(t, err, pg.ErrNotFound, "unknown target")
	})

	t.Run("EnsureIsIdempotentUnderRaces", func(t *testing.T) {
		t.Parallel()
		host := fixture.Host()
		const n = 8
		got := make([]store.Community, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { got[i], errs[i] = b.s.CommunityEnsure(ctx, host) })
		}
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i])
			require.Equal(t, got[0].ID, got[i].ID)
		}
		require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM communities WHERE host = $1`, host))
	})
}

// TestCommunityList has a database of its own: it lists every community.
func TestCommunityList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	first, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: "first.test"})
	require.NoError(t, err)
	second, err := b.s.CommunityAdd(ctx, store.CommunityAddParams{Host: "second.test"})
	require.NoError(t, err)
	for _, alias := range []string{"z.first.test", "a.first.test"} {
		_, err := b.s.CommunityAddHost(ctx, alias, "first.test")
		require.NoError(t, err)
	}
	list, err := b.s.CommunityList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, first.ID, list[0].ID, "oldest first")
	require.Equal(t, []string{"a.first.test", "z.first.test"}, list[0].Aliases)
	require.Equal(t, second.ID, list[1].ID)
	require.Equal(t, []string{}, list[1].Aliases)
}

// TestCommunityAddInTx: on a Store made over a caller's transaction,
// CommunityAdd joins it (a savepoint): the community is there inside the
// transaction, and a refusal leaves the transaction usable.
func TestCommunityAddInTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	s := store.New(tx)
	host := fixture.Host()
	c, err := s.CommunityAdd(ctx, store.CommunityAddParams{Host: host})
	require.NoError(t, err)
	_, err = s.CommunityAdd(ctx, store.CommunityAddParams{Host: host})
	require.ErrorIs(t, err, store.ErrHostTaken)
	got, err := s.CommunityByHost(ctx, host)
	require.NoError(t, err, "the transaction is still usable")
	require.Equal(t, c.ID, got.ID)
}
