package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	buzzapp "github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/cli"
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
		{"UpperNpub", []string{"--author", strings.ToUpper(nip19Npub), "--query", "x"},
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
		{"NpubOfAnNsec", []string{"--query", "x", "--author", "npub1" + nip19Nsec[5:]}, nil, ""},
		{"BadSince", []string{"--query", "x", "--since", "yesterday"}, nil, ""},
		{"Positional", []string{"--query", "x", "extra"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &searchArgs{}
			err := parseArgs(o, tt.args...)
			if tt.filter == nil {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.byName, o.authorName)
			f := o.filter(o.authorHex)
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

// runSearch runs "buzz messages search args…" with sk against relay.
func runSearch(t *testing.T, relay, sk string, args ...string) result {
	t.Helper()
	return buzz(t, map[string]string{"BUZZ_PRIVATE_KEY": sk, "BUZZ_RELAY_URL": relay}, "", append([]string{"messages", "search"}, args...)...)
}

// searchIDs returns the ids of the events a search printed, one per line.
func searchIDs(t *testing.T, res result) []string {
	t.Helper()
	out := []string{}
	for _, l := range res.lines(t) {
		out = append(out, l["id"].(string))
	}
	return out
}

// errSearchFault is the database failure injected before the search
// statement of a query for "explode".
var errSearchFault = errors.New("injected search failure")

// TestSearchExitCodes runs the command against real relays: one as
// deployed by default, one behind TLS (its NIP-98 tokens name https), one
// stopped. The exit statuses are buzz's one convention.
func TestSearchExitCodes(t *testing.T) {
	t.Parallel()
	t.Cleanup(http.DefaultClient.CloseIdleConnections) // r.HTTP's, for goleak
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
	key := eventtest.NewKey()
	user := cliUser{t: t, relay: "ws://" + r.Host, sk: hex.EncodeToString(key.SK)}
	ch := user.ok("channels", "create", "--name", "general")["channel_id"].(string)
	for _, text := range []string{"hello world", "help wanted", "hello hello hello", "nothing here", "helium"} {
		user.ok("messages", "send", "--channel", ch, "--content", text)
	}
	// What the relay answers the body the command must send for the OK case.
	wantBody := `[{"search":"hel","search_mode":"prefix","kinds":[9,40002,40003,45001,45003],"limit":100}]`
	status, answer := r.HTTP(t, "", http.MethodPost, "/query", &key, []byte(wantBody))
	require.Equal(t, http.StatusOK, status, string(answer))
	var ranked []json.RawMessage
	require.NoError(t, json.Unmarshal(answer, &ranked))
	require.Len(t, ranked, 4, "every message but one matches")
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
		{"EmptyQuery", r, r.Host, []string{"--query", "  "}, exitUsage, ""},
		{"BadLimit", r, r.Host, []string{"--query", "x", "--limit", "501"}, exitUsage, ""},
		{"BadAuthor", r, r.Host, []string{"--query", "x", "--author", "npub1xyz"}, exitUsage, ""},
		{"Unauthorized", tls, tlsHost, []string{"--query", "x"}, exitRefused, "messages search: POST /query: 401: NIP-98: URL mismatch: event has `http://" +
			tlsHost + "/query`, expected `https://" + tlsHost + "/query`"},
		{"Forbidden", r, r.Host, []string{"--query", "x", "--kinds", "30300"}, exitRefused,
			"messages search: POST /query: 403: restricted: author-only kinds require authors=[self]"},
		{"BadRequest", r, r.Host, []string{"--query", "x", "--since", "9223372036854775807"}, exitRefused,
			"messages search: POST /query: 400: invalid filters: since must be a non-negative integer"},
		{"ServerError", r, r.Host, []string{"--query", "explode"}, exitUsage, "messages search: POST /query: 500: internal server error"},
	} {
		// Sequential: each case counts the requests its relay answered.
		before := httpRequests(t, tc.relay)
		res := runSearch(t, "ws://"+tc.host, user.sk, tc.args...)
		require.Equal(t, tc.code, res.code, "%s: %s", tc.name, res.stderr)
		if tc.err == "" && tc.code == exitUsage {
			require.Equal(t, before, httpRequests(t, tc.relay), "%s: no request may be sent", tc.name)
			require.Empty(t, res.stdout)
			require.Contains(t, res.errorObject(t)["error"], "messages search: ", tc.name)
			continue
		}
		require.Equal(t, before+1, httpRequests(t, tc.relay), tc.name)
		if tc.code == exitOK {
			require.Empty(t, res.stderr)
			lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
			require.Len(t, lines, len(ranked), "one event per line")
			for i := range ranked {
				require.JSONEq(t, string(ranked[i]), lines[i], "line %d is the relay's event %d, in rank order", i+1, i+1)
			}
			require.Equal(t, wantFilter, lastSearched(), "the filter sent")
			continue
		}
		require.Empty(t, res.stdout)
		require.Equal(t, map[string]any{"error": tc.err}, res.errorObject(t), tc.name)
	}

	// No key is a usage error; an unreachable relay is a connection error.
	before := httpRequests(t, r)
	res := runSearch(t, "ws://"+r.Host, "", "--query", "x")
	require.Equal(t, exitUsage, res.code)
	require.Equal(t, before, httpRequests(t, r), "no request without a key")
	tls.Stop()
	res = runSearch(t, "ws://"+tlsHost, user.sk, "--query", "x")
	require.Equal(t, exitUsage, res.code, res.stderr)
	e := res.errorObject(t)["error"].(string)
	require.Contains(t, e, "messages search: POST /query: ")
	require.Contains(t, e, "connection refused")
	require.Contains(t, e, "check --relay or BUZZ_RELAY_URL")
}

func TestSearchAgainstRelay(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	alice, bob, carol := newUser(t, r), newUser(t, r), newUser(t, r)
	alicePub, bobPub, carolPub := alice.pubkey(), bob.pubkey(), carol.pubkey()
	search := func(args ...string) []string {
		t.Helper()
		res := runSearch(t, bob.relay, bob.sk, args...)
		require.Equal(t, exitOK, res.code, "%v: %s", args, res.stderr)
		return searchIDs(t, res)
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
	// Authors: hex, npub, display name (any case), name.
	require.ElementsMatch(t, []string{a1, a3}, search("--query", "checkout", "--author", strings.ToUpper(alicePub)))
	require.ElementsMatch(t, []string{a1, a3}, search("--query", "checkout", "--author", cli.NPub(alicePub)))
	require.Equal(t, []string{b1}, search("--query", "checkout", "--author", "ROBERT"))
	require.Equal(t, []string{b1}, search("--query", "checkout", "--author", "bob", "--limit", "1"))
	// --kinds without messages finds none.
	require.Empty(t, search("--query", "checkout", "--kinds", "45001"))
	// --get applies to every line.
	res := runSearch(t, bob.relay, bob.sk, "--query", "checkout", "--channel", ch, "--get", "pubkey")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.ElementsMatch(t, []string{alicePub, bobPub}, strings.Fields(res.stdout))

	// Bad input: exit 2, nothing printed.
	for _, args := range [][]string{{"--query", " "}, {"--query", "checkout", "--limit", "501"}, {"--query", "checkout", "extra"}} {
		res := runSearch(t, bob.relay, bob.sk, args...)
		require.Equal(t, exitUsage, res.code, args)
		require.Empty(t, res.stdout, args)
	}

	// "Alice Liddell" is alice's display_name and carol's name: ambiguous,
	// a refusal carrying both candidates.
	res = runSearch(t, bob.relay, bob.sk, "--query", "checkout", "--author", "alice liddell")
	require.Equal(t, exitRefused, res.code, res.stderr)
	require.Empty(t, res.stdout)
	var e struct {
		Error      string             `json:"error"`
		Candidates []profileCandidate `json:"candidates"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stderr), &e), res.stderr)
	require.Contains(t, e.Error, `messages search: --author "alice liddell" is ambiguous`)
	require.Contains(t, e.Error, alicePub)
	require.Contains(t, e.Error, carolPub)
	var cands []string
	for _, c := range e.Candidates {
		cands = append(cands, c.PubKey)
	}
	require.ElementsMatch(t, []string{alicePub, carolPub}, cands)

	// A name nobody has: exit 1, the near matches of the prefix search listed.
	res = runSearch(t, bob.relay, bob.sk, "--query", "checkout", "--author", "Rob")
	require.Equal(t, exitRefused, res.code, res.stderr)
	obj := res.errorObject(t)
	require.Contains(t, obj["error"], "no profile")
	require.Contains(t, obj["error"], bobPub)
	require.Equal(t, []any{map[string]any{"pubkey": bobPub, "name": "bob", "display_name": "Robert"}}, obj["candidates"])
}
