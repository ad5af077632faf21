package read

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// rowFilter is the post-filter of a history read (visible) on rows whose
// tags are still raw (store.EventRow): Filter.Matches with the tag
// constraints tested on the compact tags bytes, so a row is decoded only
// when a test cannot be answered from them (a ResultGated kind, or a tag
// name or value rawTest refuses).
type rowFilter struct {
	f *event.Filter
	// m is f compiled: a decoded row costs its tags, not tags × values.
	m *event.Matcher
	// untagged is f without its tag constraints, compiled.
	untagged *event.Matcher
	tests    []rawTest
	// decode is set when some tag constraint cannot be tested raw, or
	// when there are more than maxRawNeedles values to search the raw
	// bytes for: every row is then decoded and matched by m.
	decode bool
}

// maxRawNeedles is the number of tag values up to which the raw tags are
// searched byte by byte; past it one decode and set lookups cost less
// than a scan of the bytes per value (values × bytes).
const maxRawNeedles = 16

// rawTest is one "#name" constraint in the bytes of store.EventRow.RawTags:
// named is `["name"`, present in the raw tags exactly when some tag's name
// is name, and needles[i] is `["name","values[i]"`, present exactly when
// some tag is named name with values[i] as its first value. Both rest on
// the form RawTags has: compact, an array of arrays of strings, strings
// escaped as event.AppendString does. A '[' followed by '"' then opens a
// tag: inside a string that '"' would close the string, and the byte after
// it would be ',' or ']', never the first byte of the escaped name (hence
// a name starting with ',' or ']' is refused), nor a second '"'.
type rawTest struct {
	name    string
	values  []string
	named   []byte
	needles [][]byte
}

func newRowFilter(f *event.Filter) *rowFilter {
	untagged := *f
	untagged.Tags = nil
	rf := &rowFilter{f: f, m: f.Compile(), untagged: untagged.Compile()}
	needles := 0
	for _, values := range f.Tags {
		needles += len(values)
	}
	if needles > maxRawNeedles {
		rf.decode = true
		return rf
	}
	for name, values := range f.Tags {
		if len(values) == 0 {
			continue
		}
		if !rawSafe(name) || (name != "" && (name[0] == ',' || name[0] == ']')) {
			rf.decode = true
			return rf
		}
		t := rawTest{name: name, values: values, named: event.AppendString([]byte{'['}, name)}
		for _, v := range values {
			if !rawSafe(v) {
				rf.decode = true
				return rf
			}
			n := append(append([]byte{}, t.named...), ',')
			t.needles = append(t.needles, event.AppendString(n, v))
		}
		rf.tests = append(rf.tests, t)
	}
	return rf
}

// rawSafe reports whether s encodes to the bytes a stored string equal to
// it has: valid UTF-8 (AppendString would replace what is not).
func rawSafe(s string) bool { return utf8.ValidString(s) }

// visible is the package's visible for a raw row: the filter's exact
// match, per-event visibility, a channel the reader may read. It decodes
// the row's tags when it must; a row whose tags do not decode is an error.
func (rf *rowFilter) visible(sc Scope, acc *Access, r *store.EventRow) (bool, error) {
	if rf.decode || event.ResultGated.Has(r.Event.Kind) {
		if err := r.DecodeTags(); err != nil {
			return false, err
		}
		return rf.visibleEvent(sc, acc, &r.Event, r.Channel), nil
	}
	if !rf.untagged.Match(&r.Event, r.Channel) || !rf.tagsMatch(r.RawTags, r.Channel) {
		return false, nil
	}
	if !visibleTo(sc.Reader, &r.Event) {
		return false, nil
	}
	return r.Channel == "" || acc.Has(r.Channel), nil
}

// visibleEvent is visible for a decoded event: the same decision for a
// row of PostgreSQL and for an entry of the hot window (hot.go).
func (rf *rowFilter) visibleEvent(sc Scope, acc *Access, ev *event.Event, channel string) bool {
	if !rf.m.Match(ev, channel) || !visibleTo(sc.Reader, ev) {
		return false
	}
	return channel == "" || acc.Has(channel)
}

// tagsMatch is the tag loop of event.Filter.Matches on raw tags.
func (rf *rowFilter) tagsMatch(raw []byte, channel string) bool {
	for i := range rf.tests {
		t := &rf.tests[i]
		if t.name == "h" && !bytes.Contains(raw, t.named) {
			if channel == "" || !slices.Contains(t.values, channel) {
				return false
			}
			continue
		}
		if !slices.ContainsFunc(t.needles, func(n []byte) bool { return bytes.Contains(raw, n) }) {
			return false
		}
	}
	return true
}
