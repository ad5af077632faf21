package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/httpapi"
)

const membershipBody = `{"error":"relay_membership_required","message":"You must be a relay member to access this relay"}`

func TestBridgeAuth(t *testing.T) {
	t.Parallel()
	query := []byte(`[{"kinds":[9],"#h":["general"]}]`)

	t.Run("ReplayDetected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ev := b.key.Signed(t, 9, eventtest.Channel("general"))
		body := ev.AppendJSON(nil)
		h := nip98(t, b.key, "POST", "http://a.test/events", nil)
		res := b.do(t, http.MethodPost, "a.test", "/events", body, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Contains(t, res.body, `"accepted":true`)
		res = b.do(t, http.MethodPost, "a.test", "/events", []byte("{}"), map[string]string{"Authorization": h})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.JSONEq(t, errorJSON("NIP-98: replay detected"), res.body)
	})

	t.Run("FailureMessages", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		k := eventtest.NewKey()
		old := b.now.Unix() - 120
		cases := []struct {
			name   string
			header string
			msg    string
		}{
			{"Missing", "", "missing Nostr auth"},
			{"BadBase64", "Nostr !!!", "invalid base64 in Nostr auth"},
			{"NotUTF8", "Nostr " + base64.StdEncoding.EncodeToString([]byte{0xc3, 0x28}), "invalid UTF-8 in Nostr auth"},
			{"NotEvent", "Nostr " + base64.StdEncoding.EncodeToString([]byte(`[1]`)), "invalid NIP-98 event JSON"},
			{"Kind1", auth1(t, k), "NIP-98: expected kind 27235, got 1"},
			{"Old", nip98(t, k, "POST", "http://a.test/query", query, eventtest.At(old)), "NIP-98: event timestamp outside ±60s window (delta: 120s)"},
			{"OtherHost", nip98(t, k, "POST", "http://b.test/query", query), "NIP-98: URL mismatch: event has `http://b.test/query`, expected `http://a.test/query`"},
			{"OtherPath", nip98(t, k, "POST", "http://a.test/count", query), "NIP-98: URL mismatch: event has `http://a.test/count`, expected `http://a.test/query`"},
			{"MethodGET", nip98(t, k, "GET", "http://a.test/query", query), "NIP-98: method mismatch: event has `GET`, expected `POST`"},
			{"OtherPayload", nip98(t, k, "POST", "http://a.test/query", []byte("[]")), "NIP-98: payload tag SHA-256 mismatch: request body does not match signed hash"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				res := b.do(t, http.MethodPost, "a.test", "/query", query, map[string]string{"Authorization": tc.header})
				require.Equal(t, http.StatusUnauthorized, res.status)
				require.Equal(t, errorJSON(tc.msg), res.body)
			})
		}
	})

	t.Run("RefusedTokenKeepsItsID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := nip98(t, b.key, "POST", "http://a.test/query", []byte("other"))
		require.Equal(t, http.StatusUnauthorized, b.do(t, http.MethodPost, "a.test", "/query", query, map[string]string{"Authorization": h}).status)
		require.Zero(t, b.replay.size())
	})

	t.Run("ReplayStoreDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.replay.fail = true
		res := b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("NIP-98: replay check unavailable"), res.body)
	})

	t.Run("QueryString", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := nip98(t, b.key, "POST", "http://a.test/query", query)
		res := b.do(t, http.MethodPost, "a.test", "/query?x=1", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Contains(t, res.body, "NIP-98: URL mismatch")
		h = nip98(t, b.key, "POST", "http://a.test/query?x=1", query)
		res = b.do(t, http.MethodPost, "a.test", "/query?x=1", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
	})

	t.Run("LoopbackTokenForLocalhostTenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := nip98(t, b.key, "POST", "http://127.0.0.1:3000/query", query)
		res := b.do(t, http.MethodPost, "localhost:3000", "/query", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
	})

	t.Run("SecureExpectsHTTPS", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *httpapi.Config) { c.Secure = true })
		res := b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusUnauthorized, res.status)
		h := nip98(t, b.key, "POST", "https://a.test/query", query)
		res = b.do(t, http.MethodPost, "a.test", "/query", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
	})

	t.Run("XPubkeyIgnoredByDefault", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPost, "a.test", "/query", query, map[string]string{"X-Pubkey": b.key.PubKey})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("missing Nostr auth"), res.body)
	})

	t.Run("XPubkeyShortcut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *httpapi.Config) { c.RequireAuthToken = false })
		ev := b.key.Signed(t, 9, eventtest.Channel("general"))
		res := b.do(t, http.MethodPost, "a.test", "/events", ev.AppendJSON(nil),
			map[string]string{"X-Pubkey": strings.ToUpper(b.key.PubKey)})
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, b.key.PubKey, b.store.submitted[0].Author)
		require.Zero(t, b.replay.size())

		res = b.do(t, http.MethodPost, "a.test", "/query", query, map[string]string{"X-Pubkey": "xyz"})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("invalid X-Pubkey hex"), res.body)

		res = b.do(t, http.MethodPost, "a.test", "/query", query, nil)
		require.Equal(t, errorJSON("missing Nostr auth"), res.body)
	})

	t.Run("UnmappedHostBeforeAuth", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPost, "nowhere.test", "/query", query, nil)
		require.Equal(t, http.StatusNotFound, res.status)
		require.Equal(t, `{"error":"relay: no community is configured for this host"}`, res.body)
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		big := bytes.Repeat([]byte("a"), 2<<20)
		res := b.do(t, http.MethodPost, "a.test", "/events", big, nil)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.status)
		require.Equal(t, `{"error":"request body too large"}`, res.body)

		// Without a Content-Length the limit still holds.
		req, err := http.NewRequest(http.MethodPost, b.url+"/events", struct{ *bytes.Reader }{bytes.NewReader(big)})
		require.NoError(t, err)
		req.Host = "a.test"
		resp, err := b.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})

	t.Run("RelayMembership", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *httpapi.Config) { c.RequireRelayMembership = true })
		res := b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, membershipBody, res.body)

		b.members.mu.Lock()
		b.members.members["c-a/"+b.key.PubKey] = true
		b.members.mu.Unlock()
		require.Equal(t, http.StatusOK, b.signedPost(t, b.key, "/query", query).status)

		b.members.mu.Lock()
		b.members.fail = true
		b.members.mu.Unlock()
		res = b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusInternalServerError, res.status)
		require.Equal(t, `{"error":"internal server error"}`, res.body)
	})
}

