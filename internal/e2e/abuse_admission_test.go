package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/redistest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// Per-user admission (docs/OPERATIONS.md "Per-user quotas"), attacked over
// real sockets: a pubkey past a quota is refused with the quota text while
// everyone else, in its community and in others, goes on; what it had
// acknowledged is kept.

// quotaText matches the refusal and captures its seconds.
var quotaText = regexp.MustCompile(`^rate-limited: quota exceeded; retry in ([0-9]+)s$`)

// requireQuota requires msg to be the quota refusal with a retry in
// [lo, hi] seconds.
func requireQuota(t *testing.T, msg string, lo, hi int) {
	t.Helper()
	m := quotaText.FindStringSubmatch(msg)
	require.NotNil(t, m, "refusal %q", msg)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.True(t, n >= lo && n <= hi, "retry in %ds, want %d..%d", n, lo, hi)
}

// adDial opens an authenticated connection of key to host.
func adDial(t *testing.T, r *relaytest.Relay, host string, key eventtest.Key) *relaytest.WS {
	t.Helper()
	w := r.Dial(t, host)
	w.Auth(key)
	return w
}

// adNote is a kind 1 of key, distinct from every other.
func adNote(t *testing.T, key eventtest.Key) event.Event {
	t.Helper()
	return key.Signed(t, 1, eventtest.Content("note "+uuid.NewString()))
}

// adRequireStored requires every id to be readable by a REQ of w.
func adRequireStored(t *testing.T, w *relaytest.WS, ids ...string) {
	t.Helper()
	evs, closed, eose := w.Req("stored-"+uuid.NewString()[:8], map[string]any{"ids": ids})
	require.True(t, eose, closed)
	require.Len(t, evs, len(ids))
}

// adMakeAgent gives key an owner in the community: an agent.
func adMakeAgent(t *testing.T, r *relaytest.Relay, cid string, key eventtest.Key) {
	t.Helper()
	_, err := r.App.Pool().Exec(context.Background(), `INSERT INTO users (community_id, pubkey, agent_owner_pubkey)
		VALUES ($1, $2, $3) ON CONFLICT (community_id, pubkey) DO UPDATE SET agent_owner_pubkey = EXCLUDED.agent_owner_pubkey`,
		cid, pubBytes(t, key), pubBytes(t, eventtest.NewKey()))
	require.NoError(t, err)
}

