package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

var now = time.Unix(1_700_000_000, 0)

type tokenOpts struct {
	kind    int
	at      int64
	url     string
	method  string
	payload string
	noURL   bool
	noMeth  bool
}

func token(t *testing.T, k eventtest.Key, o tokenOpts) event.Event {
	t.Helper()
	if o.kind == 0 {
		o.kind = auth.KindHTTPAuth
	}
	if o.at == 0 {
		o.at = now.Unix()
	}
	if o.url == "" {
		o.url = "http://a.test/events"
	}
	if o.method == "" {
		o.method = "POST"
	}
	opts := []eventtest.Option{eventtest.At(o.at), eventtest.Content("")}
	if !o.noURL {
		opts = append(opts, eventtest.Tag("u", o.url))
	}
	if !o.noMeth {
		opts = append(opts, eventtest.Tag("method", o.method))
	}
	if o.payload != "" {
		opts = append(opts, eventtest.Tag("payload", o.payload))
	}
	return k.Signed(t, o.kind, opts...)
}

func request(h string) auth.NIP98Request {
	return auth.NIP98Request{
		Header: h, Method: "POST", Path: "/events", Body: []byte(`{"x":1}`),
		TenantHost: "a.test", Now: now,
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func requireMessage(t *testing.T, err error, msg string) {
	t.Helper()
	var ne *auth.NIP98Error
	require.True(t, errors.As(err, &ne), "error %v is not a NIP98Error", err)
	require.Equal(t, msg, ne.Message)
}

func TestVerifyNIP98(t *testing.T) {
	t.Parallel()
	k := eventtest.NewKey()

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		tok := token(t, k, tokenOpts{payload: sha([]byte(`{"x":1}`))})
		ev, err := auth.VerifyNIP98(request(auth.NIP98Header(tok)))
		require.NoError(t, err)
		require.Equal(t, tok.ID, ev.ID)
		require.Equal(t, k.PubKey, ev.PubKey)
	})

	cases := []struct {
		name   string
		header func(t *testing.T) string
		change func(r *auth.NIP98Request)
		msg    string
	}{
		{"MissingHeader", func(*testing.T) string { return "" }, nil, "missing Nostr auth"},
		{"WrongScheme", func(*testing.T) string { return "Bearer abc" }, nil, "missing Nostr auth"},
		{"BadBase64", func(*testing.T) string { return "Nostr %%%" }, nil, "invalid base64 in Nostr auth"},
		{"BadUTF8", func(*testing.T) string { return "Nostr " + base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe}) }, nil, "invalid UTF-8 in Nostr auth"},
		{"BadJSON", func(*testing.T) string { return "Nostr " + base64.StdEncoding.EncodeToString([]byte(`{"kind":1}`)) }, nil, "invalid NIP-98 event JSON"},
		{"WrongKind", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{kind: 1})) }, nil, "NIP-98: expected kind 27235, got 1"},
		{"BadSignature", func(t *testing.T) string {
			ev := token(t, k, tokenOpts{})
			ev.Content = "changed"
			return auth.NIP98Header(ev)
		}, nil, "NIP-98: invalid Schnorr signature"},
		{"TooOld", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{at: now.Unix() - 61})) }, nil,
			"NIP-98: event timestamp outside ±60s window (delta: 61s)"},
		{"TooNew", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{at: now.Unix() + 90})) }, nil,
			"NIP-98: event timestamp outside ±60s window (delta: 90s)"},
		{"MissingURL", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{noURL: true})) }, nil, "NIP-98: missing `u` tag"},
		{"OtherHost", func(t *testing.T) string {
			return auth.NIP98Header(token(t, k, tokenOpts{url: "http://b.test/events"}))
		}, nil,
			"NIP-98: URL mismatch: event has `http://b.test/events`, expected `http://a.test/events`"},
		{"OtherPath", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{url: "http://a.test/query"})) }, nil,
			"NIP-98: URL mismatch: event has `http://a.test/query`, expected `http://a.test/events`"},
		{"OtherScheme", func(t *testing.T) string {
			return auth.NIP98Header(token(t, k, tokenOpts{url: "https://a.test/events"}))
		}, nil,
			"NIP-98: URL mismatch: event has `https://a.test/events`, expected `http://a.test/events`"},
		{"QueryNotSigned", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{})) },
			func(r *auth.NIP98Request) { r.RawQuery = "x=1" },
			"NIP-98: URL mismatch: event has `http://a.test/events`, expected `http://a.test/events?x=1`"},
		{"MissingMethod", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{noMeth: true})) }, nil, "NIP-98: missing `method` tag"},
		{"OtherMethod", func(t *testing.T) string { return auth.NIP98Header(token(t, k, tokenOpts{method: "GET"})) }, nil,
			"NIP-98: method mismatch: event has `GET`, expected `POST`"},
		{"OtherPayload", func(t *testing.T) string {
			return auth.NIP98Header(token(t, k, tokenOpts{payload: sha([]byte("other"))}))
		}, nil,
			"NIP-98: payload tag SHA-256 mismatch: request body does not match signed hash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := request(tc.header(t))
			if tc.change != nil {
				tc.change(&r)
			}
			_, err := auth.VerifyNIP98(r)
			requireMessage(t, err, tc.msg)
		})
	}

	accepted := []struct {
		name   string
		url    string
		method string
		change func(r *auth.NIP98Request)
	}{
		{"TrailingSlash", "http://a.test/events/", "", nil},
		{"DefaultPort", "http://A.TEST:80/events", "", nil},
		{"MethodCase", "", "post", nil},
		{"LoopbackIsLocalhost", "http://127.0.0.1:3000/query", "", func(r *auth.NIP98Request) {
			r.TenantHost, r.Path = "localhost:3000", "/query"
		}},
		{"SignedQuery", "http://a.test/events?x=1", "", func(r *auth.NIP98Request) { r.RawQuery = "x=1" }},
		{"Secure", "https://a.test/events", "", func(r *auth.NIP98Request) { r.Secure = true }},
		{"EdgeOfWindow", "", "", func(r *auth.NIP98Request) { r.Now = now.Add(60 * time.Second) }},
	}
	for _, tc := range accepted {
		t.Run("Accepts"+tc.name, func(t *testing.T) {
			t.Parallel()
			r := request(auth.NIP98Header(token(t, k, tokenOpts{url: tc.url, method: tc.method})))
			if tc.change != nil {
				tc.change(&r)
			}
			_, err := auth.VerifyNIP98(r)
			require.NoError(t, err)
		})
	}
}

