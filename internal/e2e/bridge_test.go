package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// brHTTP sends a bridge request to the deployment host with a fresh NIP-98
// token signed by key.
func brHTTP(t testing.TB, r *relaytest.Relay, path string, key eventtest.Key, body []byte) (int, []byte) {
	t.Helper()
	return r.HTTP(t, "", http.MethodPost, path, &key, body)
}

// brQuery runs POST /query as key and returns the event ids.
func brQuery(t testing.TB, r *relaytest.Relay, key eventtest.Key, filters string) []string {
	t.Helper()
	status, body := brHTTP(t, r, "/query", key, []byte(filters))
	require.Equal(t, http.StatusOK, status, string(body))
	var evs []event.Event
	require.NoError(t, json.Unmarshal(body, &evs))
	return rpIdsOf(evs)
}

func TestBridge(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice := eventtest.NewKey()
	base := "http://" + r.Host

	t.Run("ReplayDetected", func(t *testing.T) {
		t.Parallel()
		tok := relaytest.Token(t, alice, base+"/events", http.MethodPost)
		ev := alice.Signed(t, 1, eventtest.Content("first"))
		body, _ := json.Marshal(ev)
		status, resp := r.Do(t, relaytest.Request{Path: "/events", Authorization: tok, Body: body})
		require.Equal(t, http.StatusOK, status, string(resp))
		require.JSONEq(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, string(resp))
		other, _ := json.Marshal(alice.Signed(t, 1, eventtest.Content("second")))
		status, resp = r.Do(t, relaytest.Request{Path: "/events", Authorization: tok, Body: other})
		require.Equal(t, http.StatusUnauthorized, status)
		require.JSONEq(t, `{"error":"NIP-98: replay detected"}`, string(resp))
	})

	t.Run("QueryStringSigned", func(t *testing.T) {
		t.Parallel()
		tok := relaytest.Token(t, alice, base+"/query", http.MethodPost)
		status, resp := r.Do(t, relaytest.Request{Path: "/query?x=1", Authorization: tok, Body: []byte(`[{"kinds":[1]}]`)})
		require.Equal(t, http.StatusUnauthorized, status)
		require.JSONEq(t, `{"error":"NIP-98: URL mismatch: event has `+"`"+base+"/query`, expected `"+base+"/query?x=1`"+`"}`, string(resp))
		status, resp = brHTTP(t, r, "/query?x=1", alice, []byte(`[{"kinds":[1]}]`))
		require.Equal(t, http.StatusOK, status, string(resp))
	})

	t.Run("LoopbackAliasInURL", func(t *testing.T) {
		t.Parallel()
		tok := relaytest.Token(t, alice, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/query", http.MethodPost)
		status, resp := r.Do(t, relaytest.Request{Path: "/query", Authorization: tok, Body: []byte(`[{"kinds":[1]}]`)})
		require.Equal(t, http.StatusOK, status, string(resp))
	})

	t.Run("XPubkeyIgnoredByDefault", func(t *testing.T) {
		t.Parallel()
		status, resp := r.Do(t, relaytest.Request{Path: "/query", Header: map[string]string{"X-Pubkey": alice.PubKey}, Body: []byte(`[{"kinds":[1]}]`)})
		require.Equal(t, http.StatusUnauthorized, status)
		require.JSONEq(t, `{"error":"missing Nostr auth"}`, string(resp))
	})

	t.Run("BadFilters", func(t *testing.T) {
		t.Parallel()
		status, resp := brHTTP(t, r, "/query", alice, []byte(`{}`))
		require.Equal(t, http.StatusBadRequest, status)
		var body map[string]string
		require.NoError(t, json.Unmarshal(resp, &body))
		require.True(t, strings.HasPrefix(body["error"], "invalid filters: "), string(resp))

		eleven := "[" + strings.TrimSuffix(strings.Repeat(`{"kinds":[1]},`, 11), ",") + "]"
		status, resp = brHTTP(t, r, "/query", alice, []byte(eleven))
		require.Equal(t, http.StatusBadRequest, status)
		require.JSONEq(t, `{"error":"invalid filters: at most 10 filters per request"}`, string(resp))
		ten := "[" + strings.TrimSuffix(strings.Repeat(`{"kinds":[1]},`, 10), ",") + "]"
		status, resp = brHTTP(t, r, "/query", alice, []byte(ten))
		require.Equal(t, http.StatusOK, status, string(resp))

		status, resp = brHTTP(t, r, "/query", alice, []byte(`[{"kinds":[1],"before_id":"`+strings.Repeat("a", 64)+`"}]`))
		require.Equal(t, http.StatusBadRequest, status)
		require.JSONEq(t, `{"error":"before_id requires until to be set"}`, string(resp))
		status, resp = brHTTP(t, r, "/query", alice, []byte(`[{"kinds":[1],"until":1,"before_id":"zz"}]`))
		require.Equal(t, http.StatusBadRequest, status)
		require.JSONEq(t, `{"error":"before_id must be a 64-char hex event id"}`, string(resp))
	})

	t.Run("KeysetPagingOverOneSecond", func(t *testing.T) { // checks 103 and 107
		t.Parallel()
		poster := eventtest.NewKey()
		ch := rpAddChannel(t, r, "", "open", poster)
		ts := time.Now().Unix() - 30
		msgs := rpSignMany(t, poster, 9, 2500, func(i int) []eventtest.Option {
			return []eventtest.Option{eventtest.Channel(ch), eventtest.At(ts), eventtest.Content("m" + strconv.Itoa(i))}
		})
		rpInsertEvents(t, r, "", ch, msgs)

		seen := map[string]int{}
		var pages []int
		filter := map[string]any{"kinds": []int{9}, "#h": []string{ch}, "limit": 1000, "until": ts + 10}
		for range 10 {
			b, _ := json.Marshal([]any{filter})
			page := brQuery(t, r, alice, string(b))
			pages = append(pages, len(page))
			if len(page) == 0 {
				break
			}
			for _, id := range page {
				seen[id]++
			}
			filter["until"] = ts
			filter["before_id"] = page[len(page)-1]
		}
		require.Equal(t, []int{1000, 1000, 500, 0}, pages)
		require.Len(t, seen, 2500)
		for _, m := range msgs {
			require.Equal(t, 1, seen[m.ID], m.ID)
		}

		status, resp := brHTTP(t, r, "/count", alice, []byte(`[{"kinds":[9],"#h":["`+ch+`"]}]`))
		require.Equal(t, http.StatusOK, status, string(resp))
		require.JSONEq(t, `{"count":2500}`, string(resp))
	})

	t.Run("PGated", func(t *testing.T) {
		t.Parallel()
		status, resp := brHTTP(t, r, "/query", alice, []byte(`[{"kinds":[1059]}]`))
		require.Equal(t, http.StatusForbidden, status)
		require.JSONEq(t, `{"error":"restricted: p-gated kinds require #p tag matching your pubkey"}`, string(resp))
		status, resp = brHTTP(t, r, "/query", alice, []byte(`[{"kinds":[1059],"#p":["`+alice.PubKey+`"]}]`))
		require.Equal(t, http.StatusOK, status, string(resp))
		require.JSONEq(t, `[]`, string(resp))
	})

	t.Run("DuplicatesRemoved", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		x := author.Signed(t, 1, eventtest.Content("x"))
		rpAuthed(t, r, "", author).MustPublish(x)
		got := brQuery(t, r, alice, `[{"ids":["`+x.ID+`"]},{"authors":["`+author.PubKey+`"],"kinds":[1]}]`)
		require.Equal(t, []string{x.ID}, got)
	})

	t.Run("CountOpenChannel", func(t *testing.T) {
		t.Parallel()
		poster := eventtest.NewKey()
		ch := rpAddChannel(t, r, "", "open", poster)
		w := rpAuthed(t, r, "", poster)
		for i := range 3 {
			w.MustPublish(poster.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("n"+strconv.Itoa(i))))
		}
		status, resp := brHTTP(t, r, "/count", alice, []byte(`[{"kinds":[9],"#h":["`+ch+`"]}]`))
		require.Equal(t, http.StatusOK, status, string(resp))
		require.JSONEq(t, `{"count":3}`, string(resp))
		priv := rpAddChannel(t, r, "", "private", poster)
		status, resp = brHTTP(t, r, "/count", alice, []byte(`[{"kinds":[9],"#h":["`+priv+`"]}]`))
		require.Equal(t, http.StatusOK, status, string(resp))
		require.JSONEq(t, `{"count":0}`, string(resp))
		status, resp = brHTTP(t, r, "/count", alice, []byte(`[{"kinds":[9],"search":"n"}]`))
		require.Equal(t, http.StatusBadRequest, status)
		require.JSONEq(t, `{"error":"search is not supported in COUNT"}`, string(resp))
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		t.Parallel()
		status, resp := brHTTP(t, r, "/query", alice, bytes.Repeat([]byte("x"), 2<<20))
		require.Equal(t, http.StatusRequestEntityTooLarge, status)
		require.Equal(t, `{"error":"request body too large"}`, string(resp))
		// POST /events follows BUZZ_MAX_EVENT_BYTES instead (docs/OPERATIONS.md "Byte budgets").
		status, resp = brHTTP(t, r, "/events", alice, bytes.Repeat([]byte("x"), 2<<20))
		require.Equal(t, http.StatusRequestEntityTooLarge, status)
		require.Equal(t, `{"error":"invalid: event too large (2097152 bytes, maximum 393216)"}`, string(resp))
	})
}