// TestAdmissionMessages: the messages quota per pubkey per community, at
// the quota and one over, over both doors; an agent's larger quota; the
// deployment owner exempt; the refusal counted and audited.
func TestAdmissionMessages(t *testing.T) {
	t.Parallel()
	owner := eventtest.NewKey()
	e := auSetup(t, map[string]string{
		"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN":          "3",
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN": "5",
		"RELAY_OWNER_PUBKEY":                              owner.PubKey,
	})
	r := e.r
	other := r.Community(t, "other")
	attacker := eventtest.NewKey()

	t.Run("Group", func(t *testing.T) {
		t.Run("FloodRefusedOthersPublish", func(t *testing.T) {
			t.Parallel()
			w := adDial(t, r, "", attacker)
			var acked []string
			for range 3 {
				ev := adNote(t, attacker)
				w.MustPublish(ev)
				acked = append(acked, ev.ID)
			}
			ok, msg := w.Publish(adNote(t, attacker))
			require.False(t, ok)
			requireQuota(t, msg, 1, 60)
			// The other door shares the quota: the flood cannot move to the bridge.
			status, body := r.PostEvent(t, "", attacker, adNote(t, attacker))
			require.Equal(t, http.StatusTooManyRequests, status, body)
			var answer struct{ Error string }
			require.NoError(t, json.Unmarshal([]byte(body), &answer))
			requireQuota(t, answer.Error, 1, 60)

			// The connection stays usable, and nothing acknowledged is lost.
			adRequireStored(t, w, acked...)
			// Another user of the community, and the attacker's key in
			// another community, publish on.
			bystander := eventtest.NewKey()
			wb := adDial(t, r, "", bystander)
			for range 3 {
				wb.MustPublish(adNote(t, bystander))
			}
			wo := adDial(t, r, other, attacker)
			wo.MustPublish(adNote(t, attacker))
			stranger := eventtest.NewKey()
			adDial(t, r, other, stranger).MustPublish(adNote(t, stranger))
		})

		t.Run("AgentQuota", func(t *testing.T) {
			t.Parallel()
			agent := eventtest.NewKey()
			adMakeAgent(t, r, e.cid, agent)
			w := adDial(t, r, "", agent)
			for range 5 {
				w.MustPublish(adNote(t, agent))
			}
			ok, msg := w.Publish(adNote(t, agent))
			require.False(t, ok)
			requireQuota(t, msg, 1, 60)
			// The same key is a human where it has no owner.
			wo := adDial(t, r, other, agent)
			for range 3 {
				wo.MustPublish(adNote(t, agent))
			}
			ok, msg = wo.Publish(adNote(t, agent))
			require.False(t, ok)
			requireQuota(t, msg, 1, 60)
		})

		t.Run("OwnerExempt", func(t *testing.T) {
			t.Parallel()
			w := adDial(t, r, "", owner)
			for range 10 {
				w.MustPublish(adNote(t, owner))
			}
		})
	})

	require.GreaterOrEqual(t, r.Metric(t, `buzz_admission_rejections_total{limit="messages",transport="ws"}`), 3.0)
	require.Equal(t, 1.0, r.Metric(t, `buzz_admission_rejections_total{limit="messages",transport="http"}`))
	require.GreaterOrEqual(t, r.Metric(t, `buzz_events_rejected_total{reason="rate-limited",transport="ws"}`), 3.0)
	pool := e.stop(t)
	limited := auFind(auEntries(t, pool, e.cid), "rate_limit_exceeded", "")
	found := false
	for _, l := range limited {
		found = found || (l.Actor == attacker.PubKey && l.Detail["limit"] == "messages" && l.Detail["transport"] == "ws")
	}
	require.True(t, found, "the first refusal of the window is written individually: %v", limited)
	auVerified(t, pool, e.cid)
}

// TestAdmissionWSEvents: EVENT, REQ and COUNT frames of an authenticated
// connection share a 5-second budget of 5 × the per-second quota; frames
// before AUTH are not charged; the window ends and the budget is back.
func TestAdmissionWSEvents(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC": "1"})
	key := eventtest.NewKey()
	w := r.Dial(t, "")
	for i := range 8 { // refused for want of AUTH, and not charged
		w.Send("REQ", "early"+strconv.Itoa(i), map[string]any{"kinds": []int{1}})
		require.Equal(t, "NOTICE", w.Next()[0])
		require.Equal(t, "CLOSED", w.Next()[0])
	}
	w.Auth(key)
	ev := adNote(t, key)
	w.MustPublish(ev)                                                     // 1
	_, closed, eose := w.Req("a", map[string]any{"ids": []string{ev.ID}}) // 2
	require.True(t, eose, closed)
	for i := range 3 { // 3–5
		w.Send("COUNT", "c"+strconv.Itoa(i), map[string]any{"kinds": []int{1}})
		require.Equal(t, "COUNT", w.Next()[0])
	}
	_, closed, _ = w.Req("b", map[string]any{"kinds": []int{1}})
	requireQuota(t, closed, 1, 5)
	// The refusal quiets the connection until the window reopens: the
	// frame sent next waits in the socket, then is read in the new window
	// and served (it would be refused at once if it were read now).
	w.Send("COUNT", "c9", map[string]any{"kinds": []int{1}})
	msg, err := w.NextErr(12 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "COUNT", msg[0], msg)

	// Another user of the community is untouched.
	other := eventtest.NewKey()
	adDial(t, r, "", other).MustPublish(adNote(t, other))

	// What the connection had acknowledged is there.
	_, closed, eose = w.Req("again", map[string]any{"ids": []string{ev.ID}})
	require.True(t, eose, closed)
	require.GreaterOrEqual(t, r.Metric(t, `buzz_admission_rejections_total{limit="ws_events",transport="ws"}`), 1.0)
}

