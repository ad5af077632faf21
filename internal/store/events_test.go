package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestEventInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EventMentionsAndIntentInOneStatement", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		author, p1, p2 := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		ch := fixture.Channel(t, b.tx, b.a, author)
		ev := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", p1.PubKey), eventtest.Tag("p", p2.PubKey),
			eventtest.Tag("p", p1.PubKey), eventtest.Tag("p", strings.ToUpper(p2.PubKey)), eventtest.Tag("t", "x"))
		obj := ev.ID
		intent := &store.OutboxIntent{DedupeKey: "event_created:" + ev.ID, Action: "event_created",
			Actor: unhex(t, author.PubKey), ObjectID: &obj, Detail: []byte(`{"event_kind":9}`)}
		inserted, err := b.s.EventInsert(ctx, store.EventInsertParams{CommunityID: b.a, Event: &ev, Channel: ch, Audit: intent})
		require.NoError(t, err)
		require.True(t, inserted)

		got, err := b.s.EventLookup(ctx, b.a, ev.ID)
		require.NoError(t, err)
		require.Equal(t, store.EventRef{ID: ev.ID, PubKey: author.PubKey, Kind: 9, CreatedAt: ev.CreatedAt, Channel: ch, Tags: ev.Tags}, got)
		require.Equal(t, 2, count(t, b.tx, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2
			AND channel_id = $3 AND event_kind = 9`, b.a, unhex(t, ev.ID), ch), "one row per distinct lowercase p")
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM audit_outbox WHERE community_id = $1 AND dedupe_key = $2
			AND action = 'event_created' AND object_id = $3 AND detail = '{"event_kind":9}'`, b.a, intent.DedupeKey, ev.ID))

		// The same event again: nothing new, not even an intent.
		again := *intent
		again.DedupeKey = "other"
		inserted, err = b.s.EventInsert(ctx, store.EventInsertParams{CommunityID: b.a, Event: &ev, Channel: ch, Audit: &again})
		require.NoError(t, err)
		require.False(t, inserted)
		require.Equal(t, 2, count(t, b.tx, `SELECT count(*) FROM event_mentions WHERE community_id = $1`, b.a))
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM audit_outbox WHERE community_id = $1`, b.a))
	})

	t.Run("CommunitiesAreIndependent", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		key := eventtest.NewKey()
		ev := key.Signed(t, 1, eventtest.Tag("p", key.PubKey))
		for _, cid := range []string{b.a, b.b} {
			inserted, err := b.s.EventInsert(ctx, store.EventInsertParams{CommunityID: cid, Event: &ev})
			require.NoError(t, err)
			require.True(t, inserted, "the same id is a new row in another community")
		}
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM event_mentions WHERE community_id = $1`, b.b))
	})

	t.Run("AddressableKeepsDTag", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		ev := fixture.Event(t, b.tx, b.a, eventtest.NewKey(), 30023, eventtest.Tag("d", "slug"))
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2 AND d_tag = 'slug'
			AND channel_id IS NULL`, b.a, unhex(t, ev.ID)))
	})

	t.Run("BadHexRefused", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		good := eventtest.NewKey().Signed(t, 1)
		for name, mutate := range map[string]func(*event.Event){
			"ID": func(e *event.Event) { e.ID = "zz" }, "PubKey": func(e *event.Event) { e.PubKey = e.PubKey[:62] },
			"Sig": func(e *event.Event) { e.Sig = "00" },
		} {
			ev := good
			mutate(&ev)
			_, err := b.s.EventInsert(ctx, store.EventInsertParams{CommunityID: b.a, Event: &ev})
			require.Error(t, err, name)
		}
	})
}

func TestMentions(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, tc := range []struct {
		name string
		tags event.Tags
		want []string
	}{
		{"None", nil, []string{}},
		{"FirstSeenOrderDistinct", event.Tags{{"p", b}, {"e", a}, {"p", a}, {"p", b}}, []string{b, a}},
		{"OnlyLowercaseHex64", event.Tags{{"p", strings.ToUpper(a)}, {"p", a[:63]}, {"p"}, {"P", a}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, store.Mentions(&event.Event{Tags: tc.tags}))
		})
	}
}

func TestEventLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	live := fixture.Event(t, b.tx, b.a, key, 1, eventtest.Tag("t", "x"))
	gone := fixture.Event(t, b.tx, b.a, key, 1, eventtest.Content("gone"))
	_, err := b.s.EventSoftDelete(ctx, b.a, gone.ID, gone.CreatedAt)
	require.NoError(t, err)

	ref, err := b.s.EventLookup(ctx, b.a, live.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventRef{ID: live.ID, PubKey: key.PubKey, Kind: 1, CreatedAt: live.CreatedAt, Tags: live.Tags}, ref)
	ref, err = b.s.EventLookup(ctx, b.a, gone.ID)
	require.NoError(t, err)
	require.True(t, ref.Deleted)

	for name, id := range map[string]string{"OtherCommunity": live.ID, "Unknown": strings.Repeat("0", 64), "NotHex": "xyz"} {
		cid := b.a
		if name == "OtherCommunity" {
			cid = b.b
		}
		_, err := b.s.EventLookup(ctx, cid, id)
		require.ErrorIs(t, err, pg.ErrNotFound, name)
	}
}

func TestEventSoftDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	ev := eventtest.NewKey().Signed(t, 1)
	fixture.Store(t, b.tx, b.a, "", ev)
	fixture.Store(t, b.tx, b.b, "", ev)

	changed, err := b.s.EventSoftDelete(ctx, b.a, ev.ID, ev.CreatedAt+1)
	require.NoError(t, err)
	require.False(t, changed, "created_at is part of the key")
	changed, err = b.s.EventSoftDelete(ctx, b.a, ev.ID, ev.CreatedAt)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = b.s.EventSoftDelete(ctx, b.a, ev.ID, ev.CreatedAt)
	require.NoError(t, err)
	require.False(t, changed, "already deleted")

	ref, err := b.s.EventLookup(ctx, b.b, ev.ID)
	require.NoError(t, err)
	require.False(t, ref.Deleted, "the copy in community b is untouched")
}

func TestAddressableDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	now := time.Now().Unix()
	ch := fixture.Channel(t, b.tx, b.a, key)
	old := fixture.Event(t, b.tx, b.a, key, 30023, eventtest.Tag("d", "x"), eventtest.At(now-20))
	atCut := key.Signed(t, 30023, eventtest.Tag("d", "x"), eventtest.At(now-10))
	fixture.Store(t, b.tx, b.a, ch, atCut)
	newer := fixture.Event(t, b.tx, b.a, key, 30023, eventtest.Tag("d", "x"), eventtest.At(now))
	otherD := fixture.Event(t, b.tx, b.a, key, 30023, eventtest.Tag("d", "y"), eventtest.At(now-20))
	otherCommunity := old
	fixture.Store(t, b.tx, b.b, "", otherCommunity)

	got, err := b.s.AddressableDelete(ctx, b.a, 30023, key.PubKey, "x", now-10)
	require.NoError(t, err)
	require.ElementsMatch(t, []store.EventRef{
		{ID: old.ID, PubKey: key.PubKey, Kind: 30023},
		{ID: atCut.ID, PubKey: key.PubKey, Kind: 30023, Channel: ch},
	}, got)
	for id, deleted := range map[string]bool{old.ID: true, atCut.ID: true, newer.ID: false, otherD.ID: false} {
		ref, err := b.s.EventLookup(ctx, b.a, id)
		require.NoError(t, err)
		require.Equal(t, deleted, ref.Deleted, id)
	}
	ref, err := b.s.EventLookup(ctx, b.b, old.ID)
	require.NoError(t, err)
	require.False(t, ref.Deleted, "community b is untouched")

	again, err := b.s.AddressableDelete(ctx, b.a, 30023, key.PubKey, "x", now-10)
	require.NoError(t, err)
	require.Empty(t, again)
	_, err = b.s.AddressableDelete(ctx, b.a, 30023, "not hex", "x", now)
	require.Error(t, err)
}

func TestReplaceable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	now := time.Now().Unix()
	ch := fixture.Channel(t, b.tx, b.a, key)
	d := "slug"

	// Two live versions in the same second: the head is the lowest id.
	v1 := key.Signed(t, 10000, eventtest.At(now), eventtest.Content("a"))
	v2 := key.Signed(t, 10000, eventtest.At(now), eventtest.Content("b"))
	older := key.Signed(t, 10000, eventtest.At(now-5))
	fixture.Store(t, b.tx, b.a, "", v1, v2, older)
	inChannel := key.Signed(t, 10000, eventtest.At(now-100))
	fixture.Store(t, b.tx, b.a, ch, inChannel)
	addr := fixture.Event(t, b.tx, b.a, key, 30023, eventtest.Tag("d", d), eventtest.At(now-50))
	fixture.Store(t, b.tx, b.b, "", key.Signed(t, 10000, eventtest.At(now+5)))

	lowest := v1
	if v2.ID < v1.ID {
		lowest = v2
	}
	for _, tc := range []struct {
		name string
		key  store.ReplaceableKey
		want store.Head
	}{
		{"GlobalNewestLowestID", store.ReplaceableKey{CommunityID: b.a, Kind: 10000, Pubkey: key.PubKey},
			store.Head{ID: lowest.ID, CreatedAt: now}},
		{"PerChannel", store.ReplaceableKey{CommunityID: b.a, Kind: 10000, Pubkey: key.PubKey, Channel: ch},
			store.Head{ID: inChannel.ID, CreatedAt: now - 100}},
		{"Addressable", store.ReplaceableKey{CommunityID: b.a, Kind: 30023, Pubkey: key.PubKey, DTag: &d},
			store.Head{ID: addr.ID, CreatedAt: now - 50}},
	} {
		h, ok, err := b.s.ReplaceableHead(ctx, tc.key)
		require.NoError(t, err, tc.name)
		require.True(t, ok, tc.name)
		require.Equal(t, tc.want, h, tc.name)
	}

	global := store.ReplaceableKey{CommunityID: b.a, Kind: 10000, Pubkey: key.PubKey}
	require.NoError(t, b.s.ReplaceableSupersede(ctx, global))
	_, ok, err := b.s.ReplaceableHead(ctx, global)
	require.NoError(t, err)
	require.False(t, ok, "every global version superseded")
	_, ok, err = b.s.ReplaceableHead(ctx, store.ReplaceableKey{CommunityID: b.a, Kind: 10000, Pubkey: key.PubKey, Channel: ch})
	require.NoError(t, err)
	require.True(t, ok, "the channel's version is another key")
	_, ok, err = b.s.ReplaceableHead(ctx, store.ReplaceableKey{CommunityID: b.b, Kind: 10000, Pubkey: key.PubKey})
	require.NoError(t, err)
	require.True(t, ok, "community b is untouched")

	addrKey := store.ReplaceableKey{CommunityID: b.a, Kind: 30023, Pubkey: key.PubKey, DTag: &d}
	require.NoError(t, b.s.ReplaceableSupersede(ctx, addrKey))
	_, ok, err = b.s.ReplaceableHead(ctx, addrKey)
	require.NoError(t, err)
	require.False(t, ok)
}

func TestAdvisoryXactLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holder, other := dbtest.Tx(t), dbtest.Tx(t)
	key := time.Now().UnixNano()
	require.NoError(t, store.New(holder).AdvisoryXactLock(ctx, key))
	var got bool
	require.NoError(t, other.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, key).Scan(&got))
	require.False(t, got, "held by the first transaction")
	require.NoError(t, other.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, key+1).Scan(&got))
	require.True(t, got, "another key is free")
}

func TestUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	alice, bob := eventtest.NewKey(), eventtest.NewKey()

	policy, owner, err := b.s.UserAddPolicy(ctx, b.a, alice.PubKey)
	require.NoError(t, err)
	require.Equal(t, "anyone", policy, "no row means anyone")
	require.Empty(t, owner)

	require.NoError(t, b.s.UserSetAddPolicy(ctx, b.a, alice.PubKey, "nobody"))
	require.NoError(t, b.s.UserSetAddPolicy(ctx, b.a, alice.PubKey, "owner_only"))
	policy, _, err = b.s.UserAddPolicy(ctx, b.a, alice.PubKey)
	require.NoError(t, err)
	require.Equal(t, "owner_only", policy)
	policy, _, err = b.s.UserAddPolicy(ctx, b.b, alice.PubKey)
	require.NoError(t, err)
	require.Equal(t, "anyone", policy, "community b has its own facts")
	require.Error(t, b.s.UserSetAddPolicy(ctx, b.a, bob.PubKey, "everyone"))
}

func TestUserSetNIP05(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	handle := func(t *testing.T, q pg.Querier, cid string, k eventtest.Key) *string {
		var h *string
		require.NoError(t, q.QueryRow(ctx, `SELECT nip05_handle FROM users WHERE community_id = $1 AND pubkey = $2`,
			cid, unhex(t, k.PubKey)).Scan(&h))
		return h
	}

	t.Run("SetAndClear", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		alice := eventtest.NewKey()
		name := "alice@" + fixture.Host()
		require.NoError(t, b.s.UserSetNIP05(ctx, b.a, alice.PubKey, &name))
		require.Equal(t, &name, handle(t, b.tx, b.a, alice))
		require.NoError(t, b.s.UserSetNIP05(ctx, b.b, alice.PubKey, &name), "b is another namespace")
		require.NoError(t, b.s.UserSetNIP05(ctx, b.a, alice.PubKey, nil))
		require.Nil(t, handle(t, b.tx, b.a, alice), "cleared")
		require.Equal(t, &name, handle(t, b.tx, b.b, alice), "b keeps its own")
	})

	// A handle held by another pubkey is not claimed and no error is
	// returned, on the pool (autocommit) and inside a transaction alike.
	t.Run("HandleHeldByAnother", func(t *testing.T) {
		t.Parallel()
		b := setupPool(t)
		cid := b.community(t)
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		name, lower := "Alice@x.test", "alice@x.test"
		require.NoError(t, b.s.UserSetNIP05(ctx, cid, alice.PubKey, &name))
		require.NoError(t, b.s.UserSetNIP05(ctx, cid, bob.PubKey, &lower))
		require.Equal(t, &name, handle(t, b.pool, cid, alice))
		require.Zero(t, count(t, b.pool, `SELECT count(*) FROM users WHERE community_id = $1 AND pubkey = $2`,
			cid, unhex(t, bob.PubKey)), "the refused upsert wrote nothing")
	})
	t.Run("HandleHeldByAnotherInTransaction", func(t *testing.T) {
		t.Parallel()
		b := setupPool(t)
		cid := b.community(t)
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		name, lower := "Held@x.test", "held@x.test"
		require.NoError(t, b.s.UserSetNIP05(ctx, cid, alice.PubKey, &name))
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		require.NoError(t, store.New(tx).UserSetNIP05(ctx, cid, bob.PubKey, &lower))
		var one int
		require.NoError(t, tx.QueryRow(ctx, `SELECT 1`).Scan(&one), "the transaction is still usable")
		require.NoError(t, tx.Commit(ctx))
		require.Equal(t, &name, handle(t, b.pool, cid, alice))
	})
}
