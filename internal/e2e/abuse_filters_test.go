package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// afKinds returns kinds 1…n; afValues n distinct values, 64 hex characters
// each, as pubkeys in a #p are.
func afKinds(n int) []int {
	ks := make([]int, n)
	for i := range ks {
		ks[i] = i + 1
	}
	return ks
}

func afValues(prefix string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s%0*x", prefix, 64-len(prefix), i)
	}
	return vs
}

// afHonest is an honest reader and writer: one connection in a community,
// subscribed to kind 1, checking that what it publishes comes back live.
type afHonest struct {
	w   *relaytest.WS
	key eventtest.Key
}

func newAFHonest(t *testing.T, r *relaytest.Relay, host string) *afHonest {
	t.Helper()
	h := &afHonest{w: r.Dial(t, host), key: eventtest.NewKey()}
	h.w.Auth(h.key)
	_, closed, eose := h.w.Req("live", map[string]any{"kinds": []int{1}, "limit": 0})
	require.True(t, eose, closed)
	return h
}

// roundTrip publishes an event on the honest connection and requires it
// acknowledged and delivered live to the honest subscription; the other
// honest connections given must receive it too.
func (h *afHonest) roundTrip(t *testing.T, others ...*afHonest) event.Event {
	t.Helper()
	ev := h.key.Signed(t, 1, eventtest.Content("honest "+rand.Text()), eventtest.Tag("t", "honest"))
	h.w.Send("EVENT", ev)
	var gotLive, gotOK bool
	for !gotLive || !gotOK {
		msg := h.w.Next()
		switch {
		case msg[0] == "EVENT" && msg[1] == "live":
			require.Equal(t, ev.ID, msg[2].(map[string]any)["id"])
			gotLive = true
		case msg[0] == "OK" && msg[1] == ev.ID:
			require.Equal(t, []any{"OK", ev.ID, true, ""}, msg)
			gotOK = true
		}
	}
	for _, o := range others {
		msg := o.w.Next()
		require.Equal(t, "EVENT", msg[0], msg)
		require.Equal(t, ev.ID, msg[2].(map[string]any)["id"])
	}
	return ev
}

// afStored requires every acknowledged event stored and readable.
func afStored(t *testing.T, r *relaytest.Relay, host string, evs []event.Event) {
	t.Helper()
	w := r.Dial(t, host)
	w.Auth(eventtest.NewKey())
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	got, closed, eose := w.Req("stored", map[string]any{"ids": ids})
	require.True(t, eose, closed)
	require.Len(t, got, len(evs), "every acknowledged event is stored")
}

