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
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestEventInsertBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	pool := b.pool
	cid := b.community(t)
	author, mentioned := eventtest.NewKey(), eventtest.NewKey()
	ch := fixture.Channel(t, pool, cid, author)
	params := func(ev *event.Event) store.EventInsertParams {
		obj := ev.ID
		return store.EventInsertParams{CommunityID: cid, Event: ev, Channel: ch,
			Audit: &store.OutboxIntent{DedupeKey: "event_created:" + ev.ID, Action: "event_created",
				Actor: unhex(t, author.PubKey), ObjectID: &obj, Detail: []byte(`{"event_kind":9}`)}}
	}
	stored := func(ev *event.Event) (events, mentions, intents int) {
		id := unhex(t, ev.ID)
		return count(t, pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, cid, id),
			count(t, pool, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, cid, id),
			count(t, pool, `SELECT count(*) FROM audit_intent_groups g, unnest(g.object_ids) AS o(id)
				WHERE g.community_id = $1 AND o.id = $2`, cid, ev.ID)
	}

	t.Run("EachElementItsOwnOutcome", func(t *testing.T) {
		old := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("batch 1"))
		_, err := store.New(pool).EventInsert(ctx, params(&old))
		require.NoError(t, err)
		e1 := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", mentioned.PubKey), eventtest.Content("batch 2"))
		e2 := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("batch 3"))
		res, err := store.New(pool).EventInsertBatch(ctx, []store.EventInsertParams{params(&e1), params(&old), params(&e2), params(&e1)})
		require.NoError(t, err)
		require.Equal(t, []bool{true, false, true, false}, []bool{res[0].Inserted, res[1].Inserted, res[2].Inserted, res[3].Inserted},
			"an event stored before, or earlier in the batch, is not inserted again")
		ev, men, in := stored(&e1)
		require.Equal(t, [3]int{1, 1, 1}, [3]int{ev, men, in}, "the row, its mention and its intent")
		ev, _, in = stored(&e2)
		require.Equal(t, [2]int{1, 1}, [2]int{ev, in})
	})

	t.Run("SameAsAlone", func(t *testing.T) {
		// Listener rows per element, two communities, an addressable d, an
		// element without intent: each element stores what EventInsert
		// would have stored for it alone.
		other := b.community(t)
		l1, l2, target, plain := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		for _, l := range []eventtest.Key{l1, l2} {
			_, err := pool.Exec(ctx, `INSERT INTO operator_listener_pubkeys (listener_pubkey, target_pubkey) VALUES ($1, $2)`,
				unhex(t, l.PubKey), unhex(t, target.PubKey))
			require.NoError(t, err)
		}
		both := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", target.PubKey), eventtest.Tag("p", plain.PubKey),
			eventtest.Content("batch 8"))
		none := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", plain.PubKey), eventtest.Content("batch 9"))
		d := "slug"
		addr := author.Signed(t, 30023, eventtest.Tag("d", d), eventtest.Content("batch 10"))
		pb, pn := params(&both), params(&none)
		pb.ListenerTargets, pn.ListenerTargets = []string{target.PubKey}, []string{plain.PubKey}
		elsewhere := store.EventInsertParams{CommunityID: other, Event: &both, ListenerTargets: []string{target.PubKey}}
		res, err := store.New(pool).EventInsertBatch(ctx, []store.EventInsertParams{pb, pn, elsewhere,
			{CommunityID: cid, Event: &addr, DTag: &d}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{Inserted: true, ListenerRows: 2}, {Inserted: true}, {Inserted: true, ListenerRows: 2},
			{Inserted: true}}, res)
		require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, cid, unhex(t, both.ID)))
		require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, other, unhex(t, both.ID)))
		require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1 AND event_id = $2
			AND target_pubkey = $3 AND event_kind = 9`, other, unhex(t, both.ID), unhex(t, target.PubKey)))
		require.Zero(t, count(t, pool, `SELECT (SELECT count(*) FROM audit_outbox WHERE community_id = $1)
			+ (SELECT count(*) FROM audit_intent_groups WHERE community_id = $1)`, other), "no intent given, none written")
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2 AND d_tag = 'slug'
			AND channel_id IS NULL AND kind = 30023`, cid, unhex(t, addr.ID)))
		var tags, content string
		var created int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT tags::text, content, extract(epoch FROM created_at)::bigint FROM events
			WHERE community_id = $1 AND id = $2`, cid, unhex(t, both.ID)).Scan(&tags, &content, &created))
		require.Equal(t, [3]any{`[["h", "` + ch + `"], ["p", "` + target.PubKey + `"], ["p", "` + plain.PubKey + `"]]`, "batch 8", both.CreatedAt},
			[3]any{tags, content, created})
	})

	t.Run("IntentsGroupedInOrder", func(t *testing.T) {
		// One audit_intent_groups row per community per statement, its
		// intents in the order of the batch; an element that stores
		// nothing (a repeat) or carries no intent adds none.
		other := b.community(t)
		e1 := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("group 1"))
		e2 := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("group 2"))
		e3 := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("group 3"))
		bare := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("group 4"))
		p2 := params(&e2)
		p2.Audit.Actor, p2.Audit.Detail = nil, []byte(`{"event_kind": 9, "channel_id": null}`)
		elsewhere := params(&e1)
		elsewhere.CommunityID, elsewhere.Channel = other, ""
		_, err := store.New(pool).EventInsertBatch(ctx, []store.EventInsertParams{params(&e3), elsewhere, params(&e1), p2,
			params(&e3), {CommunityID: cid, Event: &bare, Channel: ch}})
		require.NoError(t, err)
		type group struct {
			N       int
			Actions []string
			Actors  [][]byte
			Objects []*string
			Details []string
		}
		read := func(community string) []group {
			rows, err := pool.Query(ctx, `SELECT n, actions, actors, object_ids, details::text[] FROM audit_intent_groups
				WHERE community_id = $1 AND $2 = ANY (object_ids) ORDER BY id`, community, e1.ID)
			require.NoError(t, err)
			gs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[group])
			require.NoError(t, err)
			return gs
		}
		actor := unhex(t, author.PubKey)
		require.Equal(t, []group{{N: 3, Actions: []string{"event_created", "event_created", "event_created"},
			Actors: [][]byte{actor, actor, nil}, Objects: []*string{&e3.ID, &e1.ID, &e2.ID},
			Details: []string{`{"event_kind": 9}`, `{"event_kind": 9}`, `{"channel_id": null, "event_kind": 9}`}}}, read(cid))
		require.Equal(t, []group{{N: 1, Actions: []string{"event_created"}, Actors: [][]byte{actor}, Objects: []*string{&e1.ID},
			Details: []string{`{"event_kind": 9}`}}}, read(other))
	})

	t.Run("OneFailureStoresNothing", func(t *testing.T) {
		good := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", mentioned.PubKey), eventtest.Content("batch 4"))
		bad := author.Signed(t, 22242, eventtest.Content("batch 5")) // the events_kind_check constraint refuses the kind
		bp := params(&bad)
		_, err := store.New(pool).EventInsertBatch(ctx, []store.EventInsertParams{params(&good), bp})
		require.Error(t, err)
		ev, men, in := stored(&good)
		require.Equal(t, [3]int{0, 0, 0}, [3]int{ev, men, in}, "the batch is one transaction")
	})

	t.Run("CommitTimeRefusalStoresNothing", func(t *testing.T) {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, `SET buzz.created_at_floor = '960'`)
		require.NoError(t, err)
		defer conn.Exec(ctx, `RESET buzz.created_at_floor`) //nolint:errcheck // the connection is dropped with the pool
		good := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("batch 6"))
		late := author.Signed(t, 9, eventtest.Channel(ch), eventtest.At(time.Now().Add(-time.Hour).Unix()), eventtest.Content("batch 7"))
		_, err = store.New(conn).EventInsertBatch(ctx, []store.EventInsertParams{params(&good), params(&late)})
		require.True(t, pg.IsCreatedAtFloor(err), "the deferred floor fires at the batch's commit: %v", err)
		ev, _, in := stored(&good)
		require.Equal(t, [2]int{0, 0}, [2]int{ev, in})
	})

	t.Run("PosterCheck", func(t *testing.T) {
		// Steps 14 and 15 decided by the write, element by element, against
		// the channel's state in the statement's snapshot.
		s := store.New(pool)
		member, stranger := eventtest.NewKey(), eventtest.NewKey()
		open := fixture.Channel(t, pool, cid, author)
		private := fixture.Channel(t, pool, cid, author, fixture.Private(), fixture.Members(member))
		archived := fixture.Channel(t, pool, cid, author, fixture.Archived())
		deleted := fixture.Channel(t, pool, cid, author, fixture.Deleted())
		missing := "00000000-0000-4000-8000-000000000001"
		n := 0
		checked := func(key eventtest.Key, channel string) store.EventInsertParams {
			n++
			ev := key.Signed(t, 9, eventtest.Channel(channel), eventtest.Content("poster "+string(rune('a'+n))))
			return store.EventInsertParams{CommunityID: cid, Event: &ev, Channel: channel, PosterCheck: true}
		}
		cases := []struct {
			name    string
			p       store.EventInsertParams
			refused bool
		}{
			{"open, anyone", checked(stranger, open), false},
			{"private, member", checked(member, private), false},
			{"private, owner", checked(author, private), false},
			{"private, stranger", checked(stranger, private), true},
			{"archived", checked(author, archived), true},
			{"deleted", checked(author, deleted), true},
			{"no such channel", checked(author, missing), true},
		}
		ps := make([]store.EventInsertParams, len(cases))
		for i, c := range cases {
			ps[i] = c.p
		}
		unchecked := checked(stranger, private)
		unchecked.PosterCheck = false
		ps = append(ps, unchecked, cases[3].p) // the rule is only checked when asked; a copy of a refused one is refused
		res, err := s.EventInsertBatch(ctx, ps)
		require.NoError(t, err)
		for i, c := range cases {
			require.Equal(t, store.EventInsertResult{Inserted: !c.refused, Refused: c.refused}, res[i], c.name)
			require.Equal(t, b2i(!c.refused), count(t, pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`,
				cid, unhex(t, c.p.Event.ID)), c.name)
		}
		require.Equal(t, store.EventInsertResult{Inserted: true}, res[len(cases)], "no check asked")
		require.Equal(t, store.EventInsertResult{Refused: true}, res[len(cases)+1], "a copy of a refused element")

		// A removal committed before the statement refuses the next event;
		// alone, the statement is the batch's.
		require.NoError(t, s.ChannelMemberRemove(ctx, cid, private, member.PubKey, author.PubKey))
		again := checked(member, private)
		one, err := s.EventInsertCounted(ctx, again)
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{Refused: true}, one)
		// A stored event sent again by someone allowed is a duplicate, not refused.
		dup, err := s.EventInsertCounted(ctx, cases[0].p)
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{}, dup)
		_, err = s.EventInsertBatch(ctx, []store.EventInsertParams{{CommunityID: cid, Event: again.Event, PosterCheck: true}})
		require.ErrorContains(t, err, "a poster check needs a channel")
		_, err = s.EventInsertCounted(ctx, store.EventInsertParams{CommunityID: cid, Event: again.Event, PosterCheck: true})
		require.ErrorContains(t, err, "a poster check needs a channel")

		// Alone with an expiration and listener targets too: written with
		// its listener row when allowed, nothing written when refused.
		listener, target := eventtest.NewKey(), eventtest.NewKey()
		_, err = pool.Exec(ctx, `INSERT INTO operator_listener_pubkeys (listener_pubkey, target_pubkey) VALUES ($1, $2)`,
			unhex(t, listener.PubKey), unhex(t, target.PubKey))
		require.NoError(t, err)
		exp := eventtest.Tag("expiration", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		for _, c := range []struct {
			key  eventtest.Key
			want store.EventInsertResult
		}{{author, store.EventInsertResult{Inserted: true, ListenerRows: 1}}, {stranger, store.EventInsertResult{Refused: true}}} {
			ev := c.key.Signed(t, 9, eventtest.Channel(private), eventtest.Tag("p", target.PubKey), exp)
			res, err := s.EventInsertCounted(ctx, store.EventInsertParams{CommunityID: cid, Event: &ev, Channel: private,
				ListenerTargets: []string{target.PubKey}, PosterCheck: true})
			require.NoError(t, err)
			require.Equal(t, c.want, res)
			require.Equal(t, int(c.want.ListenerRows), count(t, pool, `SELECT count(*) FROM operator_listener_outbox WHERE event_id = $1`,
				unhex(t, ev.ID)))
			require.Equal(t, b2i(c.want.Inserted), count(t, pool, `SELECT count(*) FROM events WHERE id = $1 AND expires_at IS NOT NULL`,
				unhex(t, ev.ID)))
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
