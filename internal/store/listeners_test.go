package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// pubkey is a random lowercase hex pubkey.
func pubkey() string { return eventtest.NewKey().PubKey }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestListenerTablesAreDeploymentGlobal(t *testing.T) {
	t.Parallel()
	tx := dbtest.Tx(t)
	for table, reason := range map[string]string{
		"operator_listener_pubkeys": "deployment-global target registrations for operator listeners",
		"operator_listener_outbox":  "deployment-global mention delivery queue; community_id is event provenance",
	} {
		require.Equal(t, 1, count(t, tx, `SELECT count(*) FROM _operator_global_tables WHERE table_name = $1 AND reason = $2`,
			table, reason), table)
		require.Zero(t, count(t, tx, `SELECT count(*) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f'`, table),
			"%s has no foreign key", table)
		require.Zero(t, count(t, tx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal`, table),
			"%s has no trigger", table)
	}
	require.Equal(t, 5, count(t, tx, `SELECT count(*) FROM pg_indexes WHERE indexname IN ('operator_listener_pubkeys_target',
		'operator_listener_pubkeys_created_at', 'operator_listener_outbox_due', 'operator_listener_outbox_recovery',
		'operator_listener_outbox_created_at')`))
}

func TestIsMentionKind(t *testing.T) {
	t.Parallel()
	for _, k := range []int{9, 40002, 45001, 45003} {
		require.True(t, store.IsMentionKind(k), "kind %d", k)
	}
	for _, k := range []int{0, 1, 5, 7, 8, 10, 1059, 40003, 45002, 45004, 30023} {
		require.False(t, store.IsMentionKind(k), "kind %d", k)
	}
}

func TestMentionTargets(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, tc := range []struct {
		name string
		tags event.Tags
		want []string
	}{
		{"None", nil, nil},
		{"NoPTags", event.Tags{{"e", a}, {"t", "x"}}, nil},
		{"TagOrderDistinct", event.Tags{{"p", b}, {"e", a}, {"p", a}, {"p", b}}, []string{b, a}},
		{"EitherCaseLowercased", event.Tags{{"p", strings.ToUpper(a)}, {"p", a}, {"p", "BbBb" + b[4:]}}, []string{a, b}},
		{"MalformedSkipped", event.Tags{{"p", a[:63]}, {"p"}, {"P", a}, {"p", "zz" + a[2:]}, {"p", a + "00"}, {"p", b, "wss://x"}},
			[]string{b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, store.MentionTargets(&event.Event{Tags: tc.tags}))
		})
	}
}

func TestListenerRegister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	registered := func(t *testing.T, q pg.Querier, listener string) []string {
		t.Helper()
		rows, err := q.Query(ctx, `SELECT encode(target_pubkey, 'hex') FROM operator_listener_pubkeys
			WHERE listener_pubkey = $1 ORDER BY 1`, unhex(t, listener))
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}

	t.Run("DeduplicatesAndRenews", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		l, t1, t2 := pubkey(), pubkey(), pubkey()
		require.NoError(t, b.s.ListenerRegister(ctx, strings.ToUpper(l), []string{t1, t2, strings.ToUpper(t1), t1}))
		require.ElementsMatch(t, []string{t1, t2}, registered(t, b.tx, l), "one row per distinct target, stored lowercase")

		// Ten days old; registering again brings created_at back to now.
		_, err := b.tx.Exec(ctx, `UPDATE operator_listener_pubkeys SET created_at = now() - interval '10 days'
			WHERE listener_pubkey = $1`, unhex(t, l))
		require.NoError(t, err)
		require.NoError(t, b.s.ListenerRegister(ctx, l, []string{t1}))
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM operator_listener_pubkeys
			WHERE listener_pubkey = $1 AND target_pubkey = $2 AND created_at = now()`, unhex(t, l), unhex(t, t1)), "renewed")
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM operator_listener_pubkeys
			WHERE listener_pubkey = $1 AND target_pubkey = $2 AND created_at = now() - interval '10 days'`, unhex(t, l), unhex(t, t2)),
			"a target not in the request keeps its age")
		require.NoError(t, b.s.ListenerRegister(ctx, l, []string{t1}), "twice is harmless")
		require.Len(t, registered(t, b.tx, l), 2)
	})

	t.Run("UnregisterIsIdempotentAndScoped", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		l, other, t1, t2, never := pubkey(), pubkey(), pubkey(), pubkey(), pubkey()
		require.NoError(t, b.s.ListenerRegister(ctx, l, []string{t1, t2}))
		require.NoError(t, b.s.ListenerRegister(ctx, other, []string{t1}))

		require.NoError(t, b.s.ListenerUnregister(ctx, l, []string{strings.ToUpper(t1), never}))
		require.Equal(t, []string{t2}, registered(t, b.tx, l))
		require.NoError(t, b.s.ListenerUnregister(ctx, l, []string{t1}), "again: nothing to remove")
		require.Equal(t, []string{t2}, registered(t, b.tx, l))
		require.Equal(t, []string{t1}, registered(t, b.tx, other), "another listener's registration stays")
	})

	t.Run("BadPubkeyWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		l := pubkey()
		require.Error(t, b.s.ListenerRegister(ctx, l, []string{pubkey(), "xyz"}))
		require.Error(t, b.s.ListenerRegister(ctx, l[:62], []string{pubkey()}))
		require.Error(t, b.s.ListenerUnregister(ctx, l, []string{pubkey()[:63]}))
		require.Empty(t, registered(t, b.tx, l))
	})
}

// outboxRows lists the outbox rows of an event as "listener target
// community kind created_at state attempts".
func outboxRows(t *testing.T, q pg.Querier, eventID string) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT concat_ws(' ', encode(listener_pubkey, 'hex'), encode(target_pubkey, 'hex'),
			community_id, event_kind, extract(epoch FROM event_created_at)::bigint, state, attempts,
			claim_id IS NULL AND lease_until IS NULL)
		FROM operator_listener_outbox WHERE event_id = $1 ORDER BY 1`, unhex(t, eventID))
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func TestEventInsertListeners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OneRowPerRegistrationOnlyForANewEvent", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		l1, l2, l3, target, other, unrelated := pubkey(), pubkey(), pubkey(), pubkey(), pubkey(), pubkey()
		require.NoError(t, b.s.ListenerRegister(ctx, l1, []string{target, other}))
		require.NoError(t, b.s.ListenerRegister(ctx, l2, []string{target}))
		require.NoError(t, b.s.ListenerRegister(ctx, l3, []string{unrelated}))
		author := eventtest.NewKey()
		ch := fixture.Channel(t, b.tx, b.a, author)
		ev := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", target), eventtest.Tag("p", target),
			eventtest.Tag("p", strings.ToUpper(other)))
		p := store.EventInsertParams{CommunityID: b.a, Event: &ev, Channel: ch, ListenerTargets: store.MentionTargets(&ev)}
		res, err := b.s.EventInsertCounted(ctx, p)
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{Inserted: true, ListenerRows: 3}, res)
		row := func(l, tg string) string {
			return strings.Join([]string{l, tg, b.a, "9", itoa(ev.CreatedAt), "pending", "0", "t"}, " ")
		}
		want := []string{row(l1, target), row(l1, other), row(l2, target)}
		require.ElementsMatch(t, want, outboxRows(t, b.tx, ev.ID))
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, b.a, unhex(t, ev.ID)),
			"the event and its outbox rows are in the same transaction")
		require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`,
			b.a, unhex(t, ev.ID)), "event_mentions is unchanged: only the lowercase p")

		// The same event again: duplicate, nothing enqueued.
		res, err = b.s.EventInsertCounted(ctx, p)
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{}, res)
		inserted, err := b.s.EventInsert(ctx, p)
		require.NoError(t, err)
		require.False(t, inserted)
		require.ElementsMatch(t, want, outboxRows(t, b.tx, ev.ID))
		// Not even once its rows were delivered (deleted).
		_, err = b.tx.Exec(ctx, `DELETE FROM operator_listener_outbox WHERE event_id = $1`, unhex(t, ev.ID))
		require.NoError(t, err)
		res, err = b.s.EventInsertCounted(ctx, p)
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{}, res)
		require.Empty(t, outboxRows(t, b.tx, ev.ID))

		// Deployment-global: the same registrations match in another community.
		p.CommunityID, p.Channel = b.b, ""
		res, err = b.s.EventInsertCounted(ctx, p)
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{Inserted: true, ListenerRows: 3}, res)
		require.Equal(t, 3, count(t, b.tx, `SELECT count(*) FROM operator_listener_outbox WHERE community_id = $1`, b.b))
	})

	t.Run("NoRegistrationNoRow", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		ev := eventtest.NewKey().Signed(t, 9, eventtest.Tag("p", pubkey()))
		res, err := b.s.EventInsertCounted(ctx, store.EventInsertParams{CommunityID: b.a, Event: &ev,
			ListenerTargets: store.MentionTargets(&ev)})
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{Inserted: true}, res)
		require.Empty(t, outboxRows(t, b.tx, ev.ID))
	})

	t.Run("NoTargetsNoRowEvenWhenRegistered", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		target := pubkey()
		require.NoError(t, b.s.ListenerRegister(ctx, pubkey(), []string{target}))
		ev := eventtest.NewKey().Signed(t, 1, eventtest.Tag("p", target))
		res, err := b.s.EventInsertCounted(ctx, store.EventInsertParams{CommunityID: b.a, Event: &ev})
		require.NoError(t, err)
		require.Equal(t, store.EventInsertResult{Inserted: true}, res)
		require.Empty(t, outboxRows(t, b.tx, ev.ID), "the caller passes no targets for kind 1")
	})

	t.Run("BadTargetRefused", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t)
		ev := eventtest.NewKey().Signed(t, 9)
		_, err := b.s.EventInsert(ctx, store.EventInsertParams{CommunityID: b.a, Event: &ev, ListenerTargets: []string{"xyz"}})
		require.Error(t, err)
		require.Zero(t, count(t, b.tx, `SELECT count(*) FROM events WHERE community_id = $1`, b.a))
	})
}

// eventInsertStatement is EventInsert's statement as it was before operator
// listeners existed: an event without listener targets must still run
// exactly this text.
const eventInsertStatement = `
		WITH ins AS (
			INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag)
			VALUES ($1, $2, $3, to_timestamp($4), $5, $6, $7, $8, $9, $10)
			ON CONFLICT DO NOTHING
			RETURNING 1
		), m AS (
			INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, channel_id, event_kind)
			SELECT $1, p, $2, to_timestamp($4), $9, $5 FROM unnest($11::text[]) AS p
			WHERE EXISTS (SELECT 1 FROM ins)
			ON CONFLICT DO NOTHING
		), a AS (
			INSERT INTO audit_outbox (community_id, dedupe_key, action, actor_pubkey, object_id, detail)
			SELECT $1, $12, $13, $14, $15, $16::jsonb
			WHERE $12::text IS NOT NULL AND EXISTS (SELECT 1 FROM ins)
			ON CONFLICT (community_id, dedupe_key) DO NOTHING
		)
		SELECT count(*) FROM ins`

func TestEventInsertListenerStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	rec := &dbtest.SQLRecorder{}
	traced := dbtest.TracedPool(t, pool, rec, 1)
	cid := fixture.Community(t, pool).ID
	target := pubkey()
	require.NoError(t, store.New(pool).ListenerRegister(ctx, pubkey(), []string{target}))

	// No targets (any kind the caller does not treat as a mention): one
	// statement, the one from before the feature, touching no listener table.
	for _, kind := range []int{1, 7, 9, 40003} {
		ev := eventtest.NewKey().Signed(t, kind, eventtest.Tag("p", target))
		inserted, err := store.New(traced).EventInsert(ctx, store.EventInsertParams{CommunityID: cid, Event: &ev})
		require.NoError(t, err)
		require.True(t, inserted)
		require.Equal(t, []string{eventInsertStatement}, rec.Take(), "kind %d", kind)
	}
	require.Zero(t, count(t, pool, `SELECT count(*) FROM operator_listener_outbox`))

	// With targets: still one statement, now with the outbox CTE.
	ev := eventtest.NewKey().Signed(t, 9, eventtest.Tag("p", target))
	inserted, err := store.New(traced).EventInsert(ctx, store.EventInsertParams{CommunityID: cid, Event: &ev,
		ListenerTargets: store.MentionTargets(&ev)})
	require.NoError(t, err)
	require.True(t, inserted)
	got := rec.Take()
	require.Len(t, got, 1)
	require.Contains(t, got[0], "INSERT INTO operator_listener_outbox")
	require.Len(t, outboxRows(t, pool, ev.ID), 1, "committed on its own: the statement autocommits")
}

func TestEventInsertListenerFailureRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	cid := fixture.Community(t, pool).ID
	target := pubkey()
	require.NoError(t, store.New(pool).ListenerRegister(ctx, pubkey(), []string{target}))
	_, err := pool.Exec(ctx, `ALTER TABLE operator_listener_outbox ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
	require.NoError(t, err)

	author := eventtest.NewKey()
	ev := author.Signed(t, 9, eventtest.Tag("p", target))
	obj := ev.ID
	p := store.EventInsertParams{CommunityID: cid, Event: &ev, ListenerTargets: store.MentionTargets(&ev),
		Audit: &store.OutboxIntent{DedupeKey: "event_created:" + ev.ID, Action: "event_created", ObjectID: &obj, Detail: []byte(`{}`)}}
	stored := func() int {
		return count(t, pool, `SELECT count(*) FROM events WHERE id = $1`, unhex(t, ev.ID)) +
			count(t, pool, `SELECT count(*) FROM event_mentions WHERE event_id = $1`, unhex(t, ev.ID)) +
			count(t, pool, `SELECT count(*) FROM audit_outbox WHERE dedupe_key = $1`, p.Audit.DedupeKey) +
			count(t, pool, `SELECT count(*) FROM operator_listener_outbox WHERE event_id = $1`, unhex(t, ev.ID))
	}

	// The one-statement path, autocommitted on the pool.
	_, err = store.New(pool).EventInsert(ctx, p)
	require.ErrorContains(t, err, "refuse_all")
	require.Zero(t, stored(), "nothing of the event is stored")

	// Inside a write transaction.
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := store.New(tx).EventInsert(ctx, p)
		return err
	})
	require.ErrorContains(t, err, "refuse_all")
	require.Zero(t, stored())

	// An event without targets does not touch the outbox.
	plain := author.Signed(t, 9, eventtest.Tag("p", target), eventtest.Content("no targets"))
	inserted, err := store.New(pool).EventInsert(ctx, store.EventInsertParams{CommunityID: cid, Event: &plain})
	require.NoError(t, err)
	require.True(t, inserted)

	_, err = pool.Exec(ctx, `ALTER TABLE operator_listener_outbox DROP CONSTRAINT refuse_all`)
	require.NoError(t, err)
	inserted, err = store.New(pool).EventInsert(ctx, p)
	require.NoError(t, err)
	require.True(t, inserted)
	require.Equal(t, 4, stored(), "the event, its mention, its intent and its outbox row")
}

