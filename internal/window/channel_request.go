package window

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
)

// maxResolveTargets bounds the target ids of one summary-recovery filter
// and of all of them in one request together (docs/NIP-CW.md §4).
const maxResolveTargets = 100

// The 400 texts of docs/NIP-CW.md §3.1 and docs/NIP-CW.md §4.
const (
	msgWindowChannel  = "top_level requires exactly one #h channel"
	msgWindowCursor   = "top_level cursor requires both until and before_id, or neither"
	msgWindowBeforeID = "top_level: before_id must be a 64-hex event id"
	msgWindowUntil    = "top_level: until is out of range"

	msgResolveChannel = "resolve_thread_roots requires exactly one #h channel"
	msgResolveKinds   = "resolve_thread_roots requires kinds [39005]"
	msgResolveIDs     = "resolve_thread_roots requires 1 to 100 target ids"
	msgResolveTotal   = "resolve_thread_roots permits at most 100 targets per request"
)

// isTrue reports whether a raw extension value is the JSON literal true;
// a string "true", 1 or any other value is not.
func isTrue(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("true"))
}

// onlyChannel returns the filter's one "#h" value, canonical, when it has
// exactly one and that is a channel UUID.
func onlyChannel(f *event.Filter) (string, bool) {
	hs := f.Tags["h"]
	if len(hs) != 1 {
		return "", false
	}
	return event.ChannelID(hs[0])
}

// IsChannel reports whether f selects channel mode: top_level is boolean
// true. Any other value, or none, leaves f an ordinary filter.
func IsChannel(f *event.Filter) bool { return isTrue(f.Extra["top_level"]) }

// IsResolve reports whether f is a summary-recovery filter:
// resolve_thread_roots is boolean true.
func IsResolve(f *event.Filter) bool { return isTrue(f.Extra["resolve_thread_roots"]) }

// ParseChannel parses a channel-mode filter (IsChannel) by
// docs/NIP-CW.md §3.1; a refusal is a 400 *Error with its text. The
// checks run in the order of docs/NIP-CW.md §3.1's table, so a filter with
// several faults gets the first one's text; a malformed cursor is refused,
// never read as a head request.
func ParseChannel(f *event.Filter) (ChannelRequest, error) {
	ch, ok := onlyChannel(f)
	if !ok {
		return ChannelRequest{}, badRequest(msgWindowChannel)
	}
	r := ChannelRequest{
		Channel:          ch,
		Limit:            defaultLimit,
		Kinds:            f.Kinds,
		IncludeAux:       isTrue(f.Extra["include_aux"]),
		IncludeSummaries: isTrue(f.Extra["include_summaries"]),
	}
	if f.Limit != nil {
		r.Limit = min(max(*f.Limit, 1), maxLimit)
	}
	rawID, hasID := f.Extra["before_id"]
	if hasID != (f.Until != nil) {
		return ChannelRequest{}, badRequest(msgWindowCursor)
	}
	if !hasID {
		return r, nil
	}
	var id string
	if json.Unmarshal(rawID, &id) != nil || !event.IsHexAnyCase64(id) {
		return ChannelRequest{}, badRequest(msgWindowBeforeID)
	}
	if *f.Until < 0 || *f.Until > maxUntil {
		return ChannelRequest{}, badRequest(msgWindowUntil)
	}
	r.Cursor = &Cursor{CreatedAt: *f.Until, ID: strings.ToLower(id)}
	return r, nil
}

// ParseResolve parses a summary-recovery filter (IsResolve) by
// docs/NIP-CW.md §4, checks in the order of its table; a refusal is a 400 *Error. The
// request-wide total is CheckResolveTotal's.
func ParseResolve(f *event.Filter) (ResolveRequest, error) {
	ch, ok := onlyChannel(f)
	if !ok {
		return ResolveRequest{}, badRequest(msgResolveChannel)
	}
	if len(f.Kinds) != 1 || f.Kinds[0] != kindThreadSummary {
		return ResolveRequest{}, badRequest(msgResolveKinds)
	}
	if len(f.IDs) == 0 || len(f.IDs) > maxResolveTargets {
		return ResolveRequest{}, badRequest(msgResolveIDs)
	}
	targets := make([]string, len(f.IDs))
	for i, id := range f.IDs {
		targets[i] = strings.ToLower(id)
	}
	return ResolveRequest{Channel: ch, Targets: targets}, nil
}

// CheckResolveTotal is docs/NIP-CW.md §4's request-wide rule, checked before
// any filter is served: at most 100 ids over every summary-recovery filter.
func CheckResolveTotal(filters []event.Filter) error {
	total := 0
	for i := range filters {
		if IsResolve(&filters[i]) {
			total += len(filters[i].IDs)
		}
	}
	if total > maxResolveTargets {
		return badRequest(msgResolveTotal)
	}
	return nil
}
