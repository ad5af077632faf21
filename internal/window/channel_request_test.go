package window_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/window"
)

const testCh = "0f3c2a6e-8d1b-4c5e-9a7f-112233445566"

func parseFilter(t *testing.T, raw string) event.Filter {
	t.Helper()
	f, err := event.ParseFilter([]byte(raw))
	require.NoError(t, err, raw)
	return f
}

// requireRefused requires err to be a 400 *Error with exactly text.
func requireChannelRefused(t *testing.T, err error, text string) {
	t.Helper()
	var ce *window.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, &window.Error{Status: 400, Text: text}, ce)
}

// TestParse covers docs/NIP-CW.md §3.1 field by field: the mode switch,
// defaults and clamping, and each refusal with its exact text (the parse half
// of the refusal checks).
func TestParse(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("ab", 32)

	t.Run("ModeSwitch", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]bool{
			`{"top_level":true}`:   true,
			`{"top_level": true }`: true,
			`{"top_level":false}`:  false,
			`{"top_level":"true"}`: false,
			`{"top_level":1}`:      false,
			`{"top_level":null}`:   false,
			`{}`:                   false,
		} {
			f := parseFilter(t, raw)
			require.Equal(t, want, window.IsChannel(&f), raw)
		}
		f := parseFilter(t, `{"resolve_thread_roots":true}`)
		require.True(t, window.IsResolve(&f))
		f = parseFilter(t, `{"resolve_thread_roots":"true"}`)
		require.False(t, window.IsResolve(&f))
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		r, err := window.ParseChannel(ptr(parseFilter(t, `{"top_level":true,"#h":["`+strings.ToUpper(testCh)+`"]}`)))
		require.NoError(t, err)
		require.Equal(t, window.ChannelRequest{Channel: testCh, Limit: 50}, r)
	})

	t.Run("Fields", func(t *testing.T) {
		t.Parallel()
		r, err := window.ParseChannel(ptr(parseFilter(t, `{"top_level":true,"#h":["`+testCh+`"],"kinds":[9,40002],"limit":7,
			"until":1751500000,"before_id":"`+strings.ToUpper(id)+`","include_aux":true,"include_summaries":true,"offset":3}`)))
		require.NoError(t, err)
		require.Equal(t, window.ChannelRequest{Channel: testCh, Limit: 7, Kinds: []int{9, 40002},
			Cursor: &window.Cursor{CreatedAt: 1751500000, ID: id}, IncludeAux: true, IncludeSummaries: true}, r)
	})

	t.Run("LimitClamped", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]int{`0`: 1, `1`: 1, `200`: 200, `201`: 200, `100000`: 200} {
			r, err := window.ParseChannel(ptr(parseFilter(t, `{"top_level":true,"#h":["`+testCh+`"],"limit":`+raw+`}`)))
			require.NoError(t, err)
			require.Equal(t, want, r.Limit, raw)
		}
	})

	t.Run("FlagsOnlyWhenTrue", func(t *testing.T) {
		t.Parallel()
		r, err := window.ParseChannel(ptr(parseFilter(t, `{"top_level":true,"#h":["`+testCh+`"],"include_aux":"true","include_summaries":1}`)))
		require.NoError(t, err)
		require.False(t, r.IncludeAux)
		require.False(t, r.IncludeSummaries)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		h := `"#h":["` + testCh + `"]`
		for _, tc := range []struct{ raw, text string }{
			{`{"top_level":true}`, "top_level requires exactly one #h channel"},
			{`{"top_level":true,"#h":[]}`, "top_level requires exactly one #h channel"},
			{`{"top_level":true,"#h":["` + testCh + `","1f3c2a6e-8d1b-4c5e-9a7f-112233445566"]}`, "top_level requires exactly one #h channel"},
			{`{"top_level":true,"#h":["general"]}`, "top_level requires exactly one #h channel"},
			{`{"top_level":true,` + h + `,"until":1751500000}`, "top_level cursor requires both until and before_id, or neither"},
			{`{"top_level":true,` + h + `,"before_id":"` + id + `"}`, "top_level cursor requires both until and before_id, or neither"},
			{`{"top_level":true,` + h + `,"before_id":"short"}`, "top_level cursor requires both until and before_id, or neither"},
			{`{"top_level":true,` + h + `,"until":1,"before_id":"` + id[:63] + `"}`, "top_level: before_id must be a 64-hex event id"},
			{`{"top_level":true,` + h + `,"until":1,"before_id":"` + id[:63] + `g"}`, "top_level: before_id must be a 64-hex event id"},
			{`{"top_level":true,` + h + `,"until":1,"before_id":null}`, "top_level: before_id must be a 64-hex event id"},
			{`{"top_level":true,` + h + `,"until":1,"before_id":7}`, "top_level: before_id must be a 64-hex event id"},
			{`{"top_level":true,` + h + `,"until":253402300800,"before_id":"` + id + `"}`, "top_level: until is out of range"},
			{`{"top_level":true,` + h + `,"until":4611686018427387904,"before_id":"` + id + `"}`, "top_level: until is out of range"},
		} {
			_, err := window.ParseChannel(ptr(parseFilter(t, tc.raw)))
			requireChannelRefused(t, err, tc.text)
		}
		r, err := window.ParseChannel(ptr(parseFilter(t, `{"top_level":true,`+h+`,"until":253402300799,"before_id":"`+id+`"}`)))
		require.NoError(t, err)
		require.Equal(t, int64(253402300799), r.Cursor.CreatedAt)
	})
}