// auth1 is a correctly signed token of kind 1 instead of 27235.
func auth1(t *testing.T, k eventtest.Key) string {
	t.Helper()
	ev := k.Signed(t, 1, eventtest.Tag("u", "http://a.test/query"), eventtest.Tag("method", "POST"))
	return "Nostr " + base64.StdEncoding.EncodeToString(ev.AppendJSON(nil))
}

func TestBridgeCORS(t *testing.T) {
	t.Parallel()

	t.Run("AnyOrigin", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodPost, "nowhere.test", "/query", nil, map[string]string{"Origin": "https://x.test"})
		require.Equal(t, "*", res.header.Get("Access-Control-Allow-Origin"))
	})

	t.Run("ListedOrigins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *httpapi.Config) { c.CORSOrigins = []string{"https://app.test"} })
		res := b.do(t, http.MethodPost, "a.test", "/query", nil, map[string]string{"Origin": "https://app.test"})
		require.Equal(t, "https://app.test", res.header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "Origin", res.header.Get("Vary"))
		res = b.do(t, http.MethodPost, "a.test", "/query", nil, map[string]string{"Origin": "https://evil.test"})
		require.Empty(t, res.header.Get("Access-Control-Allow-Origin"))
	})

	t.Run("Preflight", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := b.do(t, http.MethodOptions, "nowhere.test", "/events", nil, map[string]string{"Origin": "https://x.test"})
		require.Equal(t, http.StatusNoContent, res.status)
		require.Equal(t, "*", res.header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "GET, POST, OPTIONS", res.header.Get("Access-Control-Allow-Methods"))
		require.Equal(t, "Authorization, Content-Type, X-Pubkey", res.header.Get("Access-Control-Allow-Headers"))
	})
}
