package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// auEnv is a relay with audit on and the deployment community's id.
type auEnv struct {
	r   *relaytest.Relay
	cid string
}

func auSetup(t *testing.T, env map[string]string) *auEnv {
	t.Helper()
	r := relaytest.Start(t, env)
	return &auEnv{r: r, cid: communityID(t, r, r.Host)}
}

// stop drains the relay — observations written, pending intents chained —
// and returns a pool on its database.
func (e *auEnv) stop(t *testing.T) *pgxpool.Pool {
	t.Helper()
	e.r.Stop()
	pool, err := pg.Open(context.Background(), e.r.DBURL, pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// auEntry is one audit_log row as the recipes show it.
type auEntry struct {
	Seq    int64
	Action string
	Actor  string
	Object string
	Detail map[string]any
	Raw    string
}

func auEntries(t *testing.T, pool *pgxpool.Pool, cid string) []auEntry {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq, action, COALESCE(encode(actor_pubkey, 'hex'), ''),
		COALESCE(object_id, ''), detail::text FROM audit_log WHERE community_id = $1 ORDER BY seq`, cid)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auEntry, error) {
		var e auEntry
		if err := r.Scan(&e.Seq, &e.Action, &e.Actor, &e.Object, &e.Raw); err != nil {
			return e, err
		}
		return e, json.Unmarshal([]byte(e.Raw), &e.Detail)
	})
	require.NoError(t, err)
	for i, e := range out {
		require.Equal(t, int64(i+1), e.Seq, "seq is contiguous")
	}
	return out
}

// auFind returns the entries with the action and object.
func auFind(es []auEntry, action, object string) []auEntry {
	var out []auEntry
	for _, e := range es {
		if e.Action == action && (object == "" || e.Object == object) {
			out = append(out, e)
		}
	}
	return out
}

// auVerified requires the community's chain to verify and the outbox to be empty.
func auVerified(t *testing.T, pool *pgxpool.Pool, cid string) {
	t.Helper()
	ok, err := audit.Verify(context.Background(), pool, audit.VerifyParams{CommunityID: cid, From: 1, To: 1 << 40})
	require.NoError(t, err)
	require.True(t, ok)
	n, err := audit.PendingCount(context.Background(), pool, cid)
	require.NoError(t, err)
	require.Zero(t, n, "shutdown chained every pending intent")
}

func auNonce() eventtest.Option { return eventtest.Content("n-" + uuid.NewString()[:8]) }

// auChannel creates an open channel as owner and returns its id.
func auChannel(t *testing.T, w *relaytest.WS, owner eventtest.Key) (string, event.Event) {
	t.Helper()
	id := uuid.NewString()
	ev := owner.Signed(t, 9007, auNonce(), eventtest.Channel(id), eventtest.Tag("name", "c-"+id[:8]))
	w.MustPublish(ev)
	return id, ev
}

// Checks 18, 19, 20 and 21: what the event transactions record.
func TestAuditRecordsActions(t *testing.T) {
	t.Parallel()
	e := auSetup(t, nil)
	owner, member := eventtest.NewKey(), eventtest.NewKey()
	w := rpAuthed(t, e.r, "", owner)
	ch, create := auChannel(t, w, owner)

	// 18: one kind 9 over WS, one over POST /events, a resubmission.
	msg := owner.Signed(t, 9, auNonce(), eventtest.Channel(ch))
	w.MustPublish(msg)
	ok, reason := w.Publish(msg)
	require.True(t, ok)
	require.Equal(t, "duplicate:", reason)
	viaHTTP := owner.Signed(t, 9, auNonce(), eventtest.Channel(ch))
	body, _ := json.Marshal(viaHTTP)
	status, _ := e.r.HTTP(t, "", "POST", "/events", &owner, body)
	require.Equal(t, 200, status)

	// 19: an admin's put-user.
	put := owner.Signed(t, 9000, auNonce(), eventtest.Channel(ch), eventtest.Tag("p", member.PubKey))
	w.MustPublish(put)

	// 20: a NIP-09 deletion, a 9005, a superseded replaceable.
	doomed := owner.Signed(t, 9, auNonce(), eventtest.Channel(ch))
	w.MustPublish(doomed)
	del := owner.Signed(t, 5, eventtest.Tag("e", doomed.ID))
	w.MustPublish(del)
	wm := rpAuthed(t, e.r, "", member)
	byMember := member.Signed(t, 9, auNonce(), eventtest.Channel(ch))
	wm.MustPublish(byMember)
	adminDel := owner.Signed(t, 9005, auNonce(), eventtest.Channel(ch), eventtest.Tag("e", byMember.ID))
	w.MustPublish(adminDel)
	w.MustPublish(owner.Signed(t, 0, eventtest.Content(`{"name":"a"}`), eventtest.At(time.Now().Unix()-10)))
	w.MustPublish(owner.Signed(t, 0, eventtest.Content(`{"name":"b"}`)))

	// 21: update (name), join and leave, delete.
	joiner := eventtest.NewKey()
	wj := rpAuthed(t, e.r, "", joiner)
	wj.MustPublish(joiner.Signed(t, 9021, auNonce(), eventtest.Channel(ch)))
	wj.MustPublish(joiner.Signed(t, 9022, auNonce(), eventtest.Channel(ch)))
	edit := owner.Signed(t, 9002, auNonce(), eventtest.Channel(ch), eventtest.Tag("name", "renamed"))
	w.MustPublish(edit)
	drop := owner.Signed(t, 9008, auNonce(), eventtest.Channel(ch))
	w.MustPublish(drop)

	pool := e.stop(t)
	es := auEntries(t, pool, e.cid)
	auVerified(t, pool, e.cid)

	for _, ev := range []event.Event{msg, viaHTTP} {
		got := auFind(es, "event_created", ev.ID)
		require.Len(t, got, 1, "exactly one event_created, the duplicate added nothing")
		require.Equal(t, owner.PubKey, got[0].Actor)
		require.Equal(t, `{"channel_id": "`+ch+`", "event_kind": 9}`, got[0].Raw)
	}

	added := auFind(es, "member_added", member.PubKey)
	require.Len(t, added, 1)
	require.Equal(t, owner.PubKey, added[0].Actor)
	require.Equal(t, map[string]any{"scope": "channel", "channel_id": ch, "role": "member", "previous_role": nil, "event_id": put.ID}, added[0].Detail)
	require.Len(t, auFind(es, "event_created", put.ID), 1)

	// Every stored event has exactly one event_created; relay-signed ones
	// carry the human who caused them, never the relay key.
	relayPub := event.PubKey(e.r.App.RelayKey())
	rows, err := pool.Query(context.Background(), `SELECT encode(id, 'hex'), encode(pubkey, 'hex') FROM events WHERE community_id = $1`, e.cid)
	require.NoError(t, err)
	stored := map[string]string{}
	for rows.Next() {
		var id, pub string
		require.NoError(t, rows.Scan(&id, &pub))
		stored[id] = pub
	}
	require.NoError(t, rows.Err())
	relaySigned := 0
	for id, pub := range stored {
		got := auFind(es, "event_created", id)
		require.Len(t, got, 1, "event %s", id)
		require.NotEqual(t, relayPub, got[0].Actor)
		if pub == relayPub {
			relaySigned++
		}
	}
	require.Greater(t, relaySigned, 3)
	require.Len(t, auFind(es, "event_created", ""), len(stored))

	deleted := auFind(es, "event_deleted", doomed.ID)
	require.Len(t, deleted, 1)
	require.Equal(t, map[string]any{"event_kind": 9.0, "channel_id": ch, "deletion_event_id": del.ID, "deletion_kind": 5.0}, deleted[0].Detail)
	require.Len(t, auFind(es, "event_created", del.ID), 1)
	adminDeleted := auFind(es, "event_deleted", byMember.ID)
	require.Len(t, adminDeleted, 1)
	require.Equal(t, owner.PubKey, adminDeleted[0].Actor)
	require.EqualValues(t, 9005, adminDeleted[0].Detail["deletion_kind"])
	require.Len(t, auFind(es, "event_deleted", ""), 2, "a superseded replaceable is not a deletion")

	created := auFind(es, "channel_created", ch)
	require.Len(t, created, 1)
	require.Equal(t, map[string]any{"channel_type": "stream", "visibility": "open", "event_id": create.ID}, created[0].Detail)
	updated := auFind(es, "channel_updated", ch)
	require.Len(t, updated, 1)
	require.Equal(t, map[string]any{"changes": []any{"name"}, "event_id": edit.ID}, updated[0].Detail)
	require.NotContains(t, updated[0].Raw, "renamed", "names only, never values")
	require.Len(t, auFind(es, "channel_deleted", ch), 1)
	require.Equal(t, "member_added", auFind(es, "member_added", joiner.PubKey)[0].Action)
	left := auFind(es, "member_removed", joiner.PubKey)
	require.Len(t, left, 1)
	require.Equal(t, "left", left[0].Detail["reason"])
	require.Equal(t, joiner.PubKey, left[0].Actor)
	creator := auFind(es, "member_added", owner.PubKey)
	require.Len(t, creator, 1)
	require.Equal(t, "owner", creator[0].Detail["role"])

	// R4 pivots from an entry to its event; R10 is empty, then
	// lists an event inserted by manual SQL.
	var kind int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT kind FROM events WHERE community_id = $1 AND id = decode($2, 'hex')`,
		e.cid, msg.ID).Scan(&kind))
	require.Equal(t, 9, kind)
	require.Empty(t, r10(t, pool, e.cid))
	manual := owner.Signed(t, 9, auNonce(), eventtest.Channel(ch))
	_, err = pool.Exec(context.Background(), `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
		VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), now(), 9, '[]', '', decode($4, 'hex'), $5)`, e.cid, manual.ID, manual.PubKey, manual.Sig, ch)
	require.NoError(t, err)
	require.Equal(t, []string{manual.ID}, r10(t, pool, e.cid))
}

