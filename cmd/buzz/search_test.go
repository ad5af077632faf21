package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	buzzapp "github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// NIP-19's example key pair.
const (
	nip19Npub = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
	nip19Hex  = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
	nip19Nsec = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
)

func TestNpubToHex(t *testing.T) {
	t.Parallel()
	got, err := npubToHex(nip19Npub)
	require.NoError(t, err)
	require.Equal(t, nip19Hex, got)
	got, err = npubToHex(strings.ToUpper(nip19Npub))
	require.NoError(t, err)
	require.Equal(t, nip19Hex, got)

	bad := map[string]string{
		"BadChecksum": nip19Npub[:len(nip19Npub)-1] + "q",
		"MixedCase":   "NPUB" + nip19Npub[4:],
		"WrongPrefix": nip19Nsec,
		"BadChar":     "npub1" + strings.Repeat("b", 58),
		"TooShort":    "npub1qqqq",
		"NoSeparator": "npubqqqqqqqqqq",
	}
	for name, s := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := npubToHex(s)
			require.Error(t, err)
		})
	}
}

func TestSearchArgs(t *testing.T) {
	t.Parallel()
	upper := strings.ToUpper(nip19Hex)
	defKinds := []any{9.0, 40002.0, 40003.0, 45001.0, 45003.0}
	tests := []struct {
		name   string
		args   []string
		filter map[string]any // the filter sent, for a hex or npub author
		byName string         // the display name still to resolve
	}{
		{"Defaults", []string{"--query", "checkout"},
			map[string]any{"search": "checkout", "kinds": defKinds, "limit": 100.0}, ""},
		{"Prefix", []string{"--query", "proj pl", "--prefix"},
			map[string]any{"search": "proj pl", "kinds": defKinds, "limit": 100.0, "search_mode": "prefix"}, ""},
		{"Channel", []string{"--query", "x", "--channel", strings.ToUpper(testChannel)},
			map[string]any{"search": "x", "kinds": defKinds, "limit": 100.0, "#h": []any{testChannel}}, ""},
		{"HexAuthor", []string{"--query", "x", "--author", upper},
			map[string]any{"search": "x", "kinds": defKinds, "limit": 100.0, "authors": []any{nip19Hex}}, ""},
		{"Npub", []string{"--author", nip19Npub, "--query", "x"},
			map[string]any{"search": "x", "kinds": defKinds, "limit": 100.0, "authors": []any{nip19Hex}}, ""},
		{"Everything", []string{"--query", "x", "--kinds", "9, 45001,9", "--since", "10", "--until", "20", "--limit", "500"},
			map[string]any{"search": "x", "kinds": []any{9.0, 45001.0}, "since": 10.0, "until": 20.0, "limit": 500.0}, ""},
		{"LimitOne", []string{"--query", "x", "--limit", "1"},
			map[string]any{"search": "x", "kinds": defKinds, "limit": 1.0}, ""},
		{"DisplayName", []string{"--query", "x", "--author", "Aaron"},
			map[string]any{"search": "x", "kinds": defKinds, "limit": 100.0}, "Aaron"},
		{"ShortHexIsAName", []string{"--query", "x", "--author", "abc123"},
			map[string]any{"search": "x", "kinds": defKinds, "limit": 100.0}, "abc123"},

		{"NoQuery", []string{"--limit", "5"}, nil, ""},
		{"EmptyQuery", []string{"--query", ""}, nil, ""},
		{"BlankQuery", []string{"--query", " \t\n\x00 "}, nil, ""},
		{"LimitZero", []string{"--query", "x", "--limit", "0"}, nil, ""},
		{"Limit501", []string{"--query", "x", "--limit", "501"}, nil, ""},
		{"LimitNegative", []string{"--query", "x", "--limit", "-1"}, nil, ""},
		{"LimitNotNumber", []string{"--query", "x", "--limit", "ten"}, nil, ""},
		{"KindsEmpty", []string{"--query", "x", "--kinds", ""}, nil, ""},
		{"KindsBad", []string{"--query", "x", "--kinds", "9,x"}, nil, ""},
		{"KindsTooBig", []string{"--query", "x", "--kinds", "70000"}, nil, ""},
		{"BadChannel", []string{"--query", "x", "--channel", "general"}, nil, ""},
		{"BadNpub", []string{"--query", "x", "--author", nip19Npub[:len(nip19Npub)-1] + "q"}, nil, ""},
		{"BadSince", []string{"--query", "x", "--since", "yesterday"}, nil, ""},
		{"Positional", []string{"--query", "x", "extra"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseSearch(&app{getenv: func(string) string { return "" }}, tt.args)
			if tt.filter == nil {
				var ue *usageError
				require.ErrorAs(t, err, &ue)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.byName, o.authorName)
			f := o.filter(o.author)
			var got map[string]any
			require.NoError(t, json.Unmarshal(f.AppendJSON(nil), &got))
			require.Equal(t, tt.filter, got)
		})
	}
}

