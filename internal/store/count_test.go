package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestEventCountCandidates: the COUNT fallback's candidates are the rows
// EventQuery returns, up to the limit, with everything the post-filter
// reads and neither content nor signature.
func TestEventCountCandidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	w := newQueryWorld(t, b)
	p := store.EventQueryParams{CommunityID: w.cid, Reader: w.alice.PubKey, Filter: &event.Filter{Kinds: []int{1}},
		Channels: []string{w.open}, Limit: 100}
	full, err := b.s.EventQuery(ctx, p)
	require.NoError(t, err)
	got, err := b.s.EventCountCandidates(ctx, p)
	require.NoError(t, err)
	require.ElementsMatch(t, ids(full), ids(got))
	byID := map[string]store.StoredEvent{}
	for _, se := range full {
		byID[se.Event.ID] = se
	}
	for _, se := range got {
		want := byID[se.Event.ID]
		require.Empty(t, se.Event.Content)
		require.Empty(t, se.Event.Sig)
		require.Equal(t, want.Event.PubKey, se.Event.PubKey)
		require.Equal(t, want.Event.CreatedAt, se.Event.CreatedAt)
		require.Equal(t, want.Event.Kind, se.Event.Kind)
		require.Equal(t, want.Event.Tags, se.Event.Tags)
		require.Equal(t, want.Channel, se.Channel)
	}

	t.Run("AtTheLimitAndOneUnder", func(t *testing.T) {
		t.Parallel()
		n := len(full)
		require.GreaterOrEqual(t, n, 2)
		p := p
		p.Limit = n
		got, err := b.s.EventCountCandidates(ctx, p)
		require.NoError(t, err)
		require.Len(t, got, n)
		p.Limit = n - 1
		got, err = b.s.EventCountCandidates(ctx, p)
		require.NoError(t, err)
		require.Len(t, got, n-1)
	})
}
