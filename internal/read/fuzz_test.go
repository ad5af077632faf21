package read

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

// The pure request layers of /query; the reads themselves need a database
// and are covered by the door and snapshot tests.

// fuzzFilters decodes a /query body into filters as the bridge does; ok is
// false for a body the bridge refuses before the door sees it.
func fuzzFilters(body []byte) ([]event.Filter, bool) {
	var raws []json.RawMessage
	if json.Unmarshal(body, &raws) != nil || len(raws) == 0 {
		return nil, false
	}
	out := make([]event.Filter, len(raws))
	for i, raw := range raws {
		f, err := event.ParseFilter(raw)
		if err != nil {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// FuzzSnapshotRequest is the read-state snapshot's request check: it
// never panics, a refusal is SnapshotInvalid with an "invalid: " or
// "restricted: " reason, and an accepted request is exactly
// {"kinds":[30078],"authors":[reader],"read_state_snapshot":1}, which
// WantsSnapshot sees and which is accepted again after re-encoding.
func FuzzSnapshotRequest(f *testing.F) {
	me := strings.Repeat("ab", 32)
	for _, s := range []string{
		`[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1}]`,
		`[{"kinds":[30078],"authors":["` + strings.ToUpper(me) + `"],"read_state_snapshot": 1 }]`,
		`[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1},{"kinds":[1]}]`,
		`[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":2}]`,
		`[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1,"limit":1}]`,
		`[{"kinds":[1],"authors":["` + me + `"],"read_state_snapshot":1}]`,
		`[{"kinds":[30078],"authors":["` + strings.Repeat("cd", 32) + `"],"read_state_snapshot":1}]`,
		`[{"kinds":[30078],"read_state_snapshot":"1","#d":[]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		filters, ok := fuzzFilters(body)
		if !ok {
			return
		}
		err := checkSnapshotRequest(me, filters)
		if err != nil {
			require.Equal(t, SnapshotInvalid, err.Code)
			require.True(t, strings.HasPrefix(err.Reason, "invalid: ") || strings.HasPrefix(err.Reason, "restricted: "), err.Reason)
			return
		}
		require.True(t, WantsSnapshot(filters))
		require.Len(t, filters, 1)
		flt := filters[0]
		require.Equal(t, []int{event.KindAppData}, flt.Kinds)
		require.Equal(t, []string{me}, flt.Authors)
		require.Len(t, flt.Extra, 1)
		require.Equal(t, "1", string(bytes.TrimSpace(flt.Extra[SnapshotField])))
		require.Empty(t, otherFields(&flt))
		again, ok := fuzzFilters(append(append([]byte{'['}, flt.AppendJSON(nil)...), ']'))
		require.True(t, ok)
		require.Nil(t, checkSnapshotRequest(me, again))
	})
}

// FuzzQueryOptions is the extension fields of one /query filter: routeOf
// and the option parsers never panic, a refusal is CodeInvalidFilter, and
// what they accept is bounded: a before_id cursor is a lowercase 64-hex id
// with an until, a legacy thread read has a lowercase root and cursor id
// and a non-negative depth, a search page is in 1..2^31-1.
func FuzzQueryOptions(f *testing.F) {
	id := strings.Repeat("ab", 32)
	for _, s := range []string{
		`{"kinds":[9],"until":5,"before_id":"` + strings.ToUpper(id) + `"}`,
		`{"before_id":"` + id + `"}`, `{"until":5,"before_id":7}`,
		`{"#e":["` + id + `"],"depth_limit":3,"limit":50,"thread_cursor":17,"thread_cursor_id":"` + strings.ToUpper(id) + `"}`,
		`{"#e":["` + id + `"],"depth_limit":-1}`,
		`{"#e":["` + id + `"],"depth_limit":-9223372036854775808,"threadCursor":1.5}`,
		`{"#e":["` + id + `"],"depth_limit":99999999999,"threadCursorId":"x","include_aux":true}`,
		`{"search":"deploy","search_mode":"prefix","page":2}`,
		`{"search":"x","searchMode":"prefix","search_page":0,"searchPage":3}`,
		`{"search":"x","page":2147483648}`,
		`{"top_level":true,"#h":["0f3c2a6e-8d1b-4c5e-9a7f-112233445566"]}`,
		`{"resolve_thread_roots":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		flt, err := event.ParseFilter(b)
		if err != nil {
			return
		}
		rt := routeOf(&flt)

		opt, err := parsePlainOptions(&flt)
		if err != nil {
			requireInvalidFilter(t, err, msgBadBeforeID, msgBeforeIDNeedsUntil)
		} else {
			_, has := flt.Extra["before_id"]
			require.Equal(t, has, opt.beforeID != "")
			if has {
				require.True(t, event.IsHex64(opt.beforeID), opt.beforeID)
				require.NotNil(t, flt.Until)
			}
		}

		so := parseSearchOptions(&flt)
		require.True(t, so.Page >= 1 && so.Page <= 1<<31-1, so.Page)

		if rt != routeLegacyThread {
			return
		}
		chans := []string{"0f3c2a6e-8d1b-4c5e-9a7f-112233445566"}
		p, err := parseLegacyThread(&flt, chans, true)
		if err != nil {
			var ref *Refusal
			require.True(t, errors.As(err, &ref), "%T %v", err, err)
			require.Equal(t, CodeInvalidFilter, ref.Code)
			require.True(t, strings.HasPrefix(ref.Reason, "invalid filters: "), ref.Reason)
			return
		}
		require.True(t, event.IsHex64(p.Root), p.Root)
		require.True(t, p.DepthLimit >= 0, p.DepthLimit)
		require.True(t, p.CursorID == "" || event.IsHex64(p.CursorID), p.CursorID)
		require.Equal(t, chans, p.Channels)
		if flt.Limit != nil {
			require.Equal(t, *flt.Limit, p.Limit)
		}
	})
}

// requireInvalidFilter requires err to be a CodeInvalidFilter *Refusal
// with one of texts.
func requireInvalidFilter(t *testing.T, err error, texts ...string) {
	t.Helper()
	var ref *Refusal
	require.True(t, errors.As(err, &ref), "%T %v", err, err)
	require.Equal(t, CodeInvalidFilter, ref.Code)
	require.True(t, slices.Contains(texts, ref.Reason), ref.Reason)
}