// outboxSpec describes an outbox row written directly; offsets are seconds
// relative to now().
type outboxSpec struct {
	listener, community string
	state               string // "" = pending
	attempts            int
	nextIn              int  // next_attempt_at = now() + nextIn
	leaseIn             *int // lease_until = now() + leaseIn; nil = NULL
	createdAgo          int  // created_at = now() - createdAgo
}

// outboxInsert writes a row and returns its id and event id.
func outboxInsert(t *testing.T, q pg.Querier, o outboxSpec) (id, eventID string) {
	t.Helper()
	state := o.state
	if state == "" {
		state = "pending"
	}
	var lease *float64
	var claim *string
	if o.leaseIn != nil {
		v := float64(*o.leaseIn)
		lease = &v
		c := "00000000-0000-4000-8000-000000000001"
		claim = &c
	}
	e := make([]byte, 32)
	_, _ = rand.Read(e)
	require.NoError(t, q.QueryRow(context.Background(), `INSERT INTO operator_listener_outbox
			(listener_pubkey, target_pubkey, community_id, event_id, event_kind, event_created_at,
			 state, attempts, next_attempt_at, lease_until, claim_id, created_at)
		VALUES ($1, $2, $3, $4, 9, to_timestamp(1700000000), $5, $6, now() + make_interval(secs => $7),
			now() + make_interval(secs => $8), $9, now() - make_interval(secs => $10))
		RETURNING id::text`,
		unhex(t, o.listener), unhex(t, pubkey()), o.community, e, state, o.attempts, float64(o.nextIn), lease, claim,
		float64(o.createdAgo)).Scan(&id))
	return id, hex.EncodeToString(e)
}