// TestAdmissionWSEventsFlood: a connection that sends frames faster than
// its quota gets one refusal per window, not one per frame: after the
// first refusal the relay stops reading it until the window reopens, so
// 20 EVENTs sent at once against 10 a window are answered with at most
// two refusals (one per window they span, the first window possibly half
// spent) and every other one acknowledged, nothing lost.
func TestAdmissionWSEventsFlood(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC": "2"})
	key := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(key)
	sent := map[string]bool{}
	for range 20 {
		ev := adNote(t, key)
		sent[ev.ID] = true
		w.Send("EVENT", ev)
	}
	var acked []string
	refusals := 0
	for answered := 0; answered < len(sent); {
		msg, err := w.NextErr(15 * time.Second)
		require.NoError(t, err, "every frame is answered once the windows reopen")
		if msg[0] != "OK" {
			continue
		}
		id := msg[1].(string)
		require.True(t, sent[id], msg)
		answered++
		if msg[2].(bool) {
			acked = append(acked, id)
			continue
		}
		requireQuota(t, msg[3].(string), 1, 5)
		refusals++
	}
	require.Positive(t, refusals, "the flood is refused")
	require.LessOrEqual(t, refusals, 2, "one refusal per window, not one per frame")
	adRequireStored(t, adDial(t, r, "", eventtest.NewKey()), acked...) // this key's window may be spent

}

// TestAdmissionChannelCreates: channel creation per pubkey per community,
// at the cap and one over; a refused 9007 creates nothing.
func TestAdmissionChannelCreates(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_CHANNEL_CREATES_PER_HOUR": "2"})
	spammer := eventtest.NewKey()
	w := adDial(t, r, "", spammer)
	create := func(k eventtest.Key) event.Event {
		return k.Signed(t, event.KindCreateGroup, eventtest.Channel(uuid.NewString()), eventtest.Tag("name", "spam "+uuid.NewString()[:8]))
	}
	for range 2 {
		w.MustPublish(create(spammer))
	}
	third := create(spammer)
	ok, msg := w.Publish(third)
	require.False(t, ok)
	requireQuota(t, msg, 3500, 3600)
	ch := third.Tags.First("h").Value()
	evs, closed, eose := w.Req("meta", map[string]any{"kinds": []int{39000}, "#d": []string{ch}})
	require.True(t, eose, closed)
	require.Empty(t, evs, "no channel was created")
	// Messages are not channel creations.
	w.MustPublish(adNote(t, spammer))
	// Another user creates on.
	other := eventtest.NewKey()
	adDial(t, r, "", other).MustPublish(create(other))
	require.Equal(t, 1.0, r.Metric(t, `buzz_admission_rejections_total{limit="channel_creates",transport="ws"}`))
}

