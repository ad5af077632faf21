package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/store"
)

const membershipBody = `{"error":"relay_membership_required","message":"You must be a relay member to access this relay"}`

func TestBridgeAuth(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	query := []byte(`[{"kinds":[9],"#h":["general"]}]`)

	t.Run("ReplayDetected", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		ev := b.key.Signed(t, 9, eventtest.Channel(b.general))
		body := ev.AppendJSON(nil)
		h := nip98(t, b.key, "POST", b.urlA("/events"), nil)
		res := b.do(t, http.MethodPost, b.ta.Host, "/events", body, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Contains(t, res.body, `"accepted":true`)
		res = b.do(t, http.MethodPost, b.ta.Host, "/events", []byte("{}"), map[string]string{"Authorization": h})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.JSONEq(t, errorJSON("NIP-98: replay detected"), res.body)
		require.Equal(t, 1, b.replayRows(t, b.ta.CommunityID), "the token's id is recorded once")
	})

	t.Run("ReplayIsPerCommunity", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		// The same token id used in another community first does not count as used here.
		tok := nip98Event(t, b.key, "POST", b.urlA("/query"), query)
		fresh, err := b.st.NIP98Use(context.Background(), b.tb.CommunityID, tok.ID)
		require.NoError(t, err)
		require.True(t, fresh)
		res := b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"Authorization": authHeader(tok)})
		require.Equal(t, http.StatusOK, res.status, res.body)
		res = b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"Authorization": authHeader(tok)})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("NIP-98: replay detected"), res.body)
	})

	t.Run("FailureMessages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
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
			{"Kind1", auth1(t, k, b.urlA("/query")), "NIP-98: expected kind 27235, got 1"},
			{"Old", nip98(t, k, "POST", b.urlA("/query"), query, eventtest.At(old)), "NIP-98: event timestamp outside ±60s window (delta: 120s)"},
			{"OtherHost", nip98(t, k, "POST", "http://"+b.tb.Host+"/query", query),
				"NIP-98: URL mismatch: event has `http://" + b.tb.Host + "/query`, expected `" + b.urlA("/query") + "`"},
			{"OtherPath", nip98(t, k, "POST", b.urlA("/count"), query),
				"NIP-98: URL mismatch: event has `" + b.urlA("/count") + "`, expected `" + b.urlA("/query") + "`"},
			{"MethodGET", nip98(t, k, "GET", b.urlA("/query"), query), "NIP-98: method mismatch: event has `GET`, expected `POST`"},
			{"OtherPayload", nip98(t, k, "POST", b.urlA("/query"), []byte("[]")), "NIP-98: payload tag SHA-256 mismatch: request body does not match signed hash"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				res := b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"Authorization": tc.header})
				require.Equal(t, http.StatusUnauthorized, res.status)
				require.Equal(t, errorJSON(tc.msg), res.body)
			})
		}
	})

	t.Run("RefusedTokenKeepsItsID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		tok := nip98Event(t, b.key, "POST", b.urlA("/query"), []byte("other"))
		h := authHeader(tok)
		require.Equal(t, http.StatusUnauthorized, b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"Authorization": h}).status)
		require.Zero(t, b.replayRows(t, b.ta.CommunityID))
		// The id is still unused: the store takes it as fresh.
		fresh, err := b.st.NIP98Use(context.Background(), b.ta.CommunityID, tok.ID)
		require.NoError(t, err)
		require.True(t, fresh)
	})

	t.Run("ReplayStoreDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		_, ro := d.readOnlyStore(t)
		b = b.serve(t, func(c *httpapi.Config) { c.Replay = ro })
		res := b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("NIP-98: replay check unavailable"), res.body)
		require.Zero(t, b.reads.calls.Load(), "the request went no further")
	})

	t.Run("QueryString", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		h := nip98(t, b.key, "POST", b.urlA("/query"), query)
		res := b.do(t, http.MethodPost, b.ta.Host, "/query?x=1", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Contains(t, res.body, "NIP-98: URL mismatch")
		h = nip98(t, b.key, "POST", b.urlA("/query?x=1"), query)
		res = b.do(t, http.MethodPost, b.ta.Host, "/query?x=1", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
	})

	t.Run("LoopbackTokenForLocalhostTenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		_, port, ok := strings.Cut(b.local.Host, ":")
		require.True(t, ok)
		h := nip98(t, b.key, "POST", "http://127.0.0.1:"+port+"/query", query)
		res := b.do(t, http.MethodPost, b.local.Host, "/query", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Equal(t, 1, b.replayRows(t, b.local.CommunityID))
	})

	t.Run("SecureExpectsHTTPS", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d, func(c *httpapi.Config) { c.Settings.RelayScheme = "wss" })
		res := b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusUnauthorized, res.status)
		h := nip98(t, b.key, "POST", "https://"+b.ta.Host+"/query", query)
		res = b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"Authorization": h})
		require.Equal(t, http.StatusOK, res.status, res.body)
	})

	t.Run("XPubkeyIgnoredByDefault", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"X-Pubkey": b.key.PubKey})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("missing Nostr auth"), res.body)
	})

	t.Run("XPubkeyShortcut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d, func(c *httpapi.Config) { c.Settings.RequireAuthToken = false })
		ev := b.key.Signed(t, 9, eventtest.Channel(b.general))
		res := b.do(t, http.MethodPost, b.ta.Host, "/events", ev.AppendJSON(nil),
			map[string]string{"X-Pubkey": strings.ToUpper(b.key.PubKey)})
		require.Equal(t, http.StatusOK, res.status, res.body)
		// The pipeline accepts only an event whose pubkey is the author it
		// was given: the lowercased X-Pubkey.
		require.Equal(t, `{"event_id":"`+ev.ID+`","accepted":true,"message":""}`, res.body)
		got := b.fan.of(ev.ID)
		require.Len(t, got, 1)
		require.Equal(t, b.key.PubKey, got[0].Event.PubKey)
		require.Zero(t, b.replayRows(t, b.ta.CommunityID))

		res = b.do(t, http.MethodPost, b.ta.Host, "/query", query, map[string]string{"X-Pubkey": "xyz"})
		require.Equal(t, http.StatusUnauthorized, res.status)
		require.Equal(t, errorJSON("invalid X-Pubkey hex"), res.body)

		res = b.do(t, http.MethodPost, b.ta.Host, "/query", query, nil)
		require.Equal(t, errorJSON("missing Nostr auth"), res.body)
	})

	t.Run("UnmappedHostBeforeAuth", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodPost, "nowhere.test", "/query", query, nil)
		require.Equal(t, http.StatusNotFound, res.status)
		require.Equal(t, `{"error":"relay: no community is configured for this host"}`, res.body)
	})

	t.Run("BodyTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		big := bytes.Repeat([]byte("a"), 2<<20) // over MaxBodyBytes, the limit of /query
		res := b.do(t, http.MethodPost, b.ta.Host, "/query", big, nil)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.status)
		require.Equal(t, `{"error":"request body too large"}`, res.body)

		// Without a Content-Length the limit still holds.
		req, err := http.NewRequest(http.MethodPost, b.url+"/query", struct{ *bytes.Reader }{bytes.NewReader(big)})
		require.NoError(t, err)
		req.Host = b.ta.Host
		resp, err := b.client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})

	t.Run("RelayMembership", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d, func(c *httpapi.Config) { c.Settings.RequireRelayMembership = true })
		res := b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, membershipBody, res.body)

		// A member of another community is not a member here.
		fixture.RelayMember(t, d.pool, b.tb.CommunityID, b.key, "member")
		res = b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusForbidden, res.status)
		require.Equal(t, membershipBody, res.body)

		fixture.RelayMember(t, d.pool, b.ta.CommunityID, b.key, "member")
		require.Equal(t, http.StatusOK, b.signedPost(t, b.key, "/query", query).status)

		removed, err := store.New(d.pool).RelayMemberRemove(context.Background(), b.ta.CommunityID, b.key.PubKey)
		require.NoError(t, err)
		require.True(t, removed)
		res = b.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusForbidden, res.status, "the gate reads the allowlist on every request")
		require.Equal(t, membershipBody, res.body)

		down := b.serve(t, func(c *httpapi.Config) { c.Members = d.downStore(t) })
		res = down.signedPost(t, b.key, "/query", query)
		require.Equal(t, http.StatusInternalServerError, res.status)
		require.Equal(t, `{"error":"internal server error"}`, res.body)
	})
}

