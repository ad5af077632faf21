package read

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestRowFilterMatchesDecoded: the post-filter on raw tags answers what
// the decoded one (visible) answers, for random tags and filters drawn
// from names and values that try to fool a byte search: quotes,
// brackets, commas, backslashes, a value that spells a tag.
func TestRowFilterMatchesDecoded(t *testing.T) {
	t.Parallel()
	const reader = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	names := []string{"e", "p", "h", "t", "", ",", "]", "[", `"`, `\`, "a b", "é", "\n"}
	values := []string{"x", "y", "", `"`, `\`, `],["e","x`, `["e"`, `"x"`, ",", "x\ny", "ü", reader,
		"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}
	channels := []string{"", "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"}
	acc := newAccess(channels[1:])
	sc := Scope{CommunityID: "c", Reader: reader}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	matched, rawOnly := 0, 0
	for range 30000 {
		ev := event.Event{ID: "id", PubKey: reader, Kind: 1, Sig: "s"}
		if rng.IntN(5) == 0 {
			ev.Kind = 30622 // ResultGated: visibility reads the p tags
		}
		for range rng.IntN(4) {
			tag := event.Tag{}
			for range rng.IntN(4) {
				if len(tag) == 0 {
					tag = append(tag, pick(names))
				} else {
					tag = append(tag, pick(values))
				}
			}
			ev.Tags = append(ev.Tags, tag)
		}
		f := event.Filter{Tags: map[string][]string{}}
		for range 1 + rng.IntN(2) {
			name := pick(names)
			for range rng.IntN(3) {
				f.Tags[name] = append(f.Tags[name], pick(values))
			}
		}
		channel := pick(channels)
		js := ev.AppendJSON(nil)
		at := bytes.Index(js, []byte(`,"tags":`)) + len(`,"tags":`)
		end := bytes.LastIndex(js, []byte(`,"content":`))
		row := store.EventRow{Event: ev, Channel: channel, JSON: js, RawTags: js[at:end]}
		row.Event.Tags = nil
		rf := newRowFilter(&f)
		got, err := rf.visible(sc, acc, &row)
		require.NoError(t, err)
		want := visible(sc, acc, &f, &ev, channel)
		require.Equal(t, want, got, "tags %q filter %q channel %q", ev.Tags, f.Tags, channel)
		if want {
			matched++
		}
		if !rf.decode && ev.Kind == 1 {
			rawOnly++
			require.Nil(t, row.Event.Tags, "answered from the raw tags")
		}
	}
	require.Greater(t, matched, 1000, "the draw must produce matches too")
	require.Greater(t, rawOnly, 10000, "most draws are answered raw")
}

// TestRowFilterManyValues: past maxRawNeedles values the post-filter
// decodes the row and answers from sets, as visible does.
func TestRowFilterManyValues(t *testing.T) {
	t.Parallel()
	const reader = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sc := Scope{CommunityID: "c", Reader: reader}
	acc := newAccess(nil)
	values := make([]string, maxRawNeedles+1)
	for i := range values {
		values[i] = "v" + string(rune('a'+i))
	}
	for _, n := range []int{maxRawNeedles, maxRawNeedles + 1} {
		f := event.Filter{Tags: map[string][]string{"t": values[:n]}}
		rf := newRowFilter(&f)
		require.Equal(t, n > maxRawNeedles, rf.decode, "%d values", n)
		for _, tags := range []event.Tags{{{"t", values[n-1]}}, {{"t", "other"}}, {{"x", values[0]}}} {
			ev := event.Event{ID: "id", PubKey: reader, Kind: 1, Sig: "s", Tags: tags}
			js := ev.AppendJSON(nil)
			at := bytes.Index(js, []byte(`,"tags":`)) + len(`,"tags":`)
			end := bytes.LastIndex(js, []byte(`,"content":`))
			row := store.EventRow{Event: ev, JSON: js, RawTags: js[at:end]}
			row.Event.Tags = nil
			got, err := rf.visible(sc, acc, &row)
			require.NoError(t, err)
			require.Equal(t, visible(sc, acc, &f, &ev, ""), got, "%d values, tags %q", n, tags)
		}
	}
}