// outboxState is "state attempts claim_id-is-null lease-is-null" of a row,
// or "gone".
func outboxState(t *testing.T, q pg.Querier, id string) string {
	t.Helper()
	var s string
	err := q.QueryRow(context.Background(), `SELECT concat_ws(' ', state, attempts, claim_id IS NULL, lease_until IS NULL)
		FROM operator_listener_outbox WHERE id = $1`, id).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return "gone"
	}
	require.NoError(t, err)
	return s
}

func claimedIDs(ds []store.ListenerDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func intp(v int) *int { return &v }

func claimWindow() (since, lease time.Time) {
	now := time.Now()
	return now.Add(-15 * time.Minute), now.Add(30 * time.Second)
}

func TestListenerClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)

	t.Run("OnlyDueEligibleRoutableRowsOfLiveCommunities", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool)
		scratch := fixture.Community(t, pool).ID
		a, b, unused := pubkey(), pubkey(), pubkey()
		due, dueEvent := outboxInsert(t, pool, outboxSpec{listener: a, community: c.ID, nextIn: -1, createdAgo: 5})
		expired, _ := outboxInsert(t, pool, outboxSpec{listener: a, community: c.ID, state: "sending", attempts: 3,
			nextIn: -60, leaseIn: intp(-1), createdAgo: 60})
		skipped := map[string]string{}
		for name, o := range map[string]outboxSpec{
			"NotRoutable":   {listener: b, community: c.ID, nextIn: -1},
			"Exhausted":     {listener: a, community: c.ID, attempts: 9, nextIn: -1},
			"NotDue":        {listener: a, community: c.ID, nextIn: 60},
			"TooOld":        {listener: a, community: c.ID, nextIn: -1, createdAgo: 15*60 + 5},
			"LeaseActive":   {listener: a, community: c.ID, state: "sending", attempts: 1, nextIn: -1, leaseIn: intp(20)},
			"CommunityGone": {listener: a, community: scratch, nextIn: -1},
		} {
			id, _ := outboxInsert(t, pool, o)
			skipped[name] = id
		}
		_, err := pool.Exec(ctx, `DELETE FROM communities WHERE id = $1`, scratch)
		require.NoError(t, err)
		before := map[string]string{}
		for name, id := range skipped {
			before[name] = outboxState(t, pool, id)
		}

		since, lease := claimWindow()
		got, err := store.New(pool).ListenerClaim(ctx, []string{unused, strings.ToUpper(a)}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Equal(t, []string{expired, due}, claimedIDs(got), "ordered by next_attempt_at")
		claim := got[0].ClaimID
		require.NotEmpty(t, claim)
		require.Equal(t, store.ListenerDelivery{ID: due, ClaimID: claim, Listener: a, Target: got[1].Target,
			CommunityID: c.ID, CommunityHost: c.Host, EventID: dueEvent, EventKind: 9, EventCreatedAt: 1700000000, Attempts: 1}, got[1])
		require.True(t, event.IsHex64(got[1].Target))
		require.Equal(t, 4, got[0].Attempts, "a reclaimed row spends an attempt")
		require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM operator_listener_outbox WHERE claim_id = $1 AND state = 'sending'
			AND lease_until BETWEEN $2::timestamptz - interval '1 ms' AND $2::timestamptz + interval '1 ms'`, claim, lease))
		for name, id := range skipped {
			require.Equal(t, before[name], outboxState(t, pool, id), name)
		}

		got, err = store.New(pool).ListenerClaim(ctx, []string{a, b}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Equal(t, []string{skipped["NotRoutable"]}, claimedIDs(got), "leased rows are not claimed again; b is routable now")
	})

	t.Run("GoneCommunityTakesNoSlot", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool).ID
		scratch := fixture.Community(t, pool).ID
		l := pubkey()
		orphan, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: scratch, nextIn: -100})
		live, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: c, nextIn: -1})
		_, err := pool.Exec(ctx, `DELETE FROM communities WHERE id = $1`, scratch)
		require.NoError(t, err)
		since, lease := claimWindow()
		got, err := store.New(pool).ListenerClaim(ctx, []string{l}, 1, since, lease)
		require.NoError(t, err)
		require.Equal(t, []string{live}, claimedIDs(got), "the orphan, due first, is not a candidate")
		require.Equal(t, "pending 0 t t", outboxState(t, pool, orphan))
	})

	t.Run("NoRoutableListener", func(t *testing.T) {
		t.Parallel()
		since, lease := claimWindow()
		got, err := store.New(pool).ListenerClaim(ctx, nil, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Empty(t, got)
		_, err = store.New(pool).ListenerClaim(ctx, []string{pubkey()}, 0, since, lease)
		require.Error(t, err)
		_, err = store.New(pool).ListenerClaim(ctx, []string{"xyz"}, 1, since, lease)
		require.Error(t, err)
	})

	t.Run("LimitTen", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool).ID
		l := pubkey()
		var all []string
		for i := range 12 {
			id, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: c, nextIn: -100 + i})
			all = append(all, id)
		}
		since, lease := claimWindow()
		got, err := store.New(pool).ListenerClaim(ctx, []string{l}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Equal(t, all[:10], claimedIDs(got), "the ten due first")
		got, err = store.New(pool).ListenerClaim(ctx, []string{l}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Equal(t, all[10:], claimedIDs(got))
	})

	t.Run("SkipsLockedRows", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool).ID
		l := pubkey()
		var all []string
		for i := range 5 {
			id, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: c, nextIn: -100 + i})
			all = append(all, id)
		}
		since, lease := claimWindow()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		first, err := store.New(tx).ListenerClaim(ctx, []string{l}, 3, since, lease)
		require.NoError(t, err)
		require.Equal(t, all[:3], claimedIDs(first))

		// The first claim has not committed: its rows are locked, and a
		// second claim takes the others without waiting.
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		second, err := store.New(pool).ListenerClaim(wait, []string{l}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Equal(t, all[3:], claimedIDs(second))
		require.NotEqual(t, first[0].ClaimID, second[0].ClaimID, "a fresh token per claim")
		require.NoError(t, tx.Commit(ctx))
		third, err := store.New(pool).ListenerClaim(ctx, []string{l}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Empty(t, third)
	})

	t.Run("ConcurrentClaimsNeverShareARow", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool).ID
		l := pubkey()
		want := map[string]bool{}
		for range 40 {
			id, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: c, nextIn: -1})
			want[id] = true
		}
		since, lease := claimWindow()
		var (
			mu   sync.Mutex
			seen = map[string]int{}
			wg   sync.WaitGroup
			errs = make(chan error, 4)
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := store.New(pool).ListenerClaim(ctx, []string{l}, 3, since, lease)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, d := range got {
						seen[d.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, seen, len(want))
		for id, n := range seen {
			require.True(t, want[id])
			require.Equal(t, 1, n, "row %s claimed %d times", id, n)
		}
		require.Equal(t, 40, count(t, pool, `SELECT count(*) FROM operator_listener_outbox WHERE listener_pubkey = $1
			AND state = 'sending' AND attempts = 1`, unhex(t, l)))
	})

	t.Run("FencedTransitions", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool).ID
		l := pubkey()
		id, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: c, nextIn: -1})
		since, lease := claimWindow()
		claim := func() store.ListenerDelivery {
			t.Helper()
			got, err := store.New(pool).ListenerClaim(ctx, []string{l}, store.ListenerClaimLimit, since, lease)
			require.NoError(t, err)
			require.Len(t, got, 1)
			return got[0]
		}
		first := claim()
		require.Equal(t, 1, first.Attempts)

		// The lease passes: another claim takes the row with a new token.
		_, err := pool.Exec(ctx, `UPDATE operator_listener_outbox SET lease_until = now() - interval '1 second' WHERE id = $1`, id)
		require.NoError(t, err)
		second := claim()
		require.NotEqual(t, first.ClaimID, second.ClaimID)
		require.Equal(t, 2, second.Attempts)

		// The stale token changes nothing.
		ok, err := store.New(pool).ListenerComplete(ctx, id, first.ClaimID)
		require.NoError(t, err)
		require.False(t, ok)
		ok, err = store.New(pool).ListenerRetry(ctx, id, first.ClaimID, time.Now())
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, "sending 2 f f", outboxState(t, pool, id))

		// Retry with the live token: pending, unclaimed, due at next.
		next := time.Now().Add(4 * time.Second)
		ok, err = store.New(pool).ListenerRetry(ctx, id, second.ClaimID, next)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "pending 2 t t", outboxState(t, pool, id))
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM operator_listener_outbox WHERE id = $1
			AND next_attempt_at BETWEEN $2::timestamptz - interval '1 ms' AND $2::timestamptz + interval '1 ms'`, id, next))
		got, err := store.New(pool).ListenerClaim(ctx, []string{l}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Empty(t, got, "not due before next")

		// A pending row is no one's: neither token completes or retries it.
		for _, tok := range []string{first.ClaimID, second.ClaimID} {
			ok, err = store.New(pool).ListenerComplete(ctx, id, tok)
			require.NoError(t, err)
			require.False(t, ok)
			ok, err = store.New(pool).ListenerRetry(ctx, id, tok, time.Now())
			require.NoError(t, err)
			require.False(t, ok)
		}
		require.Equal(t, "pending 2 t t", outboxState(t, pool, id))
		// A pending row that still carries a token is not claimed either.
		_, err = pool.Exec(ctx, `UPDATE operator_listener_outbox SET claim_id = $2 WHERE id = $1`, id, second.ClaimID)
		require.NoError(t, err)
		ok, err = store.New(pool).ListenerComplete(ctx, id, second.ClaimID)
		require.NoError(t, err)
		require.False(t, ok, "state must be sending")
		ok, err = store.New(pool).ListenerRetry(ctx, id, second.ClaimID, time.Now())
		require.NoError(t, err)
		require.False(t, ok, "state must be sending")

		_, err = pool.Exec(ctx, `UPDATE operator_listener_outbox SET next_attempt_at = now() WHERE id = $1`, id)
		require.NoError(t, err)
		third := claim()
		require.Equal(t, 3, third.Attempts)
		ok, err = store.New(pool).ListenerComplete(ctx, id, third.ClaimID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "gone", outboxState(t, pool, id))
		ok, err = store.New(pool).ListenerComplete(ctx, id, third.ClaimID)
		require.NoError(t, err)
		require.False(t, ok, "already gone")
	})

	t.Run("RetryRefusedAtTheNinthAttempt", func(t *testing.T) {
		t.Parallel()
		c := fixture.Community(t, pool).ID
		l := pubkey()
		id, _ := outboxInsert(t, pool, outboxSpec{listener: l, community: c, attempts: 8, nextIn: -1})
		since, lease := claimWindow()
		got, err := store.New(pool).ListenerClaim(ctx, []string{l}, store.ListenerClaimLimit, since, lease)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, store.ListenerMaxAttempts, got[0].Attempts)
		ok, err := store.New(pool).ListenerRetry(ctx, id, got[0].ClaimID, time.Now())
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, "sending 9 f f", outboxState(t, pool, id), "still claimed")
		ok, err = store.New(pool).ListenerComplete(ctx, id, got[0].ClaimID)
		require.NoError(t, err)
		require.True(t, ok, "failing it deletes it")
		require.Equal(t, "gone", outboxState(t, pool, id))
	})
}