// authHeader is the Authorization header of a signed NIP-98 token.
func authHeader(tok event.Event) string { return auth.NIP98Header(tok) }

// auth1 is a correctly signed token of kind 1 instead of 27235.
func auth1(t *testing.T, k eventtest.Key, url string) string {
	t.Helper()
	ev := k.Signed(t, 1, eventtest.Tag("u", url), eventtest.Tag("method", "POST"))
	return "Nostr " + base64.StdEncoding.EncodeToString(ev.AppendJSON(nil))
}

func TestBridgeCORS(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("AnyOrigin", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodPost, "nowhere.test", "/query", nil, map[string]string{"Origin": "https://x.test"})
		require.Equal(t, "*", res.header.Get("Access-Control-Allow-Origin"))
	})

	t.Run("ListedOrigins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d, func(c *httpapi.Config) { c.Settings.CORSOrigins = []string{"https://app.test"} })
		res := b.do(t, http.MethodPost, b.ta.Host, "/query", nil, map[string]string{"Origin": "https://app.test"})
		require.Equal(t, "https://app.test", res.header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "Origin", res.header.Get("Vary"))
		res = b.do(t, http.MethodPost, b.ta.Host, "/query", nil, map[string]string{"Origin": "https://evil.test"})
		require.Empty(t, res.header.Get("Access-Control-Allow-Origin"))
	})

	t.Run("Preflight", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		res := b.do(t, http.MethodOptions, "nowhere.test", "/events", nil, map[string]string{"Origin": "https://x.test"})
		require.Equal(t, http.StatusNoContent, res.status)
		require.Equal(t, "*", res.header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "GET, POST, OPTIONS", res.header.Get("Access-Control-Allow-Methods"))
		require.Equal(t, "Authorization, Content-Type, X-Pubkey", res.header.Get("Access-Control-Allow-Headers"))
	})
}