func TestParseNIP98HeaderUnpadded(t *testing.T) {
	t.Parallel()
	ev := token(t, eventtest.NewKey(), tokenOpts{})
	h := "Nostr " + base64.RawStdEncoding.EncodeToString(ev.AppendJSON(nil))
	got, err := auth.ParseNIP98Header(h)
	require.NoError(t, err)
	require.Equal(t, ev, got)
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	_, ok := auth.IdentityFrom(context.Background())
	require.False(t, ok)
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Pubkey: "ab"})
	id, ok := auth.IdentityFrom(ctx)
	require.True(t, ok)
	require.Equal(t, "ab", id.Pubkey)
}

func FuzzNIP98Header(f *testing.F) {
	k := eventtest.NewKey()
	ev := k.Signed(f, auth.KindHTTPAuth, eventtest.Tag("u", "http://a.test/events"), eventtest.Tag("method", "POST"))
	f.Add(auth.NIP98Header(ev))
	f.Add("")
	f.Add("Nostr ")
	f.Add("Nostr e30=")
	f.Add("Nostr //79")
	f.Add("Nostr " + base64.StdEncoding.EncodeToString([]byte(`{"id":"","tags":null}`)))
	f.Fuzz(func(t *testing.T, h string) {
		ev, err := auth.ParseNIP98Header(h) // must never panic
		if err != nil {
			var ne *auth.NIP98Error
			require.ErrorAs(t, err, &ne)
			return
		}
		again, err := auth.ParseNIP98Header(auth.NIP98Header(ev))
		require.NoError(t, err)
		require.Equal(t, ev, again)
		_, _ = auth.VerifyNIP98(auth.NIP98Request{Header: h, Method: "POST", Path: "/events", TenantHost: "a.test"})
	})
}
