package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
)

// insertBatch stores evs with one store.EventInsertBatch statement, each
// with its event_created intent, and returns the intents in order.
func (b *testBundle) insertBatch(t *testing.T, cid string, evs ...event.Event) []audit.Intent {
	t.Helper()
	ps := make([]store.EventInsertParams, len(evs))
	ins := make([]audit.Intent, len(evs))
	for i := range evs {
		in := audit.NewEventCreated(cid, evs[i].PubKey, evs[i].ID, evs[i].Kind, "")
		ins[i] = in
		ps[i] = store.EventInsertParams{CommunityID: cid, Event: &evs[i], Audit: &store.OutboxIntent{DedupeKey: in.DedupeKey,
			Action: string(in.Action), Actor: in.ActorBytes(), ObjectID: in.ObjectID, Detail: in.Detail}}
	}
	res, err := store.New(b.pool).EventInsertBatch(context.Background(), ps)
	require.NoError(t, err)
	for _, r := range res {
		require.True(t, r.Inserted)
	}
	return ins
}

// The event_created intents of a batch insert wait in audit_intent_groups,
// one row per statement, and are chained in the statement's order, between
// the single intents written before and after them, each with its own
// entry and the group's time (docs/ARCHITECTURE.md "Audit chain").
func TestChainIntentGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	cid := b.community(t, "groups.test")
	other := b.community(t, "groups-other.test")
	key := eventtest.NewKey()
	signed := func(n int) []event.Event {
		out := make([]event.Event, n)
		for i := range out {
			out[i] = key.Signed(t, 1, eventtest.Content(time.Now().String()))
		}
		return out
	}

	var want []audit.Intent
	want = append(want, b.intent(t, cid, 9))
	want = append(want, b.insertBatch(t, cid, signed(3)...)...)
	want = append(want, b.intent(t, cid, 7))
	want = append(want, b.insertBatch(t, cid, signed(2)...)...)
	b.insertBatch(t, other, signed(4)...)

	pending, err := audit.PendingCount(ctx, b.pool, cid)
	require.NoError(t, err)
	require.Equal(t, int64(7), pending, "a group counts its intents")
	all, _, err := audit.OutboxStats(ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, int64(11), all)

	b.flush(t)
	rs := rows(t, b.pool, cid)
	require.Len(t, rs, len(want))
	for i, in := range want {
		require.Equal(t, int64(i+1), rs[i].seq)
		require.Equal(t, string(in.Action), rs[i].action)
		require.Equal(t, *in.ObjectID, *rs[i].objectID, "entry %d", i+1)
		require.Equal(t, in.ActorBytes(), rs[i].actor)
	}
	require.Equal(t, rs[1].createdAt, rs[2].createdAt, "a group's entries share its time")
	require.Equal(t, rs[1].createdAt, rs[3].createdAt)
	var detail string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT detail::text FROM audit_log WHERE community_id = $1 AND seq = 2`, cid).Scan(&detail))
	require.Equal(t, `{"channel_id": null, "event_kind": 1}`, detail)
	require.Len(t, rows(t, b.pool, other), 4, "each community its own chain")
	for _, c := range []string{cid, other} {
		ok, err := b.verify(t, c)
		require.NoError(t, err)
		require.True(t, ok)
	}
	all, _, err = audit.OutboxStats(ctx, b.pool)
	require.NoError(t, err)
	require.Zero(t, all)
}

// A batch transaction takes groups while the intents before each are
// fewer than audit.BatchSize, so it chains at most BatchSize intents and
// the rest of its last group, and the next one continues.
func TestChainIntentGroupsBatchSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	cid := b.community(t, "group-size.test")
	const n = 300 // three groups: 300 + 300 in the first batch (300 < 500 before the second), 300 in the next
	for g := range 3 {
		_, err := b.pool.Exec(ctx, `INSERT INTO audit_intent_groups (community_id, n, actions, actors, object_ids, details)
			SELECT $1, $2, array_fill('event_created'::text, ARRAY[$2::int]), array_fill(NULL::bytea, ARRAY[$2::int]),
				ARRAY(SELECT $3 || '-' || i FROM generate_series(1, $2::int) AS i),
				array_fill('{"event_kind": 1, "channel_id": null}'::jsonb, ARRAY[$2::int])`, cid, n, string(rune('a'+g)))
		require.NoError(t, err)
	}
	b.flush(t)
	require.Equal(t, audit.ChainedBatch{CommunityID: cid, N: 2 * n, Head: 2 * n}, b.chainer.TestSignals.Chained.WaitOrTimeout(t))
	require.Equal(t, audit.ChainedBatch{CommunityID: cid, N: n, Head: 3 * n}, b.chainer.TestSignals.Chained.WaitOrTimeout(t))
	b.chainer.TestSignals.Chained.RequireEmpty(t)
	rs := rows(t, b.pool, cid)
	require.Len(t, rs, 3*n)
	require.Equal(t, "a-1", *rs[0].objectID)
	require.Equal(t, "b-300", *rs[2*n-1].objectID)
	require.Equal(t, "c-300", *rs[3*n-1].objectID)
	ok, err := b.verify(t, cid)
	require.NoError(t, err)
	require.True(t, ok)
}

// Community deletion's purge removes the community's pending groups with
// its chain and outbox.
func TestPurgeIntentGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	cid := b.community(t, "purge-groups.test")
	b.insertBatch(t, cid, eventtest.NewKey().Signed(t, 1))
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return audit.Purge(ctx, tx, cid) }))
	pending, err := audit.PendingCount(ctx, b.pool, cid)
	require.NoError(t, err)
	require.Zero(t, pending)
}
