package store_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestEventRecords: a negentropy set's records are the rows EventQuery
// returns (created_at and raw id), up to the limit; with tags they carry
// what the post-filter reads and neither content nor signature; an error
// from the callback stops the read.
func TestEventRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	w := newQueryWorld(t, b)
	p := store.EventQueryParams{CommunityID: w.cid, Reader: w.alice.PubKey, Filter: &event.Filter{Kinds: []int{1}},
		Channels: []string{w.open}, Limit: 100}
	full, err := b.s.EventQuery(ctx, p)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(full), 2)
	byID := map[string]store.StoredEvent{}
	for _, se := range full {
		byID[se.Event.ID] = se
	}
	for _, withTags := range []bool{false, true} {
		got := map[string]int64{}
		require.NoError(t, b.s.EventRecords(ctx, p, withTags, func(rec *store.EventRecord) error {
			id := hex.EncodeToString(rec.ID[:])
			got[id] = rec.CreatedAt
			if !withTags {
				require.Nil(t, rec.Stored)
				return nil
			}
			want := byID[id]
			se := rec.Stored
			require.Equal(t, id, se.Event.ID)
			require.Empty(t, se.Event.Content)
			require.Empty(t, se.Event.Sig)
			require.Equal(t, want.Event.PubKey, se.Event.PubKey)
			require.Equal(t, want.Event.Kind, se.Event.Kind)
			require.Equal(t, want.Event.Tags, se.Event.Tags)
			require.Equal(t, want.Channel, se.Channel)
			return nil
		}))
		require.Len(t, got, len(full), "with tags %v", withTags)
		for id, ts := range got {
			require.Equal(t, byID[id].Event.CreatedAt, ts)
		}
	}
	p.Limit = len(full) - 1
	n := 0
	require.NoError(t, b.s.EventRecords(ctx, p, false, func(*store.EventRecord) error { n++; return nil }))
	require.Equal(t, len(full)-1, n, "the limit")
	stop := errors.New("stop")
	n = 0
	err = b.s.EventRecords(ctx, p, false, func(*store.EventRecord) error { n++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n)
}
