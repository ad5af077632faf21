package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

func TestNIP98Replay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	cid, other := b.community(t), b.community(t)
	id := eventtest.NewKey().Signed(t, 27235).ID

	fresh, err := b.s.NIP98Use(ctx, cid, id)
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = b.s.NIP98Use(ctx, cid, id)
	require.NoError(t, err)
	require.False(t, fresh, "a replay")
	fresh, err = b.s.NIP98Use(ctx, other, id)
	require.NoError(t, err)
	require.True(t, fresh, "ids are single-use per community")
	_, err = b.s.NIP98Use(ctx, cid, "not hex")
	require.Error(t, err)

	old := eventtest.NewKey().Signed(t, 27235).ID
	_, err = b.s.NIP98Use(ctx, cid, old)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE nip98_replay SET seen_at = now() - interval '181 seconds' WHERE event_id = $1`, unhex(t, old))
	require.NoError(t, err)

	n, err := b.s.NIP98Purge(ctx, 180*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the row older than maxAge")
	fresh, err = b.s.NIP98Use(ctx, cid, old)
	require.NoError(t, err)
	require.True(t, fresh, "a purged id is accepted again")
	fresh, err = b.s.NIP98Use(ctx, cid, id)
	require.NoError(t, err)
	require.False(t, fresh, "a recent id survives the purge")
}
