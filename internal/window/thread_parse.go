package window

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Request-shape limits of docs/NIP-CW.md §5.1 and docs/NIP-CW.md §5.2.
const (
	// maxWindows is the most thread windows one /query may carry.
	maxWindows   = 4
	defaultDepth = 100
	maxDepth     = 100
	maxKinds     = 4
)

// The 400 texts of docs/NIP-CW.md §5.1 and docs/NIP-CW.md §5.2, in the order
// of the checks.
const (
	msgTooManyWindows = "at most four thread windows per query"
	msgExpectedObject = "thread_window: expected object"
	msgUnsupported    = "thread_window: unsupported or conflicting filter field"
	msgMustBeTrue     = "thread_window must be true"
	msgOneH           = "thread_window requires exactly one #h"
	msgChannelUUID    = "thread_window: #h must be a channel UUID"
	msgOneE           = "thread_window requires exactly one #e"
	msgEventID        = "thread_window: expected a full 64-hex event id"
	msgLimit          = "thread_window: limit must be an integer in 1..=200"
	msgDepth          = "thread_window: depth_limit must be an integer in 1..=100"
	msgKindsCount     = "thread_window requires nonempty conversation kinds"
	msgKindsValues    = "thread_window supports row kinds 9, 40002, 45001, 45003 only"
	msgCursorPair     = "thread_window requires both until and before_id, or neither"
	msgUntil          = "thread_window: until must be nonnegative integer seconds"
	msgCursorRange    = "thread_window: cursor timestamp out of range"
	msgIncludeAux     = "thread_window: include_aux must be boolean"
)

// allowedKeys are the only fields a thread-window filter may carry.
var allowedKeys = map[string]bool{
	"thread_window": true, "#h": true, "#e": true, "kinds": true, "limit": true,
	"depth_limit": true, "until": true, "before_id": true, "include_aux": true,
}

// rowKinds are the conversation kinds a thread window serves as rows, and
// the only kinds its root may have.
var rowKinds = []int{9, 40002, 45001, 45003}

// OptedIn reports whether a raw /query filter opts in to thread mode: an
// object whose thread_window key is present and not false
// (docs/NIP-CW.md §5.1).
func OptedIn(raw json.RawMessage) bool {
	// Most filters never name the key: without it, and without an escape
	// that could spell it, nothing needs decoding.
	if !bytes.Contains(raw, []byte("thread_window")) && bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	obj, ok := object(raw)
	if !ok {
		return false
	}
	v, present := obj["thread_window"]
	return present && string(bytes.TrimSpace(v)) != "false"
}

// ParseBatch is the opt-in scan of docs/NIP-CW.md §5.1 over the raw filters of
// a /query body: it counts the opted-in filters (the fifth is refused) and
// parses each opted-in one strictly, in array order, the first failure being
// the answer (a 400 *Error). reqs holds the opted-in filters' requests in
// order; opted is their number.
func ParseBatch(raws []json.RawMessage) (reqs []ThreadRequest, opted int, err error) {
	in := make([]bool, len(raws))
	for i, raw := range raws {
		if in[i] = OptedIn(raw); in[i] {
			opted++
		}
	}
	if opted > maxWindows {
		return nil, opted, badRequest(msgTooManyWindows)
	}
	for i, raw := range raws {
		if !in[i] {
			continue
		}
		r, err := parseThread(raw)
		if err != nil {
			return nil, opted, err
		}
		reqs = append(reqs, r)
	}
	return reqs, opted, nil
}

