package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

// The route bodies' pure decoding layers; the routes themselves need a
// database and are covered by the route tests.

// requireBadRequest requires err to be a 400 *apiError whose message is
// one of the wanted texts, or starts with one ending in ": ".
func requireBadRequest(t *testing.T, err error, texts ...string) {
	t.Helper()
	var ae *apiError
	require.True(t, errors.As(err, &ae), "%T %v", err, err)
	require.Equal(t, http.StatusBadRequest, ae.status)
	for _, text := range texts {
		if ae.body.Error == text || (strings.HasSuffix(text, ": ") && strings.HasPrefix(ae.body.Error, text)) {
			return
		}
	}
	t.Fatalf("unexpected refusal %q", ae.body.Error)
}

// FuzzQueryBody is the body of POST /query and /count: parseFilters never
// panics, a refusal is a 400 "invalid filters: …", and a success is 1 to
// 10 filters that re-encode to the same filters.
func FuzzQueryBody(f *testing.F) {
	pub := strings.Repeat("ab", 32)
	for _, s := range []string{
		`[{"kinds":[9],"#h":["general"],"limit":50}]`,
		`[{"kinds":[1],"authors":["` + pub + `"]},{"ids":["` + strings.ToUpper(pub) + `"],"since":1,"until":2}]`,
		`[{"search":"deploy","page":2},{"kinds":[30078],"authors":["` + pub + `"],"read_state_snapshot":1}]`,
		`[{"top_level":true,"#h":["0f3c2a6e-8d1b-4c5e-9a7f-112233445566"],"until":5,"before_id":"` + pub + `"}]`,
		`  [{}] `, `[]`, `{}`, `[{"kinds":"x"}]`, `[1]`, `[{},{},{},{},{},{},{},{},{},{},{}]`, `[{"limit":-1}]`, "[\xff]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		filters, err := parseFilters(body)
		if err != nil {
			requireBadRequest(t, err, msgTooManyFilters, "invalid filters: ")
			return
		}
		require.True(t, len(filters) >= 1 && len(filters) <= maxFilters, len(filters))
		out := []byte{'['}
		for i, flt := range filters {
			if i > 0 {
				out = append(out, ',')
			}
			out = flt.AppendJSON(out)
		}
		again, err := parseFilters(append(out, ']'))
		require.NoError(t, err, string(out))
		require.Len(t, again, len(filters))
		for i := range filters {
			require.Equal(t, string(filters[i].AppendJSON(nil)), string(again[i].AppendJSON(nil)))
		}
	})
}

// FuzzListenerTargets is the body of POST and DELETE
// /operator/listener/pubkeys: parseTargets never panics, a refusal is a
// 400 with one of the route's texts, and a success is 1 to 1000 distinct
// lowercase 64-hex pubkeys, in the body's order, that parse to themselves.
func FuzzListenerTargets(f *testing.F) {
	a, b := strings.Repeat("a", 64), strings.Repeat("0b", 32)
	for _, s := range []string{
		`{"pubkeys":["` + a + `"]}`,
		`{"pubkeys":["` + strings.ToUpper(a) + `","` + b + `","` + a + `"],"note":"x"}`,
		`{"pubkeys":[]}`, `{"pubkeys":null}`, `{}`, `[]`, `{"pubkeys":["` + a[:63] + `"]}`, `{"pubkeys":"` + a + `"}`,
		`{"pubkeys":["` + a + `"],"pubkeys":["` + b + `"]}`, "{\"pubkeys\":[\"\xff\"]}", ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		targets, err := parseTargets(body)
		if err != nil {
			requireBadRequest(t, err, msgListenerJSON, msgListenerCount, msgListenerPubkey)
			return
		}
		require.True(t, len(targets) >= 1 && len(targets) <= maxListenerRegistrants, len(targets))
		seen := map[string]bool{}
		for _, p := range targets {
			require.True(t, event.IsHex64(p), p)
			require.False(t, seen[p], p)
			seen[p] = true
		}
		enc, err := json.Marshal(map[string][]string{"pubkeys": targets})
		require.NoError(t, err)
		again, err := parseTargets(enc)
		require.NoError(t, err)
		require.Equal(t, targets, again)
	})
}