func TestBridgeXPubkeyShortcut(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_REQUIRE_AUTH_TOKEN": "false"})
	bob, eve := eventtest.NewKey(), eventtest.NewKey()

	ev := bob.Signed(t, 1, eventtest.Content("via X-Pubkey"))
	body, _ := json.Marshal(ev)
	status, resp := r.Do(t, relaytest.Request{Path: "/events", Header: map[string]string{"X-Pubkey": strings.ToUpper(bob.PubKey)}, Body: body})
	require.Equal(t, http.StatusOK, status, string(resp))
	require.JSONEq(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, string(resp))

	// Served as exactly that pubkey: another key's event is refused.
	status, resp = r.Do(t, relaytest.Request{Path: "/events", Header: map[string]string{"X-Pubkey": eve.PubKey}, Body: mustJSON(t, bob.Signed(t, 1))})
	require.Equal(t, http.StatusForbidden, status)
	require.JSONEq(t, `{"error":"invalid: event pubkey does not match authenticated identity"}`, string(resp))
	// And the p-gate sees it as the reader.
	status, resp = r.Do(t, relaytest.Request{Path: "/query", Header: map[string]string{"X-Pubkey": bob.PubKey}, Body: []byte(`[{"kinds":[1059],"#p":["` + bob.PubKey + `"]}]`)})
	require.Equal(t, http.StatusOK, status, string(resp))
	status, _ = r.Do(t, relaytest.Request{Path: "/query", Header: map[string]string{"X-Pubkey": eve.PubKey}, Body: []byte(`[{"kinds":[1059],"#p":["` + bob.PubKey + `"]}]`)})
	require.Equal(t, http.StatusForbidden, status)

	status, resp = r.Do(t, relaytest.Request{Path: "/query", Header: map[string]string{"X-Pubkey": "xyz"}, Body: []byte(`[{"kinds":[1]}]`)})
	require.Equal(t, http.StatusUnauthorized, status)
	require.JSONEq(t, `{"error":"invalid X-Pubkey hex"}`, string(resp))
	status, resp = r.Do(t, relaytest.Request{Path: "/query", Body: []byte(`[{"kinds":[1]}]`)})
	require.Equal(t, http.StatusUnauthorized, status)
	require.JSONEq(t, `{"error":"missing Nostr auth"}`, string(resp))
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestBridgeInternalFailure(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil, rpFailingReads())
	alice := eventtest.NewKey()
	status, resp := brHTTP(t, r, "/query", alice, []byte(`[{"kinds":[1,`+strconv.Itoa(rpInjectedKind)+`]}]`))
	require.Equal(t, http.StatusInternalServerError, status)
	require.Equal(t, `{"error":"internal server error"}`, string(resp))
	// Other reads still work.
	status, resp = brHTTP(t, r, "/query", alice, []byte(`[{"kinds":[1]}]`))
	require.Equal(t, http.StatusOK, status, string(resp))
}
