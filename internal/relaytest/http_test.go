package relaytest_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestHTTP checks the bridge helpers against a real relay: each request
// gets its own single-use token for its exact URL and method, and the
// options that exist for refusals reach the relay unchanged.
func TestHTTP(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice := eventtest.NewKey()
	query := []byte(`[{"kinds":[1]}]`)

	t.Run("FreshTokenPerRequest", func(t *testing.T) {
		t.Parallel()
		for range 3 { // the same request within one second: never a replay
			status, body := r.HTTP(t, "", http.MethodPost, "/query", &alice, query)
			require.Equal(t, http.StatusOK, status, string(body))
		}
	})

	t.Run("TokenForTheTenantHost", func(t *testing.T) {
		t.Parallel()
		host := r.Community(t, "tenant")
		status, body := r.HTTP(t, host, http.MethodPost, "/query", &alice, query)
		require.Equal(t, http.StatusOK, status, string(body))
		status, body = r.HTTP(t, "nowhere.test", http.MethodPost, "/query", &alice, query)
		require.Equal(t, http.StatusNotFound, status, string(body))
	})

	t.Run("NoKeyNoAuthorization", func(t *testing.T) {
		t.Parallel()
		status, body := r.HTTP(t, "", http.MethodPost, "/query", nil, query)
		require.Equal(t, http.StatusUnauthorized, status)
		require.JSONEq(t, `{"error":"missing Nostr auth"}`, string(body))
	})

	t.Run("AuthorizationSentAsIs", func(t *testing.T) {
		t.Parallel()
		tok := relaytest.Token(t, alice, "http://"+r.Host+"/query", http.MethodPost)
		status, body := r.Do(t, relaytest.Request{Path: "/query", Authorization: tok, Key: &alice, Body: query})
		require.Equal(t, http.StatusOK, status, string(body))
		status, body = r.Do(t, relaytest.Request{Path: "/query", Authorization: tok, Body: query})
		require.Equal(t, http.StatusUnauthorized, status, "Authorization wins over Key, so this is a replay")
		require.JSONEq(t, `{"error":"NIP-98: replay detected"}`, string(body))
	})

	t.Run("TamperedToken", func(t *testing.T) {
		t.Parallel()
		ev := relaytest.NIP98(t, alice, "http://"+r.Host+"/query", http.MethodPost)
		ev.Content = "changed after signing"
		status, _ := r.Do(t, relaytest.Request{Path: "/query", Authorization: relaytest.Authorization(ev), Body: query})
		require.Equal(t, http.StatusUnauthorized, status)
		old := relaytest.Token(t, alice, "http://"+r.Host+"/query", http.MethodPost, eventtest.At(time.Now().Unix()-3600))
		status, _ = r.Do(t, relaytest.Request{Path: "/query", Authorization: old, Body: query})
		require.Equal(t, http.StatusUnauthorized, status, "options apply before signing")
	})

	t.Run("MethodPathAndHeaders", func(t *testing.T) {
		t.Parallel()
		resp := r.Exchange(t, relaytest.Request{Method: http.MethodGet, Path: "/",
			Header: map[string]string{"Accept": "application/nostr+json"}})
		require.Equal(t, http.StatusOK, resp.Status)
		require.Equal(t, "application/nostr+json", resp.Header.Get("Content-Type"))
		resp = r.Exchange(t, relaytest.Request{Method: http.MethodGet, Path: "/health"})
		require.Equal(t, http.StatusOK, resp.Status)
		require.Equal(t, "ok", string(resp.Body))
	})

	t.Run("PostEvent", func(t *testing.T) {
		t.Parallel()
		ev := alice.Signed(t, 1, eventtest.Content("via the helper"))
		status, body := r.PostEvent(t, "", alice, ev)
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, body)
		status, body = r.PostEvent(t, "", eventtest.NewKey(), alice.Signed(t, 1, eventtest.Content(strconv.Itoa(2))))
		require.Equal(t, http.StatusForbidden, status, body)
	})
}
