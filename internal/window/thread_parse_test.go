package window_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/window"
)

const (
	testChannel = "11111111-2222-4333-8444-555555555555"
	testRoot    = "abababababababababababababababababababababababababababababababab"
)

// valid is a minimal accepted filter with one field replaced or removed:
// set holds raw JSON values, a nil value drops the key.
func valid(set map[string]any) string {
	fields := map[string]string{
		"thread_window": "true",
		"#h":            `["` + testChannel + `"]`,
		"#e":            `["` + testRoot + `"]`,
		"kinds":         "[9]",
	}
	for k, v := range set {
		if v == nil {
			delete(fields, k)
			continue
		}
		fields[k] = v.(string)
	}
	var parts []string
	for _, k := range []string{"thread_window", "#h", "#e", "kinds", "limit", "depth_limit", "until", "before_id", "include_aux",
		"top_level", "search", "authors", "since", "ids", "#p", "page", "offset", "thread_cursor", "threadCursorId", "include_summaries"} {
		if v, ok := fields[k]; ok {
			parts = append(parts, `"`+k+`":`+v)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func parseOne(t *testing.T, raw string) (window.ThreadRequest, error) {
	t.Helper()
	reqs, opted, err := window.ParseBatch([]json.RawMessage{json.RawMessage(raw)})
	if err != nil {
		return window.ThreadRequest{}, err
	}
	require.Equal(t, 1, opted)
	require.Len(t, reqs, 1)
	return reqs[0], nil
}

// requireRefused asserts a 400 with exactly text.
func requireRefused(t *testing.T, err error, text string) {
	t.Helper()
	var e *window.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, text, e.Text)
}

// Every docs/NIP-CW.md §5.1 row, a filter with exactly that fault.
func TestParseRefusals(t *testing.T) {
	t.Parallel()
	hex64 := strings.Repeat("ef", 32)
	cases := []struct {
		name string
		set  map[string]any
		text string
	}{
		{"TopLevelFalse", map[string]any{"top_level": "false"}, "thread_window: unsupported or conflicting filter field"},
		{"Search", map[string]any{"search": `"x"`}, "thread_window: unsupported or conflicting filter field"},
		{"Authors", map[string]any{"authors": `["` + hex64 + `"]`}, "thread_window: unsupported or conflicting filter field"},
		{"Since", map[string]any{"since": "1"}, "thread_window: unsupported or conflicting filter field"},
		{"IDs", map[string]any{"ids": `["` + hex64 + `"]`}, "thread_window: unsupported or conflicting filter field"},
		{"P", map[string]any{"#p": `["` + hex64 + `"]`}, "thread_window: unsupported or conflicting filter field"},
		{"Page", map[string]any{"page": "2"}, "thread_window: unsupported or conflicting filter field"},
		{"Offset", map[string]any{"offset": "2"}, "thread_window: unsupported or conflicting filter field"},
		{"ThreadCursor", map[string]any{"thread_cursor": "-1"}, "thread_window: unsupported or conflicting filter field"},
		{"ThreadCursorID", map[string]any{"threadCursorId": `"` + hex64 + `"`}, "thread_window: unsupported or conflicting filter field"},
		{"IncludeSummaries", map[string]any{"include_summaries": "true"}, "thread_window: unsupported or conflicting filter field"},
		{"ThreadWindowYes", map[string]any{"thread_window": `"yes"`}, "thread_window must be true"},
		{"ThreadWindowNull", map[string]any{"thread_window": "null"}, "thread_window must be true"},
		{"ThreadWindowOne", map[string]any{"thread_window": "1"}, "thread_window must be true"},
		{"NoH", map[string]any{"#h": nil}, "thread_window requires exactly one #h"},
		{"TwoH", map[string]any{"#h": `["` + testChannel + `","` + testChannel + `"]`}, "thread_window requires exactly one #h"},
		{"EmptyH", map[string]any{"#h": `[]`}, "thread_window requires exactly one #h"},
		{"HString", map[string]any{"#h": `"` + testChannel + `"`}, "thread_window requires exactly one #h"},
		{"HNotUUID", map[string]any{"#h": `["general"]`}, "thread_window: #h must be a channel UUID"},
		{"HNumber", map[string]any{"#h": `[7]`}, "thread_window: #h must be a channel UUID"},
		{"HBadHyphens", map[string]any{"#h": `["1111111-12222-4333-8444-555555555555"]`}, "thread_window: #h must be a channel UUID"},
		{"NoE", map[string]any{"#e": nil}, "thread_window requires exactly one #e"},
		{"TwoE", map[string]any{"#e": `["` + testRoot + `","` + testRoot + `"]`}, "thread_window requires exactly one #e"},
		{"EShort", map[string]any{"#e": `["` + testRoot[:63] + `"]`}, "thread_window: expected a full 64-hex event id"},
		{"ENotHex", map[string]any{"#e": `["` + strings.Repeat("zz", 32) + `"]`}, "thread_window: expected a full 64-hex event id"},
		{"Limit0", map[string]any{"limit": "0"}, "thread_window: limit must be an integer in 1..=200"},
		{"Limit201", map[string]any{"limit": "201"}, "thread_window: limit must be an integer in 1..=200"},
		{"LimitFraction", map[string]any{"limit": "20.0"}, "thread_window: limit must be an integer in 1..=200"},
		{"LimitExponent", map[string]any{"limit": "2e1"}, "thread_window: limit must be an integer in 1..=200"},
		{"LimitString", map[string]any{"limit": `"20"`}, "thread_window: limit must be an integer in 1..=200"},
		{"LimitNull", map[string]any{"limit": "null"}, "thread_window: limit must be an integer in 1..=200"},
		{"Depth0", map[string]any{"depth_limit": "0"}, "thread_window: depth_limit must be an integer in 1..=100"},
		{"Depth101", map[string]any{"depth_limit": "101"}, "thread_window: depth_limit must be an integer in 1..=100"},
		{"DepthUnbounded", map[string]any{"depth_limit": "2147483647"}, "thread_window: depth_limit must be an integer in 1..=100"},
		{"NoKinds", map[string]any{"kinds": nil}, "thread_window requires nonempty conversation kinds"},
		{"EmptyKinds", map[string]any{"kinds": "[]"}, "thread_window requires nonempty conversation kinds"},
		{"FiveKinds", map[string]any{"kinds": "[9,9,40002,45001,45003]"}, "thread_window requires nonempty conversation kinds"},
		{"KindsNull", map[string]any{"kinds": "null"}, "thread_window requires nonempty conversation kinds"},
		{"Kinds7", map[string]any{"kinds": "[7]"}, "thread_window supports row kinds 9, 40002, 45001, 45003 only"},
		{"Kinds40008", map[string]any{"kinds": "[9,40008]"}, "thread_window supports row kinds 9, 40002, 45001, 45003 only"},
		{"KindsFraction", map[string]any{"kinds": "[9.0]"}, "thread_window supports row kinds 9, 40002, 45001, 45003 only"},
		{"OnlyUntil", map[string]any{"until": "100"}, "thread_window requires both until and before_id, or neither"},
		{"OnlyBeforeID", map[string]any{"before_id": `"` + hex64 + `"`}, "thread_window requires both until and before_id, or neither"},
		{"UntilFraction", map[string]any{"until": "1.5", "before_id": `"` + hex64 + `"`}, "thread_window: until must be nonnegative integer seconds"},
		{"UntilNegative", map[string]any{"until": "-1", "before_id": `"` + hex64 + `"`}, "thread_window: until must be nonnegative integer seconds"},
		{"UntilNull", map[string]any{"until": "null", "before_id": `"` + hex64 + `"`}, "thread_window: until must be nonnegative integer seconds"},
		{"UntilUint64Max", map[string]any{"until": "18446744073709551615", "before_id": `"` + hex64 + `"`}, "thread_window: until must be nonnegative integer seconds"},
		{"UntilString", map[string]any{"until": `"100"`, "before_id": `"` + hex64 + `"`}, "thread_window: until must be nonnegative integer seconds"},
		{"BeforeIDShort", map[string]any{"until": "100", "before_id": `"` + hex64[:63] + `"`}, "thread_window: expected a full 64-hex event id"},
		{"BeforeIDNumber", map[string]any{"until": "100", "before_id": "7"}, "thread_window: expected a full 64-hex event id"},
		{"UntilInt64Max", map[string]any{"until": "9223372036854775807", "before_id": `"` + hex64 + `"`}, "thread_window: cursor timestamp out of range"},
		{"UntilPastYear9999", map[string]any{"until": "253402300800", "before_id": `"` + hex64 + `"`}, "thread_window: cursor timestamp out of range"},
		{"IncludeAuxString", map[string]any{"include_aux": `"true"`}, "thread_window: include_aux must be boolean"},
		{"IncludeAuxNull", map[string]any{"include_aux": "null"}, "thread_window: include_aux must be boolean"},
		{"IncludeAuxOne", map[string]any{"include_aux": "1"}, "thread_window: include_aux must be boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseOne(t, valid(tc.set))
			requireRefused(t, err, tc.text)
		})
	}
}

// The checks run in order: a filter with several faults gets the first.
func TestParseOrder(t *testing.T) {
	t.Parallel()
	_, err := parseOne(t, `{"thread_window":"yes","#h":[],"kinds":[7],"top_level":false}`)
	requireRefused(t, err, "thread_window: unsupported or conflicting filter field")
	_, err = parseOne(t, `{"thread_window":"yes","#h":[],"kinds":[7]}`)
	requireRefused(t, err, "thread_window must be true")
	_, err = parseOne(t, `{"thread_window":true,"#h":["x"],"#e":[],"limit":0}`)
	requireRefused(t, err, "thread_window: #h must be a channel UUID")
	_, err = parseOne(t, valid(map[string]any{"limit": "0", "depth_limit": "0"}))
	requireRefused(t, err, "thread_window: limit must be an integer in 1..=200")
	_, err = parseOne(t, valid(map[string]any{"kinds": "[7]", "until": "1"}))
	requireRefused(t, err, "thread_window supports row kinds 9, 40002, 45001, 45003 only")
	_, err = parseOne(t, valid(map[string]any{"until": "1.5", "before_id": "1"}))
	requireRefused(t, err, "thread_window: until must be nonnegative integer seconds")
	_, err = parseOne(t, valid(map[string]any{"until": "253402300800", "before_id": "1"}))
	requireRefused(t, err, "thread_window: expected a full 64-hex event id")
	_, err = parseOne(t, valid(map[string]any{"until": "253402300800", "before_id": `"` + testRoot + `"`, "include_aux": "1"}))
	requireRefused(t, err, "thread_window: cursor timestamp out of range")
}

func TestParseNormalises(t *testing.T) {
	t.Parallel()
	want := window.ThreadRequest{Channel: testChannel, Root: testRoot, Limit: 50, Depth: 100, Kinds: []int{9}}
	for _, h := range []string{testChannel, strings.ToUpper(testChannel), strings.ReplaceAll(testChannel, "-", ""),
		"{" + testChannel + "}", "urn:uuid:" + testChannel, "URN:UUID:" + strings.ToUpper(testChannel)} {
		got, err := parseOne(t, valid(map[string]any{"#h": `["` + h + `"]`, "#e": `["` + strings.ToUpper(testRoot) + `"]`}))
		require.NoError(t, err, h)
		require.Equal(t, want, got, h)
	}

	got, err := parseOne(t, valid(map[string]any{"kinds": "[45003,9,40002,9]", "limit": "200", "depth_limit": "1",
		"until": "0", "before_id": `"` + strings.Repeat("EF", 32) + `"`, "include_aux": "true"}))
	require.NoError(t, err)
	require.Equal(t, window.ThreadRequest{Channel: testChannel, Root: testRoot, Limit: 200, Depth: 1, Kinds: []int{9, 40002, 45003},
		Cursor: &window.Cursor{CreatedAt: 0, ID: strings.Repeat("ef", 32)}, IncludeAux: true}, got)

	got, err = parseOne(t, valid(map[string]any{"until": "253402300799", "before_id": `"` + testRoot + `"`, "include_aux": "false"}))
	require.NoError(t, err)
	require.Equal(t, int64(253402300799), got.Cursor.CreatedAt)
	require.False(t, got.IncludeAux)
}

// The parsing half: five windows are refused before any is
// parsed; thread_window false is not an opt-in.
func TestParseBatch(t *testing.T) {
	t.Parallel()
	ok := json.RawMessage(valid(nil))
	five := []json.RawMessage{ok, ok, ok, ok, json.RawMessage(`{"thread_window":"broken"}`)}
	_, opted, err := window.ParseBatch(five)
	requireRefused(t, err, "at most four thread windows per query")
	require.Equal(t, 5, opted)

	reqs, opted, err := window.ParseBatch([]json.RawMessage{ok, json.RawMessage(`{"kinds":[1]}`), ok})
	require.NoError(t, err)
	require.Equal(t, 2, opted, "the caller refuses the mix")
	require.Len(t, reqs, 2)

	reqs, opted, err = window.ParseBatch([]json.RawMessage{json.RawMessage(`{"thread_window":false,"kinds":[1]}`),
		json.RawMessage(`{"kinds":[1]}`), json.RawMessage(`[1]`), json.RawMessage(`"thread_window"`)})
	require.NoError(t, err)
	require.Zero(t, opted)
	require.Empty(t, reqs)

	// The first failing filter in array order is the answer.
	_, _, err = window.ParseBatch([]json.RawMessage{ok, json.RawMessage(valid(map[string]any{"limit": "201"})),
		json.RawMessage(valid(map[string]any{"kinds": "[7]"}))})
	requireRefused(t, err, "thread_window: limit must be an integer in 1..=200")

	for raw, want := range map[string]bool{`{"thread_window":true}`: true, `{"thread_window":null}`: true, `{"thread_window":0}`: true,
		`{"thread_window":false}`: false, `{"thread_window": false }`: false, `{}`: false, `[{"thread_window":true}]`: false, `7`: false} {
		require.Equal(t, want, window.OptedIn(json.RawMessage(raw)), raw)
	}
}

func FuzzParseBatch(f *testing.F) {
	f.Add([]byte(valid(nil)))
	f.Add([]byte(valid(map[string]any{"until": "1751500000", "before_id": `"` + testRoot + `"`, "include_aux": "true", "limit": "7"})))
	f.Add([]byte(`{"thread_window":true,"#h":["{11111111-2222-4333-8444-555555555555}"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		reqs, _, err := window.ParseBatch([]json.RawMessage{b})
		if err != nil {
			var e *window.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, http.StatusBadRequest, e.Status)
			return
		}
		for _, r := range reqs {
			require.True(t, r.Limit >= 1 && r.Limit <= 200 && r.Depth >= 1 && r.Depth <= 100)
			require.NotEmpty(t, r.Kinds)
			require.Len(t, r.Root, 64)
			require.Len(t, r.Channel, 36)
		}
	})
}

// OptedIn skips decoding filters that cannot name thread_window, but a key
// spelled with an escape still opts in.
func TestOptedInEscapedKey(t *testing.T) {
	t.Parallel()
	require.True(t, window.OptedIn(json.RawMessage(`{"thread_window":true}`)))
	require.True(t, window.OptedIn(json.RawMessage(`{"thread\u005fwindow":true}`)))
	require.False(t, window.OptedIn(json.RawMessage(`{"kinds":[9],"#h":["x"]}`)))
	require.False(t, window.OptedIn(json.RawMessage(`{"thread_window":false}`)))
}