func TestProfileFilter(t *testing.T) {
	t.Parallel()
	f := profileFilter("Aaron")
	var got map[string]any
	require.NoError(t, json.Unmarshal(f.AppendJSON(nil), &got))
	require.Equal(t, map[string]any{"kinds": []any{0.0}, "search": "Aaron", "search_mode": "prefix", "limit": 50.0}, got)
}

func TestMatchProfiles(t *testing.T) {
	t.Parallel()
	pk := func(c byte) string { return strings.Repeat(string(c), 64) }
	profile := func(pubkey string, at int64, content string) event.Event {
		return event.Event{ID: pk('f'), PubKey: pubkey, CreatedAt: at, Kind: kindProfile, Content: content}
	}
	events := []event.Event{
		profile(pk('a'), 1, `{"name":"aaron"}`),
		profile(pk('b'), 1, `{"name":"b","display_name":"AARON"}`),
		profile(pk('c'), 2, `{"name":"Aaron"}`),
		profile(pk('c'), 3, `{"name":"carol","display_name":"Aaron Smith"}`), // newer: no longer Aaron
		profile(pk('d'), 1, `not json`),
		profile(pk('e'), 1, `{"name":7,"display_name":"Ann"}`),
		{ID: pk('f'), PubKey: pk('9'), Kind: 1, Content: `{"name":"aaron"}`}, // not a profile
	}
	matches, seen := matchProfiles(events, "Aaron")
	require.Equal(t, []profileCandidate{{PubKey: pk('a'), Name: "aaron"}, {PubKey: pk('b'), Name: "b", DisplayName: "AARON"}}, matches)
	require.Len(t, seen, 5)

	matches, _ = matchProfiles(events, "ann")
	require.Equal(t, []profileCandidate{{PubKey: pk('e'), DisplayName: "Ann"}}, matches)
	matches, seen = matchProfiles(nil, "x")
	require.Empty(t, matches)
	require.Empty(t, seen)
}

