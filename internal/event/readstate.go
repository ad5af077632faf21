package event

import (
	"encoding/json"
	"regexp"
)

// NIP-RS read state (docs/PROTOCOL.md §14.1). A kind 30078 event is a read-state event
// — "conforming" — when its d tag names a read-state slot and its tags hold
// exactly one d tag and exactly one ["t","read-state"]. Only conforming
// events get read-state retention; every other 30078 is NIP-78 application
// data and keeps NIP-33's soft-delete replacement.

// ReadStateTag is the t tag value of a read-state event.
const ReadStateTag = "read-state"

// readStateD is the d value of a read-state coordinate.
var readStateD = regexp.MustCompile(`^read-state:[0-9a-f]{32}$`)

// IsReadStateD reports whether d names a read-state slot:
// "read-state:" then 32 lowercase hex characters.
func IsReadStateD(d string) bool { return readStateD.MatchString(d) }

// IsReadState reports whether ev is a conforming read-state event. Its
// d_tag is the value of its first d tag, as the store records it.
func IsReadState(ev *Event) bool {
	if ev.Kind != KindAppData {
		return false
	}
	d := ev.Tags.First("d").Value()
	var dTags, exactT int
	valued := false
	for _, t := range ev.Tags {
		if len(t) >= 1 && t[0] == "d" {
			dTags++
			if len(t) >= 2 && t[1] == d {
				valued = true
			}
		}
		if len(t) == 2 && t[0] == "t" && t[1] == ReadStateTag {
			exactT++
		}
	}
	return IsReadStateD(d) && dTags == 1 && valued && exactT == 1
}

// ReadStateRow is the classifier over a stored row — its kind, its d_tag
// column and its tags as raw JSON — exactly as the SQL function
// nip_rs_read_state_row decides it: tags that are not a JSON array count
// as [], tag elements may be any JSON value.
func ReadStateRow(kind int, dTag string, tags json.RawMessage) bool {
	if kind != KindAppData || !IsReadStateD(dTag) {
		return false
	}
	var elems []json.RawMessage
	if json.Unmarshal(tags, &elems) != nil {
		elems = nil // not an array: []
	}
	var dTags, exactT int
	valued := false
	for _, raw := range elems {
		var tag []json.RawMessage
		if json.Unmarshal(raw, &tag) != nil {
			continue // not an array
		}
		first, firstOK := jsonString(tag, 0)
		if firstOK && first == "d" {
			dTags++
			if v, ok := jsonString(tag, 1); ok && v == dTag {
				valued = true
			}
		}
		if len(tag) == 2 && firstOK && first == "t" {
			if v, ok := jsonString(tag, 1); ok && v == ReadStateTag {
				exactT++
			}
		}
	}
	return dTags == 1 && valued && exactT == 1
}

// jsonString returns tag[i] when it is a JSON string.
func jsonString(tag []json.RawMessage, i int) (string, bool) {
	if i >= len(tag) {
		return "", false
	}
	var s string
	if json.Unmarshal(tag[i], &s) != nil {
		return "", false
	}
	return s, true
}
