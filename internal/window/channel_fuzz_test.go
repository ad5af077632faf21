package window_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/window"
)

// windowTexts are every 400 text of docs/NIP-CW.md §3.1 and docs/NIP-CW.md §4.
var windowTexts = []string{
	"top_level requires exactly one #h channel",
	"top_level cursor requires both until and before_id, or neither",
	"top_level: before_id must be a 64-hex event id",
	"top_level: until is out of range",
	"resolve_thread_roots requires exactly one #h channel",
	"resolve_thread_roots requires kinds [39005]",
	"resolve_thread_roots requires 1 to 100 target ids",
	"resolve_thread_roots permits at most 100 targets per request",
}

// requireWindowRefusal requires err to be a 400 *Error with a text of
// docs/NIP-CW.md §3.1 or docs/NIP-CW.md §4.
func requireWindowRefusal(t *testing.T, err error) {
	t.Helper()
	var ce *window.Error
	require.True(t, errors.As(err, &ce), "%T %v", err, err)
	require.Equal(t, http.StatusBadRequest, ce.Status)
	require.Contains(t, windowTexts, ce.Text)
}

// FuzzParseChannel decodes a /query filter and parses it as a channel window
// and as a summary-recovery filter: neither panics, a refusal is a 400 with a
// text of docs/NIP-CW.md §3.1 or docs/NIP-CW.md §4, and a success respects
// docs/NIP-CW.md §3.1 and docs/NIP-CW.md §4: a canonical channel, limit
// clamped into 1..200, a cursor with a lowercase 64-hex id and an in-range
// second, 1 to 100 lowercase targets.
func FuzzParseChannel(f *testing.F) {
	id := strings.Repeat("ab", 32)
	h := `"#h":["` + testCh + `"]`
	for _, s := range []string{
		`{"top_level":true,"#h":["` + strings.ToUpper(testCh) + `"]}`,
		`{"top_level":true,` + h + `,"kinds":[9,40002],"limit":7,"until":1751500000,"before_id":"` + strings.ToUpper(id) + `","include_aux":true,"include_summaries":true}`,
		`{"top_level":true,` + h + `,"limit":100000}`,
		`{"top_level":true,` + h + `,"limit":0}`,
		`{"top_level":true,` + h + `,"until":253402300800,"before_id":"` + id + `"}`,
		`{"top_level":true,` + h + `,"until":1,"before_id":7}`,
		`{"top_level":true,"#h":["general"]}`,
		`{"resolve_thread_roots":true,` + h + `,"kinds":[39005],"ids":["` + strings.ToUpper(id) + `"]}`,
		`{"resolve_thread_roots":true,` + h + `,"kinds":[39005,9],"ids":[]}`,
		`{"resolve_thread_roots":"true"}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		flt, err := event.ParseFilter(b)
		if err != nil {
			return
		}
		r, err := window.ParseChannel(&flt)
		if err != nil {
			requireWindowRefusal(t, err)
		} else {
			requireCanonicalChannel(t, r.Channel)
			require.True(t, r.Limit >= 1 && r.Limit <= 200, r.Limit)
			require.Equal(t, flt.Kinds, r.Kinds)
			require.Equal(t, flt.Until != nil, r.Cursor != nil)
			if r.Cursor != nil {
				require.True(t, event.IsHex64(r.Cursor.ID), r.Cursor.ID)
				require.True(t, r.Cursor.CreatedAt >= 0 && r.Cursor.CreatedAt <= 253402300799, r.Cursor.CreatedAt)
				require.Equal(t, *flt.Until, r.Cursor.CreatedAt)
			}
		}

		rr, err := window.ParseResolve(&flt)
		if err != nil {
			requireWindowRefusal(t, err)
		} else {
			requireCanonicalChannel(t, rr.Channel)
			require.Equal(t, []int{39005}, flt.Kinds)
			require.True(t, len(rr.Targets) >= 1 && len(rr.Targets) <= 100, len(rr.Targets))
			for i, target := range rr.Targets {
				require.True(t, event.IsHex64(target), target)
				require.Equal(t, flt.IDs[i], target)
			}
		}

		// The request-wide total counts the ids of resolve filters only.
		total := 0
		if window.IsResolve(&flt) {
			total = 2 * len(flt.IDs)
		}
		err = window.CheckResolveTotal([]event.Filter{flt, flt})
		if total > 100 {
			requireWindowRefusal(t, err)
		} else {
			require.NoError(t, err)
		}
	})
}

// requireCanonicalChannel requires a lowercase channel UUID.
func requireCanonicalChannel(t *testing.T, ch string) {
	t.Helper()
	canon, ok := event.ChannelID(ch)
	require.True(t, ok, ch)
	require.Equal(t, canon, ch)
	require.Equal(t, strings.ToLower(ch), ch)
}
