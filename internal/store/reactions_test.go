package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestReactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	author, reactor := eventtest.NewKey(), eventtest.NewKey()
	target := fixture.Event(t, b.tx, b.a, author, 1)
	active := func(cid string) int {
		return count(t, b.tx, `SELECT count(*) FROM reactions WHERE community_id = $1 AND removed_at IS NULL`, cid)
	}
	add := func(cid, emoji, reactionID string) bool {
		fresh, err := b.s.ReactionAdd(ctx, store.ReactionAddParams{CommunityID: cid, Target: target.ID,
			TargetCreatedAt: target.CreatedAt, Pubkey: reactor.PubKey, Emoji: emoji, ReactionEventID: reactionID})
		require.NoError(t, err)
		return fresh
	}
	r1, r2, r3, r4 := reactor.Signed(t, 7).ID, reactor.Signed(t, 7, eventtest.Content("x")).ID,
		reactor.Signed(t, 7, eventtest.Content("y")).ID, reactor.Signed(t, 7, eventtest.Content("z")).ID

	require.True(t, add(b.a, "+", r1))
	require.False(t, add(b.a, "+", r2), "the same (target, reactor, emoji) is already active")
	require.True(t, add(b.a, "🔥", r3), "another emoji is another row")
	require.Equal(t, 2, active(b.a))
	require.Zero(t, active(b.b))

	require.NoError(t, b.s.ReactionRemove(ctx, b.b, r1))
	require.Equal(t, 2, active(b.a), "a removal through community b changes nothing in a")
	require.NoError(t, b.s.ReactionRemove(ctx, b.a, r1))
	require.Equal(t, 1, active(b.a))

	require.True(t, add(b.a, "+", r4), "a later identical reaction reactivates the row")
	var backing []byte
	require.NoError(t, b.tx.QueryRow(ctx, `SELECT reaction_event_id FROM reactions WHERE community_id = $1 AND emoji = '+'`, b.a).Scan(&backing))
	require.Equal(t, unhex(t, r4), backing)
	// One kind 7 event backs one active row. The unique violation is
	// answered "not fresh", but it still aborts the statement's
	// transaction, so it runs in a savepoint here.
	sp, err := b.tx.Begin(ctx)
	require.NoError(t, err)
	fresh, err := store.New(sp).ReactionAdd(ctx, store.ReactionAddParams{CommunityID: b.a, Target: target.ID,
		TargetCreatedAt: target.CreatedAt, Pubkey: reactor.PubKey, Emoji: "👍", ReactionEventID: r4})
	require.NoError(t, err)
	require.False(t, fresh)
	require.NoError(t, sp.Rollback(ctx))
	require.True(t, add(b.b, "+", r1), "community b keeps its own rows")
}
