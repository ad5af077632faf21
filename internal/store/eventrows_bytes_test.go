package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestEventRowsMaxBytes: with MaxBytes the read stops after the row whose
// JSON takes the total over it, newest first, and returns that row so the
// caller sees where its budget ran out; at exactly the total nothing is
// cut.
func TestEventRowsMaxBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	var want []event.Event // newest first
	for i := range 5 {
		want = append(want, fixture.Event(t, b.tx, b.a, key, 1, eventtest.At(int64(1_700_000_100-i)), eventtest.Content("same size")))
	}
	size := want[0].JSONSize()
	read := func(maxBytes int) []string {
		rows, err := b.s.EventRows(ctx, store.EventQueryParams{CommunityID: b.a, Filter: &event.Filter{}, Limit: 100, MaxBytes: maxBytes})
		require.NoError(t, err)
		ids := make([]string, len(rows))
		for i := range rows {
			require.Len(t, rows[i].JSON, size)
			ids[i] = rows[i].Event.ID
		}
		return ids
	}
	all := []string{want[0].ID, want[1].ID, want[2].ID, want[3].ID, want[4].ID}
	require.Equal(t, all, read(0), "no cap")
	require.Equal(t, all, read(5*size), "exactly the total")
	require.Equal(t, all[:3], read(2*size), "the row past the cap is the last")
	require.Equal(t, all[:3], read(2*size+1))
	require.Equal(t, all[:2], read(2*size-1))
	require.Equal(t, all[:1], read(1))
}
