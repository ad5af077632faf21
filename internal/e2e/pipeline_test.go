package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// communityID returns the id of the community a tenant host resolves to.
func communityID(t *testing.T, r *relaytest.Relay, host string) string {
	t.Helper()
	c, err := r.App.Store().CommunityByHost(context.Background(), host)
	require.NoError(t, err)
	return c.ID
}

func pubBytes(t *testing.T, k eventtest.Key) []byte {
	t.Helper()
	b, err := hex.DecodeString(k.PubKey)
	require.NoError(t, err)
	return b
}

func idBytes(t *testing.T, id string) []byte {
	t.Helper()
	b, err := hex.DecodeString(id)
	require.NoError(t, err)
	return b
}

// channelOpts describes a channel inserted directly with SQL (the NIP-29
// commands that create channels are not implemented yet).
type channelOpts struct {
	private  bool
	archived bool
	members  []eventtest.Key
}

// insertChannel creates a channel in community cid and returns its UUID.
func insertChannel(t *testing.T, r *relaytest.Relay, cid string, creator eventtest.Key, o channelOpts) string {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()
	visibility := "open"
	if o.private {
		visibility = "private"
	}
	_, err := r.App.Pool().Exec(ctx, `INSERT INTO channels (community_id, id, name, visibility, created_by)
		VALUES ($1, $2, $3, $4::channel_visibility, $5)`, cid, id, "c-"+id[:8], visibility, pubBytes(t, creator))
	require.NoError(t, err)
	if o.archived {
		_, err := r.App.Pool().Exec(ctx, `UPDATE channels SET archived_at = now() WHERE community_id = $1 AND id = $2`, cid, id)
		require.NoError(t, err)
	}
	for _, m := range o.members {
		_, err := r.App.Pool().Exec(ctx, `INSERT INTO channel_members (community_id, channel_id, pubkey, role)
			VALUES ($1, $2, $3, 'member')`, cid, id, pubBytes(t, m))
		require.NoError(t, err)
	}
	return id
}

// rowState is what the events table holds for one id in one community.
type rowState struct {
	found   bool
	live    bool
	channel *string
}

func eventRow(t *testing.T, r *relaytest.Relay, cid, id string) rowState {
	t.Helper()
	var st rowState
	err := r.App.Pool().QueryRow(context.Background(), `SELECT deleted_at IS NULL, channel_id::text FROM events
		WHERE community_id = $1 AND id = $2`, cid, idBytes(t, id)).Scan(&st.live, &st.channel)
	if err == nil {
		st.found = true
		return st
	}
	require.ErrorContains(t, err, "no rows")
	return st
}

// countRows runs a count(*) query.
func countRows(t *testing.T, r *relaytest.Relay, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, r.App.Pool().QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// query runs POST /query and returns the event ids.
func query(t *testing.T, r *relaytest.Relay, host string, reader eventtest.Key, filters string) []string {
	t.Helper()
	status, body := r.HTTP(t, host, http.MethodPost, "/query", &reader, []byte(filters))
	require.Equal(t, http.StatusOK, status, string(body))
	var evs []event.Event
	require.NoError(t, json.Unmarshal(body, &evs))
	ids := []string{}
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	return ids
}

func ids(evs []event.Event) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

func errorBody(t *testing.T, msg string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"error": msg})
	require.NoError(t, err)
	return string(b)
}

// futureDrift returns a created_at 901 s ahead of the server clock for any
// request answered within 200 ms.
func futureDrift() int64 { return time.Now().Add(200*time.Millisecond).Unix() + 901 }

// pastDrift returns a created_at 901 s behind the server clock.
func pastDrift() int64 { return time.Now().Unix() - 901 }

