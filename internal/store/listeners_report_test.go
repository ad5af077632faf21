package store_test

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func int64p(v int64) *int64 { return &v }

// ageRegistration moves the registration (listener, target) to
// now() - interval ago.
func ageRegistration(t *testing.T, q pg.Querier, listener, target, ago string) {
	t.Helper()
	tag, err := q.Exec(context.Background(), `UPDATE operator_listener_pubkeys SET created_at = now() - $3::interval
		WHERE listener_pubkey = $1 AND target_pubkey = $2`, unhex(t, listener), unhex(t, target), ago)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
}

// docs/PROTOCOL.md §15.10: the counts and ages of maintenance operator-listeners
// --report, per listener found in either table.
func TestListenerReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A database of its own: the tables are deployment-global and the
	// report reads them whole. One transaction, so now() is one instant
	// and every age is exact.
	pool, _ := dbtest.NewDB(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })

	rows, err := store.New(tx).ListenerReport(ctx)
	require.NoError(t, err)
	require.Empty(t, rows, "empty tables: no listener")

	c := fixture.Community(t, tx).ID
	both, regsOnly, outboxOnly, future := pubkey(), pubkey(), pubkey(), pubkey()

	// both: two registrations, the older 10 days and a fraction of a second
	// old, and five outbox rows in both states on both sides of the
	// 15-minute eligibility (exactly 15 minutes is still eligible).
	t1, t2 := pubkey(), pubkey()
	require.NoError(t, store.New(tx).ListenerRegister(ctx, both, []string{t1, t2}))
	ageRegistration(t, tx, both, t1, "10 days 0.9 seconds")
	ageRegistration(t, tx, both, t2, "1 hour")
	outboxInsert(t, tx, outboxSpec{listener: both, community: c, createdAgo: 60})
	outboxInsert(t, tx, outboxSpec{listener: both, community: c, createdAgo: 15 * 60})
	outboxInsert(t, tx, outboxSpec{listener: both, community: c, createdAgo: 15*60 + 1})
	outboxInsert(t, tx, outboxSpec{listener: both, community: c, state: "sending", attempts: 1, leaseIn: intp(20), createdAgo: 30})
	outboxInsert(t, tx, outboxSpec{listener: both, community: c, state: "sending", attempts: 3, leaseIn: intp(-5), createdAgo: 20 * 60})

	// regsOnly: registrations and no outbox row.
	t3 := pubkey()
	require.NoError(t, store.New(tx).ListenerRegister(ctx, regsOnly, []string{t3}))
	ageRegistration(t, tx, regsOnly, t3, "42 seconds")

	// outboxOnly: rows left after its registrations were removed, one of
	// them for a community that no longer exists.
	outboxInsert(t, tx, outboxSpec{listener: outboxOnly, community: c, createdAgo: 5})
	outboxInsert(t, tx, outboxSpec{listener: outboxOnly, community: "5b0e6a38-8a1c-4a57-9d3e-7c1f1c5f2d10", createdAgo: 16 * 60})

	// future: a registration stamped ahead of the clock is 0 s old.
	t4 := pubkey()
	require.NoError(t, store.New(tx).ListenerRegister(ctx, future, []string{t4}))
	ageRegistration(t, tx, future, t4, "-5 seconds")

	want := []store.ListenerReportRow{
		{Listener: both, Registrations: 2, OldestRegistrationAgeSeconds: int64p(10 * 86400),
			OutboxPending: 3, OutboxSending: 2, OldestOutboxAgeSeconds: int64p(20 * 60), OutboxPastEligibility: 2},
		{Listener: regsOnly, Registrations: 1, OldestRegistrationAgeSeconds: int64p(42)},
		{Listener: outboxOnly, OutboxPending: 2, OldestOutboxAgeSeconds: int64p(16 * 60), OutboxPastEligibility: 1},
		{Listener: future, Registrations: 1, OldestRegistrationAgeSeconds: int64p(0)},
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Listener < want[j].Listener })

	rows, err = store.New(tx).ListenerReport(ctx)
	require.NoError(t, err)
	require.Equal(t, want, rows, "one row per listener of either table, by pubkey")

	// Forgetting a listener removes it from the report; the others stay.
	_, _, err = store.New(tx).ListenerForget(ctx, outboxOnly)
	require.NoError(t, err)
	rows, err = store.New(tx).ListenerReport(ctx)
	require.NoError(t, err)
	var left []string
	for _, r := range rows {
		left = append(left, r.Listener)
	}
	require.Len(t, left, 3)
	require.NotContains(t, left, outboxOnly)
}