// runSearch runs "buzz messages search args…" with sk against relay and
// returns the exit status, stdout and stderr.
func runSearch(t *testing.T, relay, sk string, args ...string) (int, string, string) {
	t.Helper()
	env := func(k string) string {
		switch k {
		case "BUZZ_PRIVATE_KEY":
			return sk
		case "BUZZ_RELAY_URL":
			return relay
		}
		return ""
	}
	var out, errb bytes.Buffer
	code := run(t.Context(), append([]string{"messages", "search"}, args...), env, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// httpRequests is the relay's http_requests_total over every route and
// status: the bridge requests it has answered.
func httpRequests(t *testing.T, r *relaytest.Relay) float64 {
	t.Helper()
	families, err := r.App.Registry.Gather()
	require.NoError(t, err)
	n := 0.0
	for _, f := range families {
		if f.GetName() == "http_requests_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// errSearchFault is the database failure injected before the search
// statement of a query for "explode".
var errSearchFault = errors.New("injected search failure")

// TestSearchExitCodes runs the command against real relays: one as
// deployed by default, one behind TLS (its NIP-98 tokens name https), one
// stopped.
func TestSearchExitCodes(t *testing.T) {
	t.Parallel()
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	var mu sync.Mutex
	var searched []string // the search filters as the read door received them
	r := relaytest.Start(t, nil, buzzapp.Hooks{QueryHookFunc: func(ctx context.Context, f *event.Filter) error {
		if f.Search == nil || read.SearchStage(ctx) != "fts" {
			return nil
		}
		if *f.Search == "explode" {
			return errSearchFault
		}
		mu.Lock()
		searched = append(searched, string(f.AppendJSON(nil)))
		mu.Unlock()
		return nil
	}})
	lastSearched := func() string {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, searched)
		return searched[len(searched)-1]
	}
	relay := "ws://" + r.Host
	key := eventtest.NewKey()
	user := cliUser{t: t, relay: relay, sk: hex.EncodeToString(key.SK)}
	ch := user.ok("channels", "create", "--name", "general")["channel_id"].(string)
	hello := user.ok("messages", "send", "--channel", ch, "--content", "hello world")["event_id"].(string)
	// What the relay answers the body the command must send for the OK case.
	wantBody := `[{"search":"hel","search_mode":"prefix","kinds":[9,40002,40003,45001,45003],"limit":100}]`
	status, answer := r.HTTP(t, "", http.MethodPost, "/query", &key, []byte(wantBody))
	require.Equal(t, http.StatusOK, status, string(answer))
	require.Equal(t, []string{hello}, searchIDs(t, string(answer)))
	wantFilter := lastSearched()

	tls := relaytest.Start(t, map[string]string{"RELAY_URL": "wss://relay.invalid"})
	tlsHost := tls.Community(t, "localhost")

	for _, tc := range []struct {
		name  string
		relay *relaytest.Relay
		host  string
		args  []string
		code  int
		err   string // the stderr error, for a relay's refusal
	}{
		{"OK", r, r.Host, []string{"--query", "hel", "--prefix"}, exitOK, ""},
		{"EmptyQuery", r, r.Host, []string{"--query", "  "}, searchExitInput, ""},
		{"BadLimit", r, r.Host, []string{"--query", "x", "--limit", "501"}, searchExitInput, ""},
		{"Unauthorized", tls, tlsHost, []string{"--query", "x"}, searchExitAuth, "POST /query: 401: NIP-98: URL mismatch: event has `http://" +
			tlsHost + "/query`, expected `https://" + tlsHost + "/query`"},
		{"Forbidden", r, r.Host, []string{"--query", "x", "--kinds", "30300"}, searchExitAuth,
			"POST /query: 403: restricted: author-only kinds require authors=[self]"},
		{"BadRequest", r, r.Host, []string{"--query", "x", "--since", "9223372036854775807"}, searchExitRelay,
			"POST /query: 400: invalid filters: since must be a non-negative integer"},
		{"ServerError", r, r.Host, []string{"--query", "explode"}, searchExitRelay, "POST /query: 500: internal server error"},
	} {
		// Sequential: each case counts the requests its relay answered.
		before := httpRequests(t, tc.relay)
		code, out, stderr := runSearch(t, "ws://"+tc.host, user.sk, tc.args...)
		require.Equal(t, tc.code, code, "%s: %s", tc.name, stderr)
		if tc.code == searchExitInput {
			require.Equal(t, before, httpRequests(t, tc.relay), "%s: no request may be sent", tc.name)
			require.Empty(t, out)
			var e map[string]any
			require.NoError(t, json.Unmarshal([]byte(stderr), &e), stderr)
			require.NotEmpty(t, e["error"])
			continue
		}
		require.Equal(t, before+1, httpRequests(t, tc.relay), tc.name)
		if tc.code == exitOK {
			require.Empty(t, stderr)
			require.Equal(t, string(answer)+"\n", out)
			require.Equal(t, wantFilter, lastSearched(), "the filter sent")
			continue
		}
		require.Empty(t, out)
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(stderr), &e), stderr)
		require.Equal(t, map[string]any{"error": tc.err}, e, tc.name)
	}

	// No key is bad input; an unreachable relay is a network error.
	before := httpRequests(t, r)
	code, _, _ := runSearch(t, relay, "", "--query", "x")
	require.Equal(t, searchExitInput, code)
	require.Equal(t, before, httpRequests(t, r), "no request without a key")
	tls.Stop()
	code, _, stderr := runSearch(t, "ws://"+tlsHost, user.sk, "--query", "x")
	require.Equal(t, searchExitRelay, code, stderr)
	require.Contains(t, stderr, "POST /query: ")
	require.Contains(t, stderr, "connection refused")
}

// TestSearchNotAnArray keeps the one raw server of this package: the relay
// answers /query with a JSON array or an error status, never a 200 of
// another shape, so only a server that is not the relay can show that the
// command refuses such an answer (exit 2) instead of printing it.
func TestSearchNotAnArray(t *testing.T) {
	t.Parallel()
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"events":[]}`)
	}))
	t.Cleanup(srv.Close)
	code, out, stderr := runSearch(t, "ws://"+strings.TrimPrefix(srv.URL, "http://"), hex.EncodeToString(event.GenerateKey()), "--query", "x")
	require.Equal(t, searchExitRelay, code, stderr)
	require.Empty(t, out)
	require.JSONEq(t, `{"error":"POST /query: the answer is not a JSON array"}`, stderr)
}

// searchIDs decodes a search answer and returns its event ids.
func searchIDs(t *testing.T, out string) []string {
	t.Helper()
	var evs []event.Event
	require.NoError(t, json.Unmarshal([]byte(out), &evs), out)
	ids := []string{}
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	return ids
}

func TestSearchAgainstRelay(t *testing.T) {
	t.Parallel()
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	r := relaytest.Start(t, nil)
	relay := "ws://" + r.Host
	aliceSK, bobSK, carolSK := event.GenerateKey(), event.GenerateKey(), event.GenerateKey()
	alice := cliUser{t: t, relay: relay, sk: hex.EncodeToString(aliceSK)}
	bob := cliUser{t: t, relay: relay, sk: hex.EncodeToString(bobSK)}
	carol := cliUser{t: t, relay: relay, sk: hex.EncodeToString(carolSK)}
	alicePub, bobPub, carolPub := event.PubKey(aliceSK), event.PubKey(bobSK), event.PubKey(carolSK)
	search := func(args ...string) []string {
		t.Helper()
		code, out, stderr := runSearch(t, relay, bob.sk, args...)
		require.Equal(t, exitOK, code, "%v: %s", args, stderr)
		return searchIDs(t, out)
	}

	ch := alice.ok("channels", "create", "--name", "general")["channel_id"].(string)
	other := alice.ok("channels", "create", "--name", "random")["channel_id"].(string)
	bob.ok("channels", "join", "--channel", ch)
	bob.ok("channels", "join", "--channel", other)
	carol.ok("channels", "join", "--channel", ch)

	send := func(u cliUser, channel, content string) string {
		t.Helper()
		return u.ok("messages", "send", "--channel", channel, "--content", content)["event_id"].(string)
	}
	a1 := send(alice, ch, "the checkout page is slow")
	a2 := send(alice, ch, "project planning on monday")
	b1 := send(bob, ch, "checkout fixed, please retest")
	a3 := send(alice, other, "random checkout thoughts")
	send(bob, ch, "projectile planning is unrelated")

	alice.ok("publish", "--kind", "0", "--content", `{"name":"alice","display_name":"Alice Liddell"}`)
	bob.ok("publish", "--kind", "0", "--content", `{"name":"bob","display_name":"Robert"}`)
	carol.ok("publish", "--kind", "0", "--content", `{"name":"Alice Liddell"}`)

	// A word, everywhere bob can read.
	require.ElementsMatch(t, []string{a1, b1, a3}, search("--query", "checkout"))
	// --channel sends #h.
	require.ElementsMatch(t, []string{a1, b1}, search("--query", "checkout", "--channel", ch))
	// Prefix: completed words must match exactly, the last is a prefix.
	require.Equal(t, []string{a2}, search("--query", "project pl", "--prefix"))
	require.Empty(t, search("--query", "project pl"))
	// Authors: hex, display name (any case), name.
	require.ElementsMatch(t, []string{a1, a3}, search("--query", "checkout", "--author", strings.ToUpper(alicePub)))
	require.Equal(t, []string{b1}, search("--query", "checkout", "--author", "ROBERT"))
	require.Equal(t, []string{b1}, search("--query", "checkout", "--author", "bob", "--limit", "1"))
	// --kinds without messages finds none.
	require.Empty(t, search("--query", "checkout", "--kinds", "45001"))

	// Bad input: exit 1.
	code, out, _ := runSearch(t, relay, bob.sk, "--query", " ")
	require.Equal(t, searchExitInput, code)
	require.Empty(t, out)
	code, out, _ = runSearch(t, relay, bob.sk, "--query", "checkout", "--limit", "501")
	require.Equal(t, searchExitInput, code)
	require.Empty(t, out)

	// "Alice Liddell" is alice's display_name and carol's name: ambiguous.
	code, out, stderr := runSearch(t, relay, bob.sk, "--query", "checkout", "--author", "alice liddell")
	require.Equal(t, searchExitInput, code, stderr)
	require.Empty(t, out)
	var e struct {
		Error      string             `json:"error"`
		Candidates []profileCandidate `json:"candidates"`
	}
	require.NoError(t, json.Unmarshal([]byte(stderr), &e), stderr)
	require.Contains(t, e.Error, "ambiguous")
	require.Contains(t, e.Error, alicePub)
	require.Contains(t, e.Error, carolPub)
	var cands []string
	for _, c := range e.Candidates {
		cands = append(cands, c.PubKey)
	}
	require.ElementsMatch(t, []string{alicePub, carolPub}, cands)

	// A name nobody has: exit 1, the near matches of the prefix search listed.
	code, _, stderr = runSearch(t, relay, bob.sk, "--query", "checkout", "--author", "Rob")
	require.Equal(t, searchExitInput, code, stderr)
	require.Contains(t, stderr, "no profile")
	require.Contains(t, stderr, bobPub)
}
