package event_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
)

func i64(v int64) *int64 { return &v }

// TestMatcher holds Matcher.Match to Filter.Matches on the cases where
// they could part: absent and empty arrays, set sizes on both sides of
// the slice/map switch, the "#h" fallback to the stored channel, tags too
// short to carry a value, and many constraints.
func TestMatcher(t *testing.T) {
	t.Parallel()
	hexOf := func(i int) string { return fmt.Sprintf("%064x", i) }
	many := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + strconv.Itoa(i)
		}
		return out
	}
	ev := &event.Event{ID: hexOf(1), PubKey: hexOf(2), Kind: 9, CreatedAt: 100,
		Tags: event.Tags{{"t", "go"}, {"p", hexOf(3)}, {"e"}, {"t", "nostr"}, {"x", "v9"}}}
	noH := ev
	withH := &event.Event{ID: hexOf(1), PubKey: hexOf(2), Kind: 9, CreatedAt: 100,
		Tags: event.Tags{{"h", "room"}, {"t", "go"}}}
	bareH := &event.Event{ID: hexOf(1), PubKey: hexOf(2), Kind: 9, CreatedAt: 100,
		Tags: event.Tags{{"h"}, {"t", "go"}}}
	cases := []struct {
		name    string
		f       event.Filter
		ev      *event.Event
		channel string
		want    bool
	}{
		{"Empty", event.Filter{}, ev, "", true},
		{"KindsEmptyMatchesNothing", event.Filter{Kinds: []int{}}, ev, "", false},
		{"IDsEmptyIsAbsent", event.Filter{IDs: []string{}}, ev, "", true},
		{"ID", event.Filter{IDs: []string{hexOf(1)}}, ev, "", true},
		{"IDMissing", event.Filter{IDs: []string{hexOf(5)}}, ev, "", false},
		{"IDsLarge", event.Filter{IDs: append(many("x", 999), hexOf(1))}, ev, "", true},
		{"IDsLargeMissing", event.Filter{IDs: many("x", 1000)}, ev, "", false},
		{"Author", event.Filter{Authors: []string{hexOf(2)}}, ev, "", true},
		{"AuthorMissing", event.Filter{Authors: many("a", 20)}, ev, "", false},
		{"KindsSmall", event.Filter{Kinds: []int{1, 9}}, ev, "", true},
		{"KindsLarge", event.Filter{Kinds: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, ev, "", true},
		{"KindsLargeMissing", event.Filter{Kinds: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11}}, ev, "", false},
		{"Since", event.Filter{Since: i64(100)}, ev, "", true},
		{"SinceAfter", event.Filter{Since: i64(101)}, ev, "", false},
		{"Until", event.Filter{Until: i64(100)}, ev, "", true},
		{"UntilBefore", event.Filter{Until: i64(99)}, ev, "", false},
		{"Tag", event.Filter{Tags: map[string][]string{"t": {"nostr"}}}, ev, "", true},
		{"TagMissing", event.Filter{Tags: map[string][]string{"t": {"rust"}}}, ev, "", false},
		{"TagEmptyIsAbsent", event.Filter{Tags: map[string][]string{"t": {}}}, ev, "", true},
		{"TagWithoutValue", event.Filter{Tags: map[string][]string{"e": {""}}}, ev, "", false},
		{"TagsAll", event.Filter{Tags: map[string][]string{"t": {"go"}, "p": {hexOf(3)}}}, ev, "", true},
		{"TagsOneMissing", event.Filter{Tags: map[string][]string{"t": {"go"}, "p": {hexOf(4)}}}, ev, "", false},
		{"TagValuesLarge", event.Filter{Tags: map[string][]string{"t": append(many("v", 999), "nostr")}}, ev, "", true},
		{"ManyConstraints", event.Filter{Tags: map[string][]string{"t": {"go"}, "p": {hexOf(3)}, "x": many("v", 10),
			"a": {"1"}, "b": {"2"}, "c": {"3"}, "d": {"4"}, "f": {"5"}, "g": {"6"}}}, ev, "", false},
		{"ManyConstraintsHeld", event.Filter{Tags: map[string][]string{"t": {"go"}, "p": {hexOf(3)}, "x": many("v", 10)}}, ev, "", true},
		{"HFallsBackToChannel", event.Filter{Tags: map[string][]string{"h": {"room"}}}, noH, "room", true},
		{"HFallbackOtherChannel", event.Filter{Tags: map[string][]string{"h": {"room"}}}, noH, "hall", false},
		{"HFallbackNoChannel", event.Filter{Tags: map[string][]string{"h": {"room"}}}, noH, "", false},
		{"HTagWins", event.Filter{Tags: map[string][]string{"h": {"room"}}}, withH, "hall", true},
		{"HTagOther", event.Filter{Tags: map[string][]string{"h": {"hall"}}}, withH, "hall", false},
		{"HTagWithoutValueNoFallback", event.Filter{Tags: map[string][]string{"h": {"room"}}}, bareH, "room", false},
		{"HFallbackAndTag", event.Filter{Tags: map[string][]string{"h": {"room"}, "t": {"go"}}}, noH, "room", true},
		{"HFallbackAndTagMissing", event.Filter{Tags: map[string][]string{"h": {"room"}, "t": {"rust"}}}, noH, "room", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.f.Matches(tc.ev, tc.channel), "Filter.Matches")
			require.Equal(t, tc.want, tc.f.Compile().Match(tc.ev, tc.channel), "Matcher.Match")
		})
	}
}

