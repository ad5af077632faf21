package main

import (
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

func TestReadFilters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  int
		err   string
	}{
		{name: "OneArg", args: []string{`{"kinds":[9]}`}, want: 1},
		{name: "ArrayArg", args: []string{`[{"kinds":[9]},{"kinds":[1]}]`}, want: 2},
		{name: "StdinObject", stdin: `{"kinds":[9],"limit":5}`, want: 1},
		{name: "StdinArray", args: []string{"-"}, stdin: `[{"kinds":[9]},{"#p":["x"]}]`, want: 2},
		{name: "StdinLines", stdin: "{\"kinds\":[9]}\n{\"kinds\":[1]}\n", want: 2},
		{name: "ArgsAndStdin", args: []string{`{"kinds":[9]}`, "-"}, stdin: `{"kinds":[1]}`, want: 2},
		{name: "BadField", args: []string{`{"kinds":[9]}`, `[{"kinds":[1]},{"kinds":"9"}]`}, err: "query: filter 3: kinds must be"},
		{name: "NotJSON", args: []string{`{"kinds":[9]}`, `{kinds}`}, err: "query: argument 2 is not JSON: "},
		{name: "NotObject", args: []string{`"x"`}, err: "query: filter 1: filter must be a JSON object"},
		{name: "Empty", err: "query: no filter given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs, err := readFilters("query", tt.args, strings.NewReader(tt.stdin))
			if tt.err != "" {
				requireUsage(t, err)
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, fs, tt.want)
		})
	}
}

func TestCheckFilterKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		filter string
		http   bool
		err    string
	}{
		{name: "Known", filter: `[{"ids":[],"authors":[],"kinds":[1],"since":1,"until":2,"limit":3,"search":"x","#h":["c"],"#e":[]}]`},
		{name: "Typo", filter: `{"kindz":[1]}`,
			err: `query: filter 1: unknown key "kindz" (known: ids, authors, kinds, since, until, limit, search, #<tag>; with --http also the bridge fields)`},
		{name: "TypoWithHTTP", filter: `{"kinds":[1],"kindz":[1]}`, http: true, err: `query: filter 1: unknown key "kindz"`},
		{name: "BareHash", filter: `{"#":["x"]}`, err: `query: filter 1: unknown key "#"`},
		{name: "SecondFilter", filter: `[{"kinds":[1]},{"authorz":[]}]`, err: `query: filter 2: unknown key "authorz"`},
		{name: "BridgeFieldOverWebSocket", filter: `{"kinds":[9],"until":5,"before_id":"` + testID + `"}`,
			err: `query: filter 1: "before_id" is an HTTP bridge field: add --http`},
		{name: "BridgeFieldsWithHTTP", http: true, filter: `[{"kinds":[9],"until":5,"before_id":"` + testID + `"},` +
			`{"#e":["` + testID + `"],"depth_limit":3,"thread_cursor":-1,"threadCursor":1,"thread_cursor_id":"x","threadCursorId":"x"},` +
			`{"search":"x","search_mode":"prefix","searchMode":"prefix","page":2,"search_page":2,"searchPage":2},` +
			`{"#h":["c"],"top_level":true,"resolve_thread_roots":true,"include_aux":true,"include_summaries":true,"thread_window":true}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			filters, err := readFilters("query", []string{tt.filter}, nil)
			require.NoError(t, err)
			err = checkFilterKeys("query", filters, tt.http)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			requireUsage(t, err)
			require.ErrorContains(t, err, tt.err)
		})
	}
}

// filterJSON is the filters check produced, as JSON.
func filterJSON(t *testing.T, filters []event.Filter) string {
	t.Helper()
	b, err := json.Marshal(filters)
	require.NoError(t, err)
	return string(b)
}

func TestFilterArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cmd   string
		args  []string
		stdin string
		want  string // the filters, as JSON; "" = a usage error
	}{
		{"FlagsAlone", "query", []string{"--kinds", "9,45001", "--limit", "20", "--channel", strings.ToUpper(testChannel)}, "not read",
			`[{"kinds":[9,45001],"#h":["` + testChannel + `"],"limit":20}]`},
		{"OneFlagAlone", "count", []string{"--kinds", "9"}, "not read", `[{"kinds":[9]}]`},
		{"FlagsFillWhatIsMissing", "query", []string{`[{"kinds":[1]},{"limit":5,"#h":["other"]},{}]`, "--kinds", "9", "--limit", "7", "--channel", testChannel}, "",
			`[{"kinds":[1],"#h":["` + testChannel + `"],"limit":7},{"kinds":[9],"#h":["other"],"limit":5},{"kinds":[9],"#h":["` + testChannel + `"],"limit":7}]`},
		{"FlagsFillStdin", "query", []string{"--kinds", "9", "-"}, `{"authors":["` + testPubkey + `"]}`,
			`[{"authors":["` + testPubkey + `"],"kinds":[9]}]`},
		{"NoFlagsReadsStdin", "count", nil, `{"kinds":[3]}`, `[{"kinds":[3]}]`},
		{"CountHasNoLimit", "count", []string{"--limit", "5"}, "", ""},
		{"NegativeLimit", "query", []string{"--limit", "-1"}, "", ""},
		{"BadChannel", "query", []string{"--channel", "general"}, "", ""},
		{"BadKinds", "query", []string{"--kinds", "9,,1"}, "", ""},
		{"UnknownKey", "count", []string{`{"kindz":[1]}`, "--kinds", "9"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := testApp()
			a.stdin = strings.NewReader(tt.stdin)
			o := &filterArgs{a: a, cmd: tt.cmd, flags: filterFlags{withLimit: tt.cmd == "query"}}
			err := parseArgs(o, tt.args...)
			if tt.want == "" {
				requireUsage(t, err)
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tt.want, filterJSON(t, o.filters))
		})
	}
}

func TestPGateHintText(t *testing.T) {
	t.Parallel()
	parse := func(s string) []event.Filter {
		fs, err := readFilters("query", []string{s}, nil)
		require.NoError(t, err)
		return fs
	}
	const addKinds = `add "kinds" to every filter — e.g. --kinds 9,45001,45003`
	require.Equal(t, addKinds, pgateHint(parse(`{"limit":3}`), testPubkey))
	require.Equal(t, addKinds, pgateHint(parse(`[{"kinds":[1059]},{"authors":[]}]`), testPubkey), "one filter without kinds is the cause")
	require.Equal(t, `kind 1059 is p-gated: add "#p":["`+testPubkey+`"] or leave it out`,
		pgateHint(parse(`[{"kinds":[9,1059]},{"kinds":[1059]}]`), testPubkey))
	require.Equal(t, `kinds 1059, 44100 are p-gated: add "#p":["`+testPubkey+`"] or leave them out`,
		pgateHint(parse(`[{"kinds":[44100,9]},{"kinds":[1059]}]`), testPubkey))
	require.Empty(t, pgateHint(parse(`{"kinds":[9]}`), testPubkey))
}

// TestUnknownFilterKeyNoNetwork points query and count at a real listener
// that counts the connections it accepts: a filter with an unknown key, or
// with a bridge field but no --http, is refused with no connection made.
func TestUnknownFilterKeyNoNetwork(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"internal server error"}`, http.StatusInternalServerError)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) { // called by the accept loop, before any answer
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	env := map[string]string{"BUZZ_PRIVATE_KEY": hex.EncodeToString(event.GenerateKey()),
		"BUZZ_RELAY_URL": "ws://" + srv.Listener.Addr().String()}

	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"Query", []string{"query", `{"kindz":[1]}`},
			`query: filter 1: unknown key "kindz" (known: ids, authors, kinds, since, until, limit, search, #<tag>; with --http also the bridge fields)`},
		{"QueryHTTP", []string{"query", "--http", `{"kinds":[1],"kindz":[1]}`},
			`query: filter 1: unknown key "kindz" (known: ids, authors, kinds, since, until, limit, search, #<tag>; with --http also the bridge fields)`},
		{"Count", []string{"count", `[{"kinds":[1]},{"kinds":[9],"kindz":[1]}]`},
			`count: filter 2: unknown key "kindz" (known: ids, authors, kinds, since, until, limit, search, #<tag>; with --http also the bridge fields)`},
		{"BridgeField", []string{"query", `{"kinds":[9],"until":5,"before_id":"` + testID + `"}`},
			`query: filter 1: "before_id" is an HTTP bridge field: add --http`},
		{"BridgeFieldCount", []string{"count", "--kinds", "9", `{"top_level":true}`}, `count: filter 1: "top_level" is an HTTP bridge field: add --http`},
		{"Stdin", []string{"query", "-"},
			`query: filter 1: unknown key "limt" (known: ids, authors, kinds, since, until, limit, search, #<tag>; with --http also the bridge fields)`},
	}
	for _, tt := range tests {
		res := buzz(t, env, `{"kinds":[9],"limt":5}`, tt.args...)
		require.Equal(t, exitUsage, res.code, tt.name)
		require.Empty(t, res.stdout, tt.name)
		require.Equal(t, tt.err, res.errorObject(t)["error"], tt.name)
	}

	// The control: an accepted bridge field with --http does reach the
	// listener, whose 500 exits 2. Its answer also proves that the accept
	// loop has seen every connection made before it.
	res := buzz(t, env, "", "query", "--http", `{"kinds":[9],"until":5,"before_id":"`+testID+`"}`)
	require.Equal(t, exitUsage, res.code, res.stderr)
	require.Equal(t, "query: POST /query: 500: internal server error", res.errorObject(t)["error"])
	require.EqualValues(t, 1, conns.Load(), "only the control connected")
}