func TestListenerReapers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	c := fixture.Community(t, pool).ID
	a, b := pubkey(), pubkey()

	oldPending, _ := outboxInsert(t, pool, outboxSpec{listener: a, community: c, createdAgo: 15*60 + 5})
	oldSending, _ := outboxInsert(t, pool, outboxSpec{listener: b, community: c, state: "sending", attempts: 2,
		leaseIn: intp(20), createdAgo: 16 * 60})
	oldOrphan, _ := outboxInsert(t, pool, outboxSpec{listener: a, community: "5b0e6a38-8a1c-4a57-9d3e-7c1f1c5f2d10",
		createdAgo: 20 * 60})
	recent, _ := outboxInsert(t, pool, outboxSpec{listener: a, community: c, createdAgo: 14 * 60})

	n, err := store.New(pool).ListenerReapOutbox(ctx, 15*time.Minute)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	for _, id := range []string{oldPending, oldSending, oldOrphan} {
		require.Equal(t, "gone", outboxState(t, pool, id))
	}
	require.Equal(t, "pending 0 t t", outboxState(t, pool, recent))

	t1, t2, t3 := pubkey(), pubkey(), pubkey()
	require.NoError(t, store.New(pool).ListenerRegister(ctx, a, []string{t1, t2}))
	require.NoError(t, store.New(pool).ListenerRegister(ctx, b, []string{t3}))
	_, err = pool.Exec(ctx, `UPDATE operator_listener_pubkeys SET created_at = now() - interval '30 days 1 minute'
		WHERE target_pubkey = ANY($1::bytea[])`, [][]byte{unhex(t, t1), unhex(t, t3)})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE operator_listener_pubkeys SET created_at = now() - interval '29 days'
		WHERE target_pubkey = $1`, unhex(t, t2))
	require.NoError(t, err)
	n, err = store.New(pool).ListenerReapRegistrations(ctx, 30*24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM operator_listener_pubkeys`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM operator_listener_pubkeys WHERE target_pubkey = $1`, unhex(t, t2)))

	n, err = store.New(pool).ListenerReapOutbox(ctx, 15*time.Minute)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to reap")
}

func TestListenerForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	gone, kept := pubkey(), pubkey()
	require.NoError(t, b.s.ListenerRegister(ctx, gone, []string{pubkey(), pubkey()}))
	require.NoError(t, b.s.ListenerRegister(ctx, kept, []string{pubkey()}))
	for range 3 {
		outboxInsert(t, b.tx, outboxSpec{listener: gone, community: b.a})
	}
	outboxInsert(t, b.tx, outboxSpec{listener: gone, community: b.b, state: "sending", attempts: 1, leaseIn: intp(20)})
	keptRow, _ := outboxInsert(t, b.tx, outboxSpec{listener: kept, community: b.a})

	regs, queued, err := b.s.ListenerForget(ctx, strings.ToUpper(gone))
	require.NoError(t, err)
	require.Equal(t, [2]int64{2, 4}, [2]int64{regs, queued})
	require.Zero(t, count(t, b.tx, `SELECT count(*) FROM operator_listener_pubkeys WHERE listener_pubkey = $1`, unhex(t, gone)))
	require.Zero(t, count(t, b.tx, `SELECT count(*) FROM operator_listener_outbox WHERE listener_pubkey = $1`, unhex(t, gone)))
	require.Equal(t, 1, count(t, b.tx, `SELECT count(*) FROM operator_listener_pubkeys WHERE listener_pubkey = $1`, unhex(t, kept)))
	require.Equal(t, "pending 0 t t", outboxState(t, b.tx, keptRow))

	regs, queued, err = b.s.ListenerForget(ctx, gone)
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, 0}, [2]int64{regs, queued}, "again: nothing left")
	_, _, err = b.s.ListenerForget(ctx, "xyz")
	require.Error(t, err)
}