// TestAdmissionBridge: POST /events, /query and /count share the
// api_calls quota; past it a 429 with the quota text and Retry-After,
// before the body is read for its filters; another signer goes on.
func TestAdmissionBridge(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN": "3"})
	key, other := eventtest.NewKey(), eventtest.NewKey()
	filters := []byte(`[{"kinds":[1],"limit":1}]`)
	status, body := r.PostEvent(t, "", key, adNote(t, key))
	require.Equal(t, http.StatusOK, status, body)
	status, b := r.HTTP(t, "", http.MethodPost, "/query", &key, filters)
	require.Equal(t, http.StatusOK, status, string(b))
	status, b = r.HTTP(t, "", http.MethodPost, "/count", &key, filters)
	require.Equal(t, http.StatusOK, status, string(b))
	// Over: refused before the body is parsed, so even a broken body gets the 429.
	resp := r.Exchange(t, relaytest.Request{Path: "/query", Key: &key, Body: []byte(`not json`)})
	require.Equal(t, http.StatusTooManyRequests, resp.Status)
	var answer struct{ Error string }
	require.NoError(t, json.Unmarshal(resp.Body, &answer))
	requireQuota(t, answer.Error, 1, 60)
	require.Equal(t, quotaText.FindStringSubmatch(answer.Error)[1], resp.Header.Get("Retry-After"))
	// Known to be past the quota, the signer is refused before its token is
	// written down against replays: a flood of its calls writes nothing.
	replayRows := func() int {
		var n int
		require.NoError(t, r.App.Pool().QueryRow(context.Background(), `SELECT count(*) FROM nip98_replay`).Scan(&n))
		return n
	}
	rows := replayRows()
	for range 20 {
		resp := r.Exchange(t, relaytest.Request{Path: "/count", Key: &key, Body: filters})
		require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	require.Equal(t, rows, replayRows(), "refused calls of an exhausted signer write no replay row")

	status, b = r.HTTP(t, "", http.MethodPost, "/query", &other, filters)
	require.Equal(t, http.StatusOK, status, string(b))
	// The WebSocket door has its own quotas.
	adDial(t, r, "", key).MustPublish(adNote(t, key))
	require.Equal(t, 21.0, r.Metric(t, `buzz_admission_rejections_total{limit="api_calls",transport="http"}`))
}

// TestAdmissionPTags: an event with more p tags than BUZZ_MAX_P_TAGS is
// refused on both doors with the same text; one at the cap is stored.
func TestAdmissionPTags(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil) // the default cap, 100
	key := eventtest.NewKey()
	w := adDial(t, r, "", key)
	withP := func(n int) event.Event {
		opts := []eventtest.Option{eventtest.Content("mentions " + uuid.NewString())}
		for i := range n {
			opts = append(opts, eventtest.Tag("p", fmt.Sprintf("%064x", i+1)))
		}
		return key.Signed(t, 1, opts...)
	}
	atCap := withP(100)
	w.MustPublish(atCap)
	ok, msg := w.Publish(withP(101))
	require.False(t, ok)
	require.Equal(t, "invalid: too many p tags (101, maximum 100)", msg)
	status, body := r.PostEvent(t, "", key, withP(5000))
	require.Equal(t, http.StatusBadRequest, status)
	require.JSONEq(t, `{"error":"invalid: too many p tags (5000, maximum 100)"}`, body)
	adRequireStored(t, w, atCap.ID)
	var mentions int
	require.NoError(t, r.App.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM event_mentions WHERE event_id = $1`, mustHex(t, atCap.ID)).Scan(&mentions))
	require.Equal(t, 100, mentions)
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestAdmissionSharedRedis: two relay processes on one Redis share each
// pubkey's count.
func TestAdmissionSharedRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	env := map[string]string{
		"REDIS_URL": rs.URL(), "BUZZ_RELAY_PRIVATE_KEY": hex.EncodeToString(event.GenerateKey()),
		"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN": "4",
	}
	a := relaytest.Start(t, env)
	envB := map[string]string{"DATABASE_URL": a.DBURL, "RELAY_URL": "ws://" + a.Host}
	for k, v := range env {
		envB[k] = v
	}
	b := relaytest.Start(t, envB)
	key := eventtest.NewKey()
	wa, wb := adDial(t, a, a.Host, key), adDial(t, b, a.Host, key)
	for _, w := range []*relaytest.WS{wa, wb, wa, wb} {
		w.MustPublish(adNote(t, key))
	}
	for _, w := range []*relaytest.WS{wa, wb} {
		ok, msg := w.Publish(adNote(t, key))
		require.False(t, ok)
		requireQuota(t, msg, 1, 60)
	}
	n, err := rs.Client().Get(t.Context(), "buzz:admission:messages:"+communityID(t, a, a.Host)+":"+key.PubKey).Int()
	require.NoError(t, err)
	require.Equal(t, 6, n, "both processes counted in Redis")
	require.Equal(t, 0.0, a.Metric(t, "buzz_admission_fallback_total"))
}
