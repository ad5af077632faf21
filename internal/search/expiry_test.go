package search

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A search never returns an event whose NIP-40 expiration has passed
// (docs/PROTOCOL.md §6.6), through the day keys (FullText), the plain
// statement (Prefix) and hydration, while the row is still stored.
func TestSearchSkipsExpired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.insert(t,
		row{kind: 9, content: "zebra kept"},
		row{kind: 9, content: "zebra expired", at: baseTime + 1},
		row{kind: 9, content: "zebra later", at: baseTime + 2})
	_, err := b.pool.Exec(ctx, `UPDATE events SET expires_at = now() - interval '1 second' WHERE id = $1`, hexID(t, ids[1]))
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE events SET expires_at = now() + interval '1 hour' WHERE id = $1`, hexID(t, ids[2]))
	require.NoError(t, err)
	want := []string{ids[2], ids[0]}
	require.Equal(t, want, b.search(t, Query{Text: "zebra", Scope: Any()}))
	b.tr.mu.Lock()
	dayKeys := slices.ContainsFunc(b.tr.sql, func(s string) bool { return strings.Contains(s, "FROM search_day_matches(") })
	b.tr.mu.Unlock()
	require.True(t, dayKeys, "the FullText search read the day keys")
	require.Equal(t, want, b.search(t, Query{Text: "zeb", Mode: Prefix, Scope: Any()}))

	hits := make([]Hit, len(ids))
	for i, id := range ids {
		copy(hits[i].ID[:], hexID(t, id))
		hits[i].CreatedAt = baseTime + int64(i)
	}
	got, err := b.s.Hydrate(ctx, b.community, hits)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.NotContains(t, got, ids[1])
	live, err := b.s.LiveIDs(ctx, b.community, [][]byte{hexID(t, ids[0]), hexID(t, ids[1])})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{ids[0]: true}, live)
}