// engramContent is a valid NIP-44 v2 envelope body: std base64 of 99 bytes
// starting with first.
func engramContent(first byte) string {
	raw := make([]byte, 99)
	raw[0] = first
	for i := 1; i < len(raw); i++ {
		raw[i] = byte(i)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

func hex64(b byte) string { return strings.Repeat(hex.EncodeToString([]byte{b}), 32) }

// refusalCase is one row of TestPipelineRefusals: an invalid event and the answer both
// doors must give. build is called once per door.
type refusalCase struct {
	name string
	// build returns the event and the pipeline message.
	build func(t *testing.T) (event.Event, string)
	// wsMsg overrides the WebSocket answer when the door answers first (W2).
	wsMsg string
	// httpOnly rows are refused only on the HTTP door.
	httpOnly bool
	// status is the HTTP status; 0 means 400.
	status int
}

// TestPipelineRefusals: one invalid event per pipeline step that
// exists today, sent as a WebSocket EVENT and as POST /events; the OK
// message and the HTTP error body are the same string.
func TestPipelineRefusals(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	cid := communityID(t, r, r.Host)
	alice, bob := eventtest.NewKey(), eventtest.NewKey()
	private := insertChannel(t, r, cid, bob, channelOpts{private: true, members: []eventtest.Key{bob}})
	archived := insertChannel(t, r, cid, bob, channelOpts{archived: true})
	bobNote := bob.Signed(t, 1, eventtest.Content("bob's note"))
	status, body := r.PostEvent(t, "", bob, bobNote)
	require.Equal(t, http.StatusOK, status, body)

	fixed := func(kind int, msg string, opts ...eventtest.Option) func(t *testing.T) (event.Event, string) {
		return func(t *testing.T) (event.Event, string) { return alice.Signed(t, kind, opts...), msg }
	}
	cases := []refusalCase{
		{name: "Step1AuthKind", wsMsg: "invalid: AUTH events cannot be submitted via EVENT",
			build: fixed(22242, "invalid: AUTH events cannot be submitted", eventtest.Content(""),
				eventtest.Tag("challenge", "x"), eventtest.Tag("relay", "ws://"+r.Host))},
		{name: "Step2MemberAdded", build: fixed(44100, "invalid: membership notifications are relay-signed only", eventtest.Tag("p", alice.PubKey))},
		{name: "Step2MemberRemoved", build: fixed(44101, "invalid: membership notifications are relay-signed only", eventtest.Tag("p", alice.PubKey))},
		{name: "Step3GiftWrapOverHTTP", httpOnly: true, build: fixed(1059, "invalid: kind 1059 is only accepted via WebSocket", eventtest.Tag("p", bob.PubKey))},
		{name: "Step3TypingOverHTTP", httpOnly: true, build: fixed(20002, "invalid: kind 20002 is only accepted via WebSocket")},
		{name: "Step3PresenceOverHTTP", httpOnly: true, build: fixed(20001, "invalid: kind 20001 is only accepted via WebSocket", eventtest.Content("online"))},
		{name: "Step4GroupMetadata", build: fixed(39000, "restricted: relay-only kind", eventtest.Tag("d", uuid.NewString()))},
		{name: "Step4ChannelWindowBounds", build: fixed(39006, "restricted: relay-only kind")},
		{name: "Step5BadID", build: func(t *testing.T) (event.Event, string) {
			ev := alice.Signed(t, 1)
			ev.Content = "tampered after signing"
			return ev, fmt.Sprintf("invalid: invalid event id: computed %s, got %s", ev.ComputeID(), ev.ID)
		}},
		{name: "Step5BadSignature", build: func(t *testing.T) (event.Event, string) {
			ev := alice.Signed(t, 1)
			flip := byte('0')
			if ev.Sig[0] == '0' {
				flip = '1'
			}
			ev.Sig = string(flip) + ev.Sig[1:]
			return ev, "invalid: invalid schnorr signature"
		}},
		{name: "Step6Future", build: func(t *testing.T) (event.Event, string) {
			return alice.Signed(t, 1, eventtest.At(futureDrift())), "invalid: event timestamp too far from server time"
		}},
		{name: "Step6Past", build: func(t *testing.T) (event.Event, string) {
			return alice.Signed(t, 1, eventtest.At(pastDrift())), "invalid: event timestamp too far from server time"
		}},
		{name: "Step7ContentTooLarge", build: fixed(1, "invalid: content exceeds maximum size of 262144 bytes (got 262145)",
			eventtest.Content(strings.Repeat("x", 262145)))},
		{name: "Step7NULInContent", build: fixed(1, "invalid: event contains a NUL character", eventtest.Content("a\x00b"))},
		{name: "Step7NULInTag", build: fixed(1, "invalid: event contains a NUL character", eventtest.Tag("t", "a\x00b"))},
		{name: "Step8ForeignPubkey", status: http.StatusForbidden, build: func(t *testing.T) (event.Event, string) {
			return bob.Signed(t, 1), "invalid: event pubkey does not match authenticated identity"
		}},
		{name: "Step9UnknownKind", build: fixed(41, "restricted: unknown event kind")},
		{name: "Step10ReactionWithoutE", build: fixed(7, "invalid: reaction must reference a target event via e tag",
			eventtest.Content("+"), eventtest.Tag("p", bob.PubKey))},
		{name: "Step10ReactionTargetMissing", build: fixed(7, "invalid: reaction target event not found",
			eventtest.Content("+"), eventtest.Tag("e", hex64(0xab)))},
		{name: "Step12MissingH", build: fixed(9, "invalid: channel-scoped events must include an h tag")},
		{name: "Step12NonUUIDH", build: fixed(9, "invalid: channel-scoped events must include an h tag", eventtest.Tag("h", "general"))},
		{name: "Step13TwoETags", build: fixed(5, "invalid: deletion events must reference exactly one target via e or a tag (got e=2, a=0)",
			eventtest.Tag("e", hex64(0x01)), eventtest.Tag("e", hex64(0x02)))},
		{name: "Step13EAndA", build: fixed(5, "invalid: deletion events must reference exactly one target via e or a tag (got e=1, a=1)",
			eventtest.Tag("e", hex64(0x01)), eventtest.Tag("a", "30023:"+alice.PubKey+":x"))},
		{name: "Step13NoTarget", build: fixed(5, "invalid: deletion events must reference exactly one target via e or a tag (got e=0, a=0)")},
		{name: "Step14PrivateChannel", build: fixed(9, "restricted: not a channel member", eventtest.Channel(private))},
		{name: "Step14UnknownChannel", build: fixed(9, "restricted: not a channel member", eventtest.Channel(uuid.NewString()))},
		{name: "Step14ReactionInPrivateChannel", build: func(t *testing.T) (event.Event, string) {
			var target string
			require.NoError(t, r.App.Pool().QueryRow(context.Background(),
				`SELECT encode(id, 'hex') FROM events WHERE community_id = $1 AND channel_id = $2 LIMIT 1`, cid, private).Scan(&target))
			return alice.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target)), "restricted: not a channel member"
		}},
		{name: "Step15ArchivedChannel", build: fixed(9, "invalid: channel is archived", eventtest.Channel(archived))},
		{name: "Step17TargetNotFound", build: fixed(5, "invalid: target event not found", eventtest.Tag("e", hex64(0xcd)))},
		{name: "Step17NotAuthor", build: fixed(5, "invalid: must be event author", eventtest.Tag("e", bobNote.ID))},
		{name: "Step17MalformedTarget", build: fixed(5, "invalid: malformed deletion target id", eventtest.Tag("e", "zz"))},
		{name: "Step17BadATag", build: fixed(5, "invalid: invalid a-tag format", eventtest.Tag("a", "30023:"+alice.PubKey))},
		{name: "Step17ATagOfAnotherAuthor", build: fixed(5, "invalid: must be event author", eventtest.Tag("a", "30023:"+bob.PubKey+":x"))},
		{name: "Step18ProfileNotJSON", build: fixed(0, "invalid: kind:0 content must be valid JSON", eventtest.Content("not json"))},
		{name: "Step18AgentProfilePolicy", build: fixed(10100, "invalid: kind:10100 content must set channel_add_policy to anyone, owner_only or nobody",
			eventtest.Content(`{"channel_add_policy":"sometimes"}`))},
		{name: "Step18EmojiListShortcode", build: fixed(10030, "invalid: emoji tag must include a shortcode", eventtest.Tag("emoji", "", "https://x.test/a.png"))},
		{name: "Step18EmojiSetShortcode", build: fixed(30030, "invalid: emoji tag must include a shortcode", eventtest.Tag("d", "set"), eventtest.Tag("emoji"))},
		{name: "Step18EngramTwoD", build: fixed(30174, "invalid: agent-engram event must have exactly one `d` tag (got 2)",
			eventtest.Tag("d", hex64(1)), eventtest.Tag("d", hex64(2)), eventtest.Tag("p", bob.PubKey), eventtest.Content(engramContent(2)))},
		{name: "Step18EngramNotV2", build: fixed(30174, "invalid: agent-engram content is not NIP-44 v2 (expected 0x02 version prefix)",
			eventtest.Tag("d", hex64(1)), eventtest.Tag("p", bob.PubKey), eventtest.Content(engramContent(1)))},
		{name: "Step18DTagTooLong", build: fixed(30023, "invalid: d tag too long (1025 bytes, max 1024)", eventtest.Tag("d", strings.Repeat("d", 1025)))},
		{name: "Step18ReactionEmojiTooLong", build: fixed(7, "invalid: reaction emoji exceeds 64 characters (got 65)",
			eventtest.Content(strings.Repeat("é", 65)), eventtest.Tag("e", bobNote.ID))},
	}
	// The private channel needs a message for the reaction row above.
	w := r.Dial(t, "")
	w.Auth(bob)
	w.MustPublish(bob.Signed(t, 9, eventtest.Channel(private)))

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := tc.status
			if want == 0 {
				want = http.StatusBadRequest
			}
			if !tc.httpOnly {
				ev, msg := tc.build(t)
				if tc.wsMsg != "" {
					msg = tc.wsMsg
				}
				w := r.Dial(t, "")
				w.Auth(alice)
				ok, got := w.Publish(ev)
				require.False(t, ok)
				require.Equal(t, msg, got)
				require.False(t, eventRow(t, r, cid, ev.ID).found)
			}
			ev, msg := tc.build(t)
			status, body := r.PostEvent(t, "", alice, ev)
			require.Equal(t, want, status, body)
			require.JSONEq(t, errorBody(t, msg), body)
			require.False(t, eventRow(t, r, cid, ev.ID).found)
		})
	}
}