// TestAbuseFilters runs the two filter attacks of docs/OPERATIONS.md
// "Filter caps" against a relay with the default caps, over real sockets,
// while honest clients of the same community (other connections) and of
// another community publish and read live. Each attack is refused with its
// exact text or served within its caps; only the attacker's request is
// affected, its connection stays usable, and nothing acknowledged is lost.
func TestAbuseFilters(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)

	t.Run("QuadraticRegistration", func(t *testing.T) {
		t.Parallel()
		other := r.Community(t, "af-far-quadratic")
		near := newAFHonest(t, r, "")
		far := newAFHonest(t, r, other)
		var acked []event.Event
		acked = append(acked, near.roundTrip(t), far.roundTrip(t))

		attacker := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(attacker)
		// The attack of the issue: 1,000 kinds × 7,000 #p, 460 KB.
		_, closed, _ := w.Req("wide", map[string]any{"kinds": afKinds(1000), "#p": afValues("", 7000), "limit": 1})
		require.Equal(t, `invalid: filter "kinds" has 1000 values (maximum 64)`, closed)
		_, closed, _ = w.Req("wide", map[string]any{"kinds": afKinds(64), "#p": afValues("", 7000), "limit": 1})
		require.Equal(t, `invalid: filter "#p" has 7000 values (maximum 1000)`, closed)
		// Every array at its cap, but 64 × 1,000 index keys.
		_, closed, _ = w.Req("wide", map[string]any{"kinds": afKinds(64), "#p": afValues("", 1000), "limit": 1})
		require.Equal(t, `invalid: subscription needs 64000 index keys (maximum 4096)`, closed)
		acked = append(acked, near.roundTrip(t), far.roundTrip(t))

		// At the caps: four subscriptions of 64 × 64 keys each get EOSE, a
		// fifth key is one too many for the connection.
		for i := range 4 {
			sub := "wide" + strconv.Itoa(i)
			_, closed, eose := w.Req(sub, map[string]any{"kinds": afKinds(64), "#p": afValues(strconv.Itoa(i), 64), "limit": 1})
			require.True(t, eose, closed)
		}
		_, closed, _ = w.Req("more", map[string]any{"kinds": []int{1}, "#p": []string{attacker.PubKey}})
		require.Equal(t, "blocked: connection would hold 16385 index keys (maximum 16384); close a subscription first", closed)
		acked = append(acked, near.roundTrip(t), far.roundTrip(t))

		// The bridge's door refuses the same filter with the same text.
		body, err := json.Marshal([]any{map[string]any{"kinds": afKinds(65)}})
		require.NoError(t, err)
		for _, path := range []string{"/query", "/count"} {
			status, resp := r.HTTP(t, "", http.MethodPost, path, &attacker, body)
			require.Equal(t, http.StatusBadRequest, status, path)
			require.JSONEq(t, `{"error":"invalid: filter \"kinds\" has 65 values (maximum 64)"}`, string(resp), path)
		}

		// The attacker's connection still works: it publishes, and the
		// honest subscribers of its community see it.
		ev := attacker.Signed(t, 1, eventtest.Content("attacker, politely"))
		w.MustPublish(ev)
		for _, msg := range []string{"near"} {
			got := near.w.Next()
			require.Equal(t, "EVENT", got[0], msg)
			require.Equal(t, ev.ID, got[2].(map[string]any)["id"], msg)
		}
		acked = append(acked, ev, near.roundTrip(t))
		afStored(t, r, "", []event.Event{acked[0], acked[2], acked[4], acked[6], acked[7]})
		afStored(t, r, other, []event.Event{acked[1], acked[3], acked[5]})
	})

	t.Run("TagsTimesValues", func(t *testing.T) {
		t.Parallel()
		host := r.Community(t, "af-tags")
		other := r.Community(t, "af-far-tags")
		near := newAFHonest(t, r, host)
		far := newAFHonest(t, r, other)

		attacker := eventtest.NewKey()
		w := r.Dial(t, host)
		w.Auth(attacker)
		// Tens of thousands of #t values are refused outright.
		short := make([]string, 20000)
		for i := range short {
			short[i] = strconv.Itoa(i)
		}
		_, closed, _ := w.Req("tags", map[string]any{"kinds": []int{1}, "#t": short})
		require.Equal(t, `invalid: filter "#t" has 20000 values (maximum 1000)`, closed)
		// At the cap, the subscription is served.
		values := afValues("t", 1000)
		_, closed, eose := w.Req("tags", map[string]any{"kinds": []int{1}, "#t": values, "limit": 0})
		require.True(t, eose, closed)

		// Events with thousands of t tags: one matching none of the values,
		// then one whose last tag matches.
		pub := r.Dial(t, host)
		pubKey := eventtest.NewKey()
		pub.Auth(pubKey)
		miss := make([]eventtest.Option, 0, 5000)
		for i := range 5000 {
			miss = append(miss, eventtest.Tag("t", fmt.Sprintf("miss-%d", i)))
		}
		evMiss := pubKey.Signed(t, 1, append(miss, eventtest.Content("miss"))...)
		pub.MustPublish(evMiss)
		evHit := pubKey.Signed(t, 1, append(miss, eventtest.Content("hit"), eventtest.Tag("t", values[999]))...)
		pub.MustPublish(evHit)

		got := w.Next()
		require.Equal(t, "EVENT", got[0], got)
		require.Equal(t, "tags", got[1])
		require.Equal(t, evHit.ID, got[2].(map[string]any)["id"], "only the event with a matching t tag")
		// The honest subscriber of the community got both, in order.
		for _, want := range []string{evMiss.ID, evHit.ID} {
			got := near.w.Next()
			require.Equal(t, want, got[2].(map[string]any)["id"])
		}
		acked := []event.Event{evMiss, evHit, near.roundTrip(t), far.roundTrip(t)}
		// The attacker's subscription only sees t-tagged matches.
		hit := attacker.Signed(t, 1, eventtest.Tag("t", values[0]))
		w.MustPublish(hit)
		require.Equal(t, hit.ID, near.w.Next()[2].(map[string]any)["id"])
		acked = append(acked, hit)
		afStored(t, r, host, []event.Event{acked[0], acked[1], acked[2], acked[4]})
		afStored(t, r, other, acked[3:4])
	})

	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		rc := relaytest.Start(t, map[string]string{
			"BUZZ_FILTER_MAX_KINDS": "2", "BUZZ_FILTER_MAX_TAG_VALUES": "3",
			"BUZZ_SUB_MAX_INDEX_KEYS": "4", "BUZZ_CONN_MAX_INDEX_KEYS": "5", "BUZZ_CONN_MAX_FILTER_BYTES": "1024",
		})
		status, body := rc.HTTP(t, "", http.MethodGet, "/info", nil, nil)
		require.Equal(t, http.StatusOK, status)
		var doc struct{ Limitation map[string]any }
		require.NoError(t, json.Unmarshal(body, &doc))
		for key, want := range map[string]float64{"max_filter_kinds": 2, "max_filter_tag_values": 3,
			"max_subscription_index_keys": 4, "max_connection_index_keys": 5, "max_connection_filter_bytes": 1024} {
			require.Equal(t, want, doc.Limitation[key], key)
		}
		w := rc.Dial(t, "")
		w.Auth(eventtest.NewKey())
		_, closed, _ := w.Req("s", map[string]any{"kinds": []int{1, 2, 3}})
		require.Equal(t, `invalid: filter "kinds" has 3 values (maximum 2)`, closed)
		_, closed, _ = w.Req("s", map[string]any{"kinds": []int{1, 2}, "#p": []string{"a", "b", "c"}})
		require.Equal(t, "invalid: subscription needs 6 index keys (maximum 4)", closed)
		_, closed, eose := w.Req("s", map[string]any{"kinds": []int{1, 2}, "#p": []string{"a", "b"}})
		require.True(t, eose, closed)
		_, closed, _ = w.Req("t", map[string]any{"kinds": []int{1, 2}})
		require.Equal(t, "blocked: connection would hold 6 index keys (maximum 5); close a subscription first", closed)
	})
}