// r10 is recipe R10 of docs/PROTOCOL.md §13.10: events with no audit entry.
func r10(t *testing.T, pool *pgxpool.Pool, cid string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT encode(e.id, 'hex') AS event_id
		FROM events e
		WHERE e.community_id = $1 AND e.received_at >= now() - interval '1 hour'
		  AND NOT EXISTS (SELECT 1 FROM audit_log a
		                   WHERE a.community_id = e.community_id AND a.action = 'event_created'
		                     AND a.object_id = encode(e.id, 'hex'))
		  AND NOT EXISTS (SELECT 1 FROM audit_outbox o
		                   WHERE o.community_id = e.community_id
		                     AND o.dedupe_key = 'event_created:' || encode(e.id, 'hex'))
		  AND NOT EXISTS (SELECT 1 FROM audit_intent_groups g
		                   WHERE g.community_id = e.community_id
		                     AND encode(e.id, 'hex') = ANY (g.object_ids))`, cid)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// AUTH failures and successes, with no secret in any row.
func TestAuditAuthentication(t *testing.T) {
	t.Parallel()
	owner := eventtest.NewKey()
	e := auSetup(t, map[string]string{"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true", "RELAY_OWNER_PUBKEY": owner.PubKey})

	forger := eventtest.NewKey()
	w := e.r.Dial(t, "")
	bad := forger.Signed(t, event.KindAuth, eventtest.Content(""), eventtest.Tag("challenge", w.Challenge),
		eventtest.Tag("relay", "ws://"+e.r.Host))
	bad.Sig = strings.Repeat("0", 128)
	w.Send("AUTH", bad)
	require.Equal(t, false, w.Next()[2])

	stranger := eventtest.NewKey()
	ws := e.r.Dial(t, "")
	ev := stranger.Signed(t, event.KindAuth, eventtest.Content(""), eventtest.Tag("challenge", ws.Challenge),
		eventtest.Tag("relay", "ws://"+e.r.Host))
	ws.Send("AUTH", ev)
	require.Equal(t, false, ws.Next()[2])

	for range 3 {
		rpAuthed(t, e.r, "", owner) // one auth_success per key and method per hour
	}
	status, _ := e.r.HTTP(t, "", "POST", "/query", &owner, []byte(`[{"kinds":[9],"limit":1}]`))
	require.Equal(t, 200, status)
	challenges := []string{w.Challenge, ws.Challenge}

	pool := e.stop(t)
	es := auEntries(t, pool, e.cid)
	auVerified(t, pool, e.cid)
	fails := auFind(es, "auth_failure", "")
	require.Len(t, fails, 2)
	require.Equal(t, "", fails[0].Actor, "a forged signature puts no key in the record")
	require.Equal(t, map[string]any{"method": "nip42", "reason": "invalid"}, fails[0].Detail)
	require.Equal(t, stranger.PubKey, fails[1].Actor)
	require.Equal(t, map[string]any{"method": "nip42", "reason": "not_relay_member"}, fails[1].Detail)
	oks := auFind(es, "auth_success", "")
	require.Len(t, oks, 2)
	require.Equal(t, map[string]any{"method": "nip42"}, oks[0].Detail)
	require.Equal(t, map[string]any{"method": "nip98"}, oks[1].Detail)
	for _, en := range es {
		for _, secret := range append(challenges, bad.Sig, ev.Sig, ev.ID, "Nostr ") {
			require.NotContains(t, en.Raw, secret)
		}
	}
}

// Checks 28 and 35: an intent that cannot be written fails the event on both
// paths; a checkpoint kind is refused.
func TestAuditIntentFailure(t *testing.T) {
	t.Parallel()
	e := auSetup(t, nil)
	owner := eventtest.NewKey()
	w := rpAuthed(t, e.r, "", owner)
	ch, _ := auChannel(t, w, owner)

	cp := owner.Signed(t, audit.KindCheckpoint, eventtest.Tag("host", e.r.Host), eventtest.Tag("seq", "1"),
		eventtest.Tag("hash", strings.Repeat("ab", 32)))
	ok, reason := w.Publish(cp)
	require.False(t, ok)
	require.Equal(t, "restricted: relay-only kind", reason)

	_, err := e.r.App.Pool().Exec(context.Background(), `CREATE FUNCTION test_fail_intent() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected intent failure' USING TABLE = TG_TABLE_NAME; END $$;
		CREATE TRIGGER test_fail_intent BEFORE INSERT ON audit_outbox FOR EACH ROW EXECUTE FUNCTION test_fail_intent();
		CREATE TRIGGER test_fail_intent BEFORE INSERT ON audit_intent_groups FOR EACH ROW EXECUTE FUNCTION test_fail_intent();`)
	require.NoError(t, err)
	plain := owner.Signed(t, 9, auNonce(), eventtest.Channel(ch))
	ok, reason = w.Publish(plain) // the one-statement hot path
	require.False(t, ok)
	require.Equal(t, "error: internal server error", reason)
	edit := owner.Signed(t, 9002, auNonce(), eventtest.Channel(ch), eventtest.Tag("name", "x"))
	ok, reason = w.Publish(edit) // the transaction path
	require.False(t, ok)
	require.Equal(t, "error: internal server error", reason)
	require.Equal(t, 2.0, testutil.ToFloat64(e.r.App.Metrics().Audit.SendErrors))
	for _, id := range []string{plain.ID, edit.ID} {
		var n int
		require.NoError(t, e.r.App.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM events WHERE community_id = $1 AND id = decode($2, 'hex')`, e.cid, id).Scan(&n))
		require.Zero(t, n, "the event is not stored")
	}
}

// Audit off writes no intent; the gauge says so.
func TestAuditDisabled(t *testing.T) {
	t.Parallel()
	on := auSetup(t, map[string]string{"BUZZ_AUDIT_ENABLED": ""})
	require.Equal(t, 1.0, testutil.ToFloat64(on.r.App.Metrics().Audit.Enabled))

	e := auSetup(t, map[string]string{"BUZZ_AUDIT_ENABLED": "false"})
	require.Equal(t, 0.0, testutil.ToFloat64(e.r.App.Metrics().Audit.Enabled))
	require.Nil(t, e.r.App.Audit())
	owner := eventtest.NewKey()
	w := rpAuthed(t, e.r, "", owner)
	ch, _ := auChannel(t, w, owner)
	w.MustPublish(owner.Signed(t, 9, auNonce(), eventtest.Channel(ch)))
	pool := e.stop(t)
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM audit_outbox) + (SELECT count(*) FROM audit_intent_groups) + (SELECT count(*) FROM audit_log)`).Scan(&n))
	require.Zero(t, n)
}