// writeFaults injects write failures with real database objects: row
// triggers on events (PostgreSQL clones them to every partition) that raise
// for the event ids in test_write_faults, either at the insert itself or,
// from a deferred constraint trigger, at COMMIT. The COMMIT fault also says
// whether the commit came in the statement that inserted the row (the
// one-statement path: no BEGIN, no COMMIT) or in a later COMMIT statement.
type writeFaults struct {
	r    *relaytest.Relay
	logs *logtest.Buffer
}

func startWriteFaults(t *testing.T) *writeFaults {
	t.Helper()
	logs := &logtest.Buffer{}
	r := relaytest.StartWithLogger(t, map[string]string{"BUZZ_AUDIT_ENABLED": "true"}, logs)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
		CREATE TABLE test_write_faults (id bytea PRIMARY KEY, at_commit boolean NOT NULL);
		CREATE FUNCTION test_write_fault() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
		  deferred boolean;
		BEGIN
		  SELECT at_commit INTO deferred FROM test_write_faults WHERE id = NEW.id;
		  IF NOT FOUND THEN
		    RETURN NULL;
		  END IF;
		  IF NOT deferred THEN
		    RAISE EXCEPTION 'injected fault';
		  END IF;
		  PERFORM set_config('buzz_test.insert_statement', statement_timestamp()::text, true);
		  RETURN NULL;
		END $$;
		CREATE FUNCTION test_write_fault_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		  IF EXISTS (SELECT 1 FROM test_write_faults WHERE id = NEW.id AND at_commit) THEN
		    RAISE EXCEPTION 'injected fault at commit (%)', CASE
		      WHEN current_setting('buzz_test.insert_statement') = statement_timestamp()::text THEN 'one statement'
		      ELSE 'transaction' END;
		  END IF;
		  RETURN NULL;
		END $$;
		CREATE TRIGGER test_write_fault AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION test_write_fault();
		CREATE CONSTRAINT TRIGGER test_write_fault_at_commit AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED
		  FOR EACH ROW EXECUTE FUNCTION test_write_fault_at_commit();`)
	require.NoError(t, err)
	return &writeFaults{r: r, logs: logs}
}

// fail makes every insert of the event id fail.
func (f *writeFaults) fail(t *testing.T, id string) { f.inject(t, id, false) }

// failAtCommit makes every commit that holds the event id fail.
func (f *writeFaults) failAtCommit(t *testing.T, id string) { f.inject(t, id, true) }

func (f *writeFaults) inject(t *testing.T, id string, atCommit bool) {
	t.Helper()
	_, err := f.r.App.Pool().Exec(context.Background(), `INSERT INTO test_write_faults (id, at_commit) VALUES ($1, $2)`, idBytes(t, id), atCommit)
	require.NoError(t, err)
}

// failure returns the err of the relay's "event failed" log line for id.
func (f *writeFaults) failure(t *testing.T, id string) string {
	t.Helper()
	for _, line := range strings.Split(f.logs.String(), "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			EventID string `json:"event_id"`
			Err     string `json:"err"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "event failed" && rec.EventID == id {
			return rec.Err
		}
	}
	t.Fatalf("no event failed log line for %s", id)
	return ""
}

