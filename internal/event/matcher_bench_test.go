package event_test

import (
	"strconv"
	"testing"

	"github.com/buzz-relay/buzz/internal/event"
)

// BenchmarkMatch compares live matching by Filter.Matches (a scan of the
// values per tag) with the compiled Matcher, on a filter and an event at
// the default caps (1,000 #t values, 1,000 t tags whose last one matches)
// and on an honest channel subscription.
func BenchmarkMatch(b *testing.B) {
	values := make([]string, 1000)
	for i := range values {
		values[i] = "value-" + strconv.Itoa(i)
	}
	tags := make(event.Tags, 0, 1000)
	for i := range 999 {
		tags = append(tags, event.Tag{"t", "other-" + strconv.Itoa(i)})
	}
	tags = append(tags, event.Tag{"t", values[999]})
	cases := []struct {
		name string
		f    event.Filter
		ev   event.Event
	}{
		{"Caps", event.Filter{Kinds: []int{1}, Tags: map[string][]string{"t": values}}, event.Event{Kind: 1, Tags: tags}},
		{"Honest", event.Filter{Kinds: []int{9, 7}, Tags: map[string][]string{"h": {"room"}}},
			event.Event{Kind: 9, Tags: event.Tags{{"h", "room"}, {"p", "someone"}, {"e", "parent", "", "reply"}}}},
	}
	for _, tc := range cases {
		b.Run(tc.name+"/Filter", func(b *testing.B) {
			for b.Loop() {
				if !tc.f.Matches(&tc.ev, "") {
					b.Fatal("no match")
				}
			}
		})
		b.Run(tc.name+"/Matcher", func(b *testing.B) {
			m := tc.f.Compile()
			for b.Loop() {
				if !m.Match(&tc.ev, "") {
					b.Fatal("no match")
				}
			}
		})
	}
}
