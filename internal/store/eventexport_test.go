package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestEventExport: the export reads the community's rows in commit order
// (not created_at order) in batches, soft-deleted rows included and
// counted, expired rows and other communities' rows never.
func TestEventExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	a, other := fixture.Community(t, b.pool).ID, fixture.Community(t, b.pool).ID
	key := eventtest.NewKey()
	// One statement each, so each has its own transaction and received_at;
	// each is older than the one before, so created_at order is reversed.
	var want []event.Event
	for i := range 5 {
		want = append(want, fixture.Event(t, b.pool, a, key, 1, eventtest.At(1_700_000_000-int64(i)*60),
			eventtest.Content("m"+strconv.Itoa(i))))
	}
	fixture.Event(t, b.pool, a, key, 1, eventtest.Tag("expiration", strconv.FormatInt(time.Now().Unix()-1, 10)))
	fixture.Event(t, b.pool, other, key, 1)
	changed, err := b.s.EventSoftDelete(ctx, a, want[2].ID, want[2].CreatedAt)
	require.NoError(t, err)
	require.True(t, changed)

	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	s := store.New(tx)
	counts, err := s.EventExportCount(ctx, a)
	require.NoError(t, err)
	require.Equal(t, store.EventExportCounts{Events: 5, Deleted: 1}, counts)

	var got []string
	var batches []int
	require.NoError(t, s.EventExport(ctx, a, 2, func(rows []store.EventRow) error {
		batches = append(batches, len(rows))
		for _, r := range rows {
			got = append(got, string(r.JSON))
		}
		return nil
	}))
	require.Equal(t, []int{2, 2, 1}, batches)
	require.Len(t, got, len(want))
	for i, ev := range want {
		require.Equal(t, string(ev.AppendJSON(nil)), got[i], "row %d in commit order, as signed", i)
	}

	// The cursor was closed: a second export in the same transaction works.
	n := 0
	require.NoError(t, s.EventExport(ctx, a, 10, func(rows []store.EventRow) error { n += len(rows); return nil }))
	require.Equal(t, 5, n)
	require.Error(t, s.EventExport(ctx, a, 0, nil))
}