// pools of the generated filters and events: small, so that they meet.
var (
	genNames  = []string{"h", "p", "t", "e", "x", "d", "a", "b", "c", ""}
	genValues = []string{"room", "hall", "v1", "v2", "v3", "", "V1"}
	genKinds  = []int{1, 7, 9, 40002}
)

// genCase builds a filter, an event and a channel from the bytes, each
// byte choosing the next field; it wraps around when they run out.
func genCase(data []byte) (event.Filter, event.Event, string) {
	if len(data) == 0 {
		data = []byte{0}
	}
	pos := 0
	next := func(n int) int {
		b := int(data[pos%len(data)])
		pos++
		return b % n
	}
	hex := func() string { return fmt.Sprintf("%064x", next(4)) }
	var f event.Filter
	if next(3) == 0 {
		f.IDs = make([]string, next(12))
		for i := range f.IDs {
			f.IDs[i] = hex()
		}
	}
	if next(3) == 0 {
		f.Authors = make([]string, next(12))
		for i := range f.Authors {
			f.Authors[i] = hex()
		}
	}
	if next(3) == 0 {
		f.Kinds = make([]int, next(12))
		for i := range f.Kinds {
			f.Kinds[i] = genKinds[next(len(genKinds))]
		}
	}
	if next(4) == 0 {
		f.Since = i64(int64(next(4)))
	}
	if next(4) == 0 {
		f.Until = i64(int64(next(4)))
	}
	for range next(7) {
		if f.Tags == nil {
			f.Tags = map[string][]string{}
		}
		vals := make([]string, next(12))
		for i := range vals {
			vals[i] = genValues[next(len(genValues))]
		}
		f.Tags[genNames[next(len(genNames))]] = vals
	}
	ev := event.Event{ID: hex(), PubKey: hex(), Kind: genKinds[next(len(genKinds))], CreatedAt: int64(next(4))}
	for range next(9) {
		tag := make(event.Tag, next(4))
		for i := range tag {
			if i == 0 {
				tag[i] = genNames[next(len(genNames))]
			} else {
				tag[i] = genValues[next(len(genValues))]
			}
		}
		ev.Tags = append(ev.Tags, tag)
	}
	channel := []string{"", "room", "hall"}[next(3)]
	return f, ev, channel
}

// TestMatcherProperty compares Match with Matches on generated cases.
func TestMatcherProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(26, 1))
	matched := 0
	for range 20000 {
		data := make([]byte, 48)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		f, ev, channel := genCase(data)
		want := f.Matches(&ev, channel)
		require.Equal(t, want, f.Compile().Match(&ev, channel), "filter %s event %v channel %q", f.AppendJSON(nil), ev.Tags, channel)
		if want {
			matched++
		}
	}
	require.Greater(t, matched, 1000, "the generator must produce matches too")
}

func FuzzMatcher(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("a filter with #h and an event without h"))
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, ev, channel := genCase(data)
		require.Equal(t, flt.Matches(&ev, channel), flt.Compile().Match(&ev, channel))
	})
}