// TestPGateHint lets a real relay refuse filters at its p-gate: the error
// is the relay's text and a "hint" says what to change.
func TestPGateHint(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	u := newUser(t, r)
	const addKinds = `add "kinds" to every filter — e.g. --kinds 9,45001,45003`
	gatedKinds := `kind 1059 is p-gated: add "#p":["` + u.pubkey() + `"] or leave it out`
	tests := []struct {
		name string
		args []string
		want map[string]any
	}{
		{"Query", []string{"query", `{"limit":3}`},
			map[string]any{"error": "query: restricted: p-gated events require #p matching your pubkey", "hint": addKinds}},
		{"QueryHTTP", []string{"query", "--http", `{"limit":3}`},
			map[string]any{"error": "query: POST /query: 403: restricted: p-gated kinds require #p tag matching your pubkey", "hint": addKinds}},
		{"Count", []string{"count", `{"authors":["` + u.pubkey() + `"]}`},
			map[string]any{"error": "count: restricted: p-gated kinds require #p tag matching your pubkey", "hint": addKinds}},
		{"GatedKind", []string{"query", `{"kinds":[9,1059]}`},
			map[string]any{"error": "query: restricted: p-gated events require #p matching your pubkey", "hint": gatedKinds}},
		{"GatedKindCountHTTP", []string{"count", "--http", "--kinds", "1059"},
			map[string]any{"error": "count: POST /count: 403: restricted: p-gated kinds require #p tag matching your pubkey", "hint": gatedKinds}},
		{"OtherGateNoHint", []string{"query", `{"kinds":[30300]}`},
			map[string]any{"error": "query: restricted: author-only kinds require authors=[self]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := u.run(tt.args...)
			require.Equal(t, exitRefused, res.code, res.stderr)
			require.Empty(t, res.stdout)
			require.Equal(t, tt.want, res.errorObject(t))
		})
	}

	t.Run("FollowingTheHintWorks", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"query", `{"limit":3}`, "--kinds", "9,45001,45003"},
			{"query", `{"kinds":[9,1059],"#p":["` + u.pubkey() + `"]}`},
			{"count", "--http", "--kinds", "1059", `{"#p":["` + u.pubkey() + `"]}`},
		} {
			res := u.run(args...)
			require.Equal(t, exitOK, res.code, "%v: %s", args, res.stderr)
		}
	})
}