// parseThread is docs/NIP-CW.md §5.1: the sixteen checks in order, the first
// failure a 400.
func parseThread(raw json.RawMessage) (ThreadRequest, error) {
	obj, ok := object(raw)
	if !ok {
		return ThreadRequest{}, badRequest(msgExpectedObject)
	}
	for k := range obj {
		if !allowedKeys[k] {
			return ThreadRequest{}, badRequest(msgUnsupported)
		}
	}
	if string(obj["thread_window"]) != "true" {
		return ThreadRequest{}, badRequest(msgMustBeTrue)
	}
	r := ThreadRequest{Limit: defaultLimit, Depth: defaultDepth}
	h, ok := single(obj["#h"])
	if !ok {
		return ThreadRequest{}, badRequest(msgOneH)
	}
	if r.Channel, ok = channelUUID(h); !ok {
		return ThreadRequest{}, badRequest(msgChannelUUID)
	}
	e, ok := single(obj["#e"])
	if !ok {
		return ThreadRequest{}, badRequest(msgOneE)
	}
	if r.Root, ok = eventID(e); !ok {
		return ThreadRequest{}, badRequest(msgEventID)
	}
	if v, present := obj["limit"]; present {
		if r.Limit, ok = integerIn(v, 1, maxLimit); !ok {
			return ThreadRequest{}, badRequest(msgLimit)
		}
	}
	if v, present := obj["depth_limit"]; present {
		if r.Depth, ok = integerIn(v, 1, maxDepth); !ok {
			return ThreadRequest{}, badRequest(msgDepth)
		}
	}
	kinds, ok := array(obj["kinds"])
	if !ok || len(kinds) == 0 || len(kinds) > maxKinds {
		return ThreadRequest{}, badRequest(msgKindsCount)
	}
	for _, k := range kinds {
		n, ok := integerIn(k, 0, math.MaxInt32)
		if !ok || !slices.Contains(rowKinds, n) {
			return ThreadRequest{}, badRequest(msgKindsValues)
		}
		r.Kinds = append(r.Kinds, n)
	}
	slices.Sort(r.Kinds)
	r.Kinds = slices.Compact(r.Kinds)
	until, hasUntil := obj["until"]
	before, hasBefore := obj["before_id"]
	if hasUntil != hasBefore {
		return ThreadRequest{}, badRequest(msgCursorPair)
	}
	if hasUntil {
		ts, ok := integer(until)
		if !ok || ts < 0 {
			return ThreadRequest{}, badRequest(msgUntil)
		}
		id, ok := eventID(before)
		if !ok {
			return ThreadRequest{}, badRequest(msgEventID)
		}
		if ts > maxUntil {
			return ThreadRequest{}, badRequest(msgCursorRange)
		}
		r.Cursor = &Cursor{CreatedAt: ts, ID: id}
	}
	if v, present := obj["include_aux"]; present {
		switch string(v) {
		case "true":
			r.IncludeAux = true
		case "false":
		default:
			return ThreadRequest{}, badRequest(msgIncludeAux)
		}
	}
	return r, nil
}

// object decodes a JSON object into its members, each value trimmed of
// surrounding space; ok is false for anything else.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	for k, v := range obj {
		obj[k] = bytes.TrimSpace(v)
	}
	return obj, true
}

// array decodes a JSON array into its elements; ok is false for anything
// else, null and an absent value included.
func array(raw json.RawMessage) ([]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	for i := range elems {
		elems[i] = bytes.TrimSpace(elems[i])
	}
	return elems, true
}

// single returns the one element of a one-element JSON array.
func single(raw json.RawMessage) (json.RawMessage, bool) {
	elems, ok := array(raw)
	if !ok || len(elems) != 1 {
		return nil, false
	}
	return elems[0], true
}

// str decodes a JSON string.
func str(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// channelUUID accepts a UUID string in any case, hyphenated, as 32 hex
// digits, braced or as a urn:uuid: URN, and returns it lowercase and
// hyphenated.
func channelUUID(raw json.RawMessage) (string, bool) {
	s, ok := str(raw)
	if !ok {
		return "", false
	}
	switch {
	case len(s) == 36, len(s) == 32:
	case len(s) == 38 && s[0] == '{' && s[37] == '}':
	case len(s) == 45 && strings.EqualFold(s[:9], "urn:uuid:"):
	default:
		return "", false
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return id.String(), true
}

// eventID accepts a string of 64 hex digits in either case and returns it
// lowercase.
func eventID(raw json.RawMessage) (string, bool) {
	s, ok := str(raw)
	if !ok || len(s) != 64 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return "", false
		}
	}
	return strings.ToLower(s), true
}

// integer decodes a JSON integer: a number literal without fraction or
// exponent that fits a signed 64-bit integer.
func integer(raw json.RawMessage) (int64, bool) {
	s := string(raw)
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// integerIn decodes a JSON integer in lo..hi.
func integerIn(raw json.RawMessage, lo, hi int64) (int, bool) {
	n, ok := integer(raw)
	if !ok || n < lo || n > hi {
		return 0, false
	}
	return int(n), true
}