// requireRolledBack checks that the failed event left nothing: no event
// row, no event_mentions, no audit intent (pending or chained).
func (f *writeFaults) requireRolledBack(t *testing.T, cid, id string) {
	t.Helper()
	require.False(t, eventRow(t, f.r, cid, id).found)
	require.Zero(t, countRows(t, f.r, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, cid, idBytes(t, id)))
	require.Zero(t, f.intents(t, cid, id))
}

// intents counts the audit intents about id, pending or already chained.
func (f *writeFaults) intents(t *testing.T, cid, id string) int {
	t.Helper()
	return countRows(t, f.r, `SELECT (SELECT count(*) FROM audit_outbox WHERE community_id = $1 AND object_id = $2)
		+ (SELECT count(*) FROM audit_intent_groups g, unnest(g.object_ids) AS o(id) WHERE g.community_id = $1 AND o.id = $2)
		+ (SELECT count(*) FROM audit_log WHERE community_id = $1 AND object_id = $2)`, cid, id)
}

// TestWriteFault: a failure injected at the event insert rolls
// the whole write back, on the one-statement path every plain event takes
// and on the transactional paths.
func TestWriteFault(t *testing.T) {
	t.Parallel()
	f := startWriteFaults(t)
	r := f.r
	cid := communityID(t, r, r.Host)
	internal := func(t *testing.T, w *relaytest.WS, ev event.Event) {
		t.Helper()
		ok, msg := w.Publish(ev)
		require.False(t, ok)
		require.Equal(t, "error: internal server error", msg)
	}

	t.Run("WebSocket", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		ev := alice.Signed(t, 1, eventtest.Tag("p", bob.PubKey), eventtest.Tag("p", alice.PubKey))
		f.fail(t, ev.ID)
		internal(t, w, ev)
		f.requireRolledBack(t, cid, ev.ID)
	})
	t.Run("HTTP", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		ev := alice.Signed(t, 1, eventtest.Tag("p", bob.PubKey))
		f.fail(t, ev.ID)
		status, body := r.PostEvent(t, "", alice, ev)
		require.Equal(t, http.StatusInternalServerError, status)
		require.Equal(t, `{"error":"internal server error"}`, strings.TrimSpace(body))
		f.requireRolledBack(t, cid, ev.ID)
	})
	t.Run("FastPath", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		ev := alice.Signed(t, 1, eventtest.Tag("p", bob.PubKey))
		f.failAtCommit(t, ev.ID)
		internal(t, w, ev)
		f.requireRolledBack(t, cid, ev.ID)
		msg := f.failure(t, ev.ID)
		require.Contains(t, msg, "apply plain: ", "the log names the step and family")
		require.Contains(t, msg, "injected fault at commit (one statement)", "a plain event is one statement, no transaction")
		// The same event without the fault is stored with its mention and intent.
		again := alice.Signed(t, 1, eventtest.Tag("p", bob.PubKey), eventtest.At(ev.CreatedAt+1))
		w.MustPublish(again)
		require.Equal(t, 1, countRows(t, r, `SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, cid, idBytes(t, again.ID)))
		require.Equal(t, 1, f.intents(t, cid, again.ID))
	})
	t.Run("Reaction", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		target := bob.Signed(t, 1)
		status, body := r.PostEvent(t, "", bob, target)
		require.Equal(t, http.StatusOK, status, body)
		w := r.Dial(t, "")
		w.Auth(alice)
		react := alice.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.Tag("p", bob.PubKey))
		f.fail(t, react.ID)
		internal(t, w, react)
		f.requireRolledBack(t, cid, react.ID)
		require.Contains(t, f.failure(t, react.ID), "apply reaction: ")
		reactions := func() int {
			return countRows(t, r, `SELECT count(*) FROM reactions WHERE community_id = $1 AND event_id = $2`, cid, idBytes(t, target.ID))
		}
		require.Zero(t, reactions())
		// Nothing was left behind: the same reaction is fresh afterwards.
		again := alice.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.At(react.CreatedAt+1))
		w.MustPublish(again)
		require.Equal(t, 1, reactions())
		require.Equal(t, 1, f.intents(t, cid, again.ID))
	})
	t.Run("Replacement", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		now := time.Now().Unix()
		v1 := alice.Signed(t, 0, eventtest.Content(`{"name":"v1"}`), eventtest.At(now-10))
		w.MustPublish(v1)
		v2 := alice.Signed(t, 0, eventtest.Content(`{"name":"v2"}`), eventtest.At(now))
		f.fail(t, v2.ID)
		internal(t, w, v2)
		f.requireRolledBack(t, cid, v2.ID)
		require.True(t, eventRow(t, r, cid, v1.ID).live, "the superseded head must survive the rollback")
		require.Contains(t, f.failure(t, v2.ID), "apply profile: ")
	})
	t.Run("Deletion", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		note := alice.Signed(t, 1)
		w.MustPublish(note)
		del := alice.Signed(t, 5, eventtest.Tag("e", note.ID))
		f.fail(t, del.ID)
		internal(t, w, del)
		f.requireRolledBack(t, cid, del.ID)
		require.True(t, eventRow(t, r, cid, note.ID).live)
		require.Equal(t, 1, f.intents(t, cid, note.ID), "only the note's event_created: no event_deleted")
	})
	t.Run("ReactionAtCommit", func(t *testing.T) {
		t.Parallel()
		alice, bob := eventtest.NewKey(), eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		target := bob.Signed(t, 1)
		status, body := r.PostEvent(t, "", bob, target)
		require.Equal(t, http.StatusOK, status, body)
		react := alice.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID))
		f.failAtCommit(t, react.ID)
		internal(t, w, react)
		f.requireRolledBack(t, cid, react.ID)
		msg := f.failure(t, react.ID)
		require.Contains(t, msg, "commit reaction: ", "the log names the step and family")
		require.Contains(t, msg, "injected fault at commit (transaction)", "a reaction is written in a transaction")
		require.Zero(t, countRows(t, r, `SELECT count(*) FROM reactions WHERE community_id = $1 AND event_id = $2`, cid, idBytes(t, target.ID)))
	})
	t.Run("DeletionAtCommit", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		note := alice.Signed(t, 1)
		w.MustPublish(note)
		del := alice.Signed(t, 5, eventtest.Tag("e", note.ID))
		f.failAtCommit(t, del.ID)
		internal(t, w, del)
		f.requireRolledBack(t, cid, del.ID)
		require.Contains(t, f.failure(t, del.ID), "injected fault at commit (transaction)")
		require.True(t, eventRow(t, r, cid, note.ID).live, "the soft delete written after the insert is rolled back")
		require.Equal(t, 1, f.intents(t, cid, note.ID), "only the note's event_created: no event_deleted")
	})
	t.Run("GroupCommand", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		channel := uuid.NewString()
		create := alice.Signed(t, 9007, eventtest.Channel(channel), eventtest.Tag("name", "faulty"))
		f.fail(t, create.ID)
		internal(t, w, create)
		f.requireRolledBack(t, cid, create.ID)
		require.Contains(t, f.failure(t, create.ID), "apply group: ")
		require.Zero(t, countRows(t, r, `SELECT count(*) FROM channels WHERE community_id = $1 AND id = $2`, cid, channel))
		require.Zero(t, countRows(t, r, `SELECT count(*) FROM channel_members WHERE community_id = $1 AND channel_id = $2`, cid, channel))
		require.Zero(t, countRows(t, r, `SELECT count(*) FROM events WHERE community_id = $1 AND kind BETWEEN 39000 AND 39002 AND d_tag = $2`, cid, channel))
		require.Zero(t, f.intents(t, cid, channel), "no channel_created intent")
		// The same channel id is free afterwards.
		w.MustPublish(alice.Signed(t, 9007, eventtest.Channel(channel), eventtest.Tag("name", "faulty"), eventtest.At(create.CreatedAt+1)))
		require.Equal(t, 3, countRows(t, r, `SELECT count(*) FROM events WHERE community_id = $1 AND kind BETWEEN 39000 AND 39002 AND d_tag = $2`, cid, channel))
	})
	t.Run("ThreadReply", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		channel := uuid.NewString()
		w.MustPublish(alice.Signed(t, 9007, eventtest.Channel(channel), eventtest.Tag("name", "threads")))
		root := alice.Signed(t, 9, eventtest.Channel(channel))
		w.MustPublish(root)
		reply := alice.Signed(t, 9, eventtest.Channel(channel), eventtest.Tag("e", root.ID, "", "reply"))
		f.fail(t, reply.ID)
		internal(t, w, reply)
		f.requireRolledBack(t, cid, reply.ID)
		require.Contains(t, f.failure(t, reply.ID), "apply thread: ")
		require.Zero(t, countRows(t, r, `SELECT count(*) FROM thread_metadata WHERE community_id = $1 AND event_id = $2`, cid, idBytes(t, reply.ID)))
		require.Zero(t, countRows(t, r, `SELECT count(*) FROM thread_metadata WHERE community_id = $1 AND event_id = $2 AND reply_count > 0`, cid, idBytes(t, root.ID)))
	})
}

// TestStorageRules covers resubmission and concurrent replaceable
// writes.
func TestStorageRules(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	cid := communityID(t, r, r.Host)

	t.Run("ResubmissionIsDuplicate", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(alice)
		ev := alice.Signed(t, 1, eventtest.Content("once"))
		w.MustPublish(ev)
		ok, msg := w.Publish(ev)
		require.True(t, ok)
		require.Equal(t, "duplicate:", msg)
		status, body := r.PostEvent(t, "", alice, ev)
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":"duplicate:"}`, body)
		require.Equal(t, 1, countRows(t, r, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, cid, idBytes(t, ev.ID)))

		fromHTTP := alice.Signed(t, 1, eventtest.Content("via the bridge"))
		status, body = r.PostEvent(t, "", alice, fromHTTP)
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"event_id":"`+fromHTTP.ID+`","accepted":true,"message":""}`, body)
		ok, msg = w.Publish(fromHTTP)
		require.True(t, ok)
		require.Equal(t, "duplicate:", msg)
	})
	t.Run("ConcurrentProfiles", func(t *testing.T) {
		t.Parallel()
		alice := eventtest.NewKey()
		const conns, perConn = 5, 10
		ws := make([]*relaytest.WS, conns)
		for i := range ws {
			ws[i] = r.Dial(t, "")
			ws[i].Auth(alice)
		}
		base := time.Now().Unix() - 100
		var newest event.Event
		pending := make([]map[string]bool, conns)
		for i := range pending {
			pending[i] = map[string]bool{}
		}
		// Interleave the EVENT frames over the connections; the relay runs
		// the handlers of one connection concurrently.
		for j := 0; j < perConn; j++ {
			for i := 0; i < conns; i++ {
				n := int64(j*conns + i)
				ev := alice.Signed(t, 0, eventtest.Content(`{"name":"v`+strconv.FormatInt(n, 10)+`"}`), eventtest.At(base+n))
				if ev.CreatedAt > newest.CreatedAt {
					newest = ev
				}
				pending[i][ev.ID] = true
				ws[i].Send("EVENT", ev)
			}
		}
		for i, w := range ws {
			for len(pending[i]) > 0 {
				msg := w.Next()
				require.Equal(t, "OK", msg[0], msg)
				id := msg[1].(string)
				require.True(t, pending[i][id], msg)
				delete(pending[i], id)
				require.True(t, msg[2].(bool), msg)
				require.Contains(t, []string{"", "duplicate:"}, msg[3], msg)
			}
		}
		var live []string
		rows, err := r.App.Pool().Query(context.Background(), `SELECT encode(id, 'hex') FROM events
			WHERE community_id = $1 AND kind = 0 AND pubkey = $2 AND deleted_at IS NULL`, cid, pubBytes(t, alice))
		require.NoError(t, err)
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			live = append(live, id)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{newest.ID}, live)
		evs, closed, eose := ws[0].Req("p", map[string]any{"kinds": []int{0}, "authors": []string{alice.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, []string{newest.ID}, ids(evs))
	})
}
