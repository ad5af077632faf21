package search

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

// Hydrate returns the live events of a page's hits by their full key, in
// the hits' community only: a deleted row, a hit whose time is not the
// row's, and another community's row are left out. Hits span two monthly
// partitions, so the lookup prunes per key. The statement is
// search_hydrate (migration 0013), whose one cached plan is the generic
// one (docs/PERFORMANCE.md "Search hydration planned once").
func TestHydrate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ch := randUUID(t, b.pool)
	older := time.Now().AddDate(0, -1, 0).Unix()
	ids := b.insert(t,
		row{kind: 9, content: "in a channel", channel: ch, tags: `[["h","` + ch + `"],["p","ab"]]`},
		row{kind: 1, content: "a month older", at: older},
		row{kind: 9, content: "deleted", at: baseTime + 1},
		row{kind: 9, content: "wrong time", at: baseTime + 2})
	_, err := b.pool.Exec(ctx, `UPDATE events SET deleted_at = now() WHERE id = $1`, hexID(t, ids[2]))
	require.NoError(t, err)
	other := insertRows(t, b.pool, b.newCommunity(t), row{kind: 9, content: "another community", at: baseTime + 3})

	// The hits' times: each row's own, but the fourth's is not its row's.
	keys := append(slices.Clone(ids), other...)
	at := []int64{baseTime, older, baseTime + 1, baseTime + 99, baseTime + 3}
	hits := make([]Hit, len(keys))
	for i, id := range keys {
		copy(hits[i].ID[:], hexID(t, id))
		hits[i].CreatedAt = at[i]
	}
	got, err := b.s.Hydrate(ctx, b.community, hits)
	require.NoError(t, err)
	require.Len(t, got, 2, "only the two live rows of the community, at their own times")
	first := got[ids[0]]
	require.Equal(t, "in a channel", first.Event.Content)
	require.Equal(t, 9, first.Event.Kind)
	require.Equal(t, baseTime, first.Event.CreatedAt)
	require.Equal(t, ch, first.Channel)
	require.Equal(t, `[["h","`+ch+`"],["p","ab"]]`, string(event.AppendTags(nil, first.Event.Tags)))
	require.Equal(t, ids[0], first.Event.ID)
	second := got[ids[1]]
	require.Equal(t, "a month older", second.Event.Content)
	require.Equal(t, "", second.Channel)

	b.tr.mu.Lock()
	viaFunction := slices.ContainsFunc(b.tr.sql, func(s string) bool { return strings.Contains(s, "search_hydrate(") })
	b.tr.mu.Unlock()
	require.True(t, viaFunction, "Hydrate reads through search_hydrate")
	var config []string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT proconfig FROM pg_proc WHERE proname = 'search_hydrate'`).Scan(&config))
	require.Equal(t, []string{"plan_cache_mode=force_generic_plan"}, config)
}