// TestParseResolve covers the docs/NIP-CW.md §4 refusals in the order of its
// table and the request-wide total (the parse half of root resolution).
func TestParseResolve(t *testing.T) {
	t.Parallel()
	ids := func(n int) string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(`"%064x"`, i+1)
		}
		return `[` + strings.Join(out, ",") + `]`
	}
	h := `"#h":["` + testCh + `"]`
	k := `"kinds":[39005]`

	t.Run("Parses", func(t *testing.T) {
		t.Parallel()
		upper := strings.Repeat("AB", 32)
		r, err := window.ParseResolve(ptr(parseFilter(t, `{"resolve_thread_roots":true,`+h+`,`+k+`,"ids":["`+upper+`"]}`)))
		require.NoError(t, err)
		require.Equal(t, window.ResolveRequest{Channel: testCh, Targets: []string{strings.ToLower(upper)}}, r)
		r, err = window.ParseResolve(ptr(parseFilter(t, `{"resolve_thread_roots":true,`+h+`,`+k+`,"ids":`+ids(100)+`}`)))
		require.NoError(t, err)
		require.Len(t, r.Targets, 100)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ raw, text string }{
			{`{"resolve_thread_roots":true,` + k + `,"ids":` + ids(1) + `}`, "resolve_thread_roots requires exactly one #h channel"},
			{`{"resolve_thread_roots":true,"#h":["` + testCh + `","` + testCh + `"],` + k + `,"ids":` + ids(1) + `}`, "resolve_thread_roots requires exactly one #h channel"},
			{`{"resolve_thread_roots":true,"#h":["x"],"kinds":[1]}`, "resolve_thread_roots requires exactly one #h channel"},
			{`{"resolve_thread_roots":true,` + h + `,"ids":` + ids(1) + `}`, "resolve_thread_roots requires kinds [39005]"},
			{`{"resolve_thread_roots":true,` + h + `,"kinds":[1],"ids":` + ids(1) + `}`, "resolve_thread_roots requires kinds [39005]"},
			{`{"resolve_thread_roots":true,` + h + `,"kinds":[39005,39005],"ids":` + ids(1) + `}`, "resolve_thread_roots requires kinds [39005]"},
			{`{"resolve_thread_roots":true,` + h + `,"kinds":[39005,9]}`, "resolve_thread_roots requires kinds [39005]"},
			{`{"resolve_thread_roots":true,` + h + `,` + k + `}`, "resolve_thread_roots requires 1 to 100 target ids"},
			{`{"resolve_thread_roots":true,` + h + `,` + k + `,"ids":[]}`, "resolve_thread_roots requires 1 to 100 target ids"},
			{`{"resolve_thread_roots":true,` + h + `,` + k + `,"ids":` + ids(101) + `}`, "resolve_thread_roots requires 1 to 100 target ids"},
		} {
			_, err := window.ParseResolve(ptr(parseFilter(t, tc.raw)))
			requireChannelRefused(t, err, tc.text)
		}
	})

	t.Run("Total", func(t *testing.T) {
		t.Parallel()
		a := parseFilter(t, `{"resolve_thread_roots":true,`+h+`,`+k+`,"ids":`+ids(60)+`}`)
		b := parseFilter(t, `{"resolve_thread_roots":true,`+h+`,`+k+`,"ids":`+ids(41)+`}`)
		plain := parseFilter(t, `{"ids":`+ids(60)+`}`)
		requireChannelRefused(t, window.CheckResolveTotal([]event.Filter{a, plain, b}), "resolve_thread_roots permits at most 100 targets per request")
		b = parseFilter(t, `{"resolve_thread_roots":true,`+h+`,`+k+`,"ids":`+ids(40)+`}`)
		require.NoError(t, window.CheckResolveTotal([]event.Filter{a, plain, b}))
	})
}

func ptr[T any](v T) *T { return &v }
