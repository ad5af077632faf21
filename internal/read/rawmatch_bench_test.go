package read

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// BenchmarkRowFilterCaps is the history post-filter of one row at the
// filter caps: 1,000 #t values, a stored event with 1,000 t tags whose
// last one matches the last value.
func BenchmarkRowFilterCaps(b *testing.B) {
	const reader = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	values := make([]string, 1000)
	for i := range values {
		values[i] = "value-" + strconv.Itoa(i)
	}
	ev := event.Event{ID: "id", PubKey: reader, Kind: 1, Sig: "s"}
	for i := range 999 {
		ev.Tags = append(ev.Tags, event.Tag{"t", "other-" + strconv.Itoa(i)})
	}
	ev.Tags = append(ev.Tags, event.Tag{"t", values[999]})
	js := ev.AppendJSON(nil)
	at := bytes.Index(js, []byte(`,"tags":`)) + len(`,"tags":`)
	end := bytes.LastIndex(js, []byte(`,"content":`))
	f := event.Filter{Kinds: []int{1}, Tags: map[string][]string{"t": values}}
	rf := newRowFilter(&f)
	sc, acc := Scope{CommunityID: "c", Reader: reader}, newAccess(nil)
	for b.Loop() {
		row := store.EventRow{Event: ev, JSON: js, RawTags: js[at:end]}
		row.Event.Tags = nil
		if ok, err := rf.visible(sc, acc, &row); err != nil || !ok {
			b.Fatal("no match", err)
		}
	}
}
