package wire

import (
	"strconv"

	"github.com/buzz-relay/buzz/internal/event"
)

// Reason prefixes of spec 10 conventions. A message is prefix + ": " + text.
const (
	Invalid      = "invalid"
	Restricted   = "restricted"
	AuthRequired = "auth-required"
	Blocked      = "blocked"
	RateLimited  = "rate-limited"
	Error        = "error"
	Duplicate    = "duplicate"
)

// Reason builds "prefix: text".
func Reason(prefix, text string) string { return prefix + ": " + text }

// Frequently used fixed messages.
const (
	MsgInternal          = "error: internal server error"
	MsgNotAuthenticated  = "auth-required: not authenticated"
	MsgRateLimited       = "rate-limited: too many concurrent requests"
	MsgDuplicate         = "duplicate:"
	MsgDatabaseError     = "error: database error"
	MsgAuthBeforeSub     = "auth-required: authenticate before subscribing"
	MsgTooManySubs       = "error: too many subscriptions"
	MsgTooManyChannels   = "restricted: too many explicit channels"
	MsgNotChannelMember  = "restricted: not a channel member"
	MsgNotRelayMember    = "restricted: not a relay member"
	MsgVerification      = "auth-required: verification failed"
	MsgAlreadyAuthed     = "auth-required: already authenticated"
	MsgAuthAlreadyFailed = "auth-required: authentication already failed"
	MsgSearchInCount     = "error: search is not supported in COUNT"
	MsgCountTooBroad     = "restricted: count filter requires narrower constraints"
	MsgAccessRevoked     = "restricted: channel access revoked"
	MsgMixedSearch       = "error: mixed search and non-search filters not supported"
)

// FrameTooLarge is the NOTICE / OK text for an oversized frame.
func FrameTooLarge(n, limit int) string {
	return "error: frame too large (" + strconv.Itoa(n) + " bytes, limit " + strconv.Itoa(limit) + ")"
}

// OK builds ["OK",id,ok,msg].
func OK(id string, ok bool, msg string) []byte {
	b := make([]byte, 0, 84+len(msg))
	b = append(b, `["OK",`...)
	b = event.AppendString(b, id)
	if ok {
		b = append(b, ",true,"...)
	} else {
		b = append(b, ",false,"...)
	}
	b = event.AppendString(b, msg)
	return append(b, ']')
}

// EventFrame builds ["EVENT",sub,<event>] from the event's pre-encoded JSON,
// so fan-out serialises each event once.
func EventFrame(sub string, eventJSON []byte) []byte {
	b := make([]byte, 0, 16+len(sub)+len(eventJSON))
	b = append(b, `["EVENT",`...)
	b = event.AppendString(b, sub)
	b = append(b, ',')
	b = append(b, eventJSON...)
	return append(b, ']')
}

// EOSE builds ["EOSE",sub].
func EOSE(sub string) []byte { return twoStrings("EOSE", sub) }

// Closed builds ["CLOSED",sub,msg].
func Closed(sub, msg string) []byte {
	b := append([]byte(`["CLOSED",`), event.AppendString(nil, sub)...)
	b = append(b, ',')
	b = event.AppendString(b, msg)
	return append(b, ']')
}

// Notice builds ["NOTICE",msg].
func Notice(msg string) []byte { return twoStrings("NOTICE", msg) }

// AuthChallenge builds ["AUTH",challenge].
func AuthChallenge(challenge string) []byte { return twoStrings("AUTH", challenge) }

// Count builds ["COUNT",sub,{"count":n}].
func Count(sub string, n int64) []byte {
	b := append([]byte(`["COUNT",`), event.AppendString(nil, sub)...)
	b = append(b, `,{"count":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, "}]"...)
}

func twoStrings(typ, s string) []byte {
	b := append([]byte(`["`+typ+`",`), event.AppendString(nil, s)...)
	return append(b, ']')
}
