package wire

import (
	"strconv"

	"github.com/buzz-relay/buzz/internal/event"
)

// Reason prefixes (docs/PROTOCOL.md §7.10). A message is prefix + ": " + text.
const (
	Invalid      = "invalid"
	Restricted   = "restricted"
	AuthRequired = "auth-required"
	Blocked      = "blocked"
	RateLimited  = "rate-limited"
	Error        = "error"
	Duplicate    = "duplicate"
	// NegClosed starts a NEG-ERR for a negentropy session the relay ended
	// (NIP-77, docs/PROTOCOL.md §7.13).
	NegClosed = "closed"
)

// Reason builds "prefix: text".
func Reason(prefix, text string) string { return prefix + ": " + text }

// Frequently used fixed messages.
const (
	MsgInternal         = "error: internal server error"
	MsgNotAuthenticated = "auth-required: not authenticated"
	MsgRateLimited      = "rate-limited: too many concurrent requests"
	// MsgConnectRate answers (429) an upgrade past the per-address
	// connection rate.
	MsgConnectRate       = "rate-limited: too many connections from this address"
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
	// MsgLiveInterrupted closes a subscription whose cross-process live
	// delivery had a gap (docs/PROTOCOL.md §16.3): the client re-sends its REQ.
	MsgLiveInterrupted = "error: live delivery interrupted; resubscribe"
)

// Refusals of the write doors (docs/PROTOCOL.md §1.1 and §7.10).
const (
	// MsgAuthViaEvent is the WebSocket door's refusal of a kind 22242 sent
	// as EVENT (W2). The pipeline's own refusal, for HTTP, has no " via
	// EVENT".
	MsgAuthViaEvent = "invalid: AUTH events cannot be submitted via EVENT"
	// MsgPubkeyMismatch refuses an event whose pubkey is not the
	// authenticated identity (W3, pipeline step 8); kind 1059 is exempt.
	MsgPubkeyMismatch = "invalid: event pubkey does not match authenticated identity"
	// MsgExpired refuses an event whose NIP-40 expiration is not after the
	// server clock (docs/PROTOCOL.md §6.6), stored and ephemeral kinds alike.
	MsgExpired = "invalid: event has expired"
	// MsgClockDrift refuses an event whose created_at is more than 900 s
	// from the server clock (docs/PROTOCOL.md §3.2), on both doors and in
	// an import (dated ahead of the clock only).
	MsgClockDrift = "invalid: event timestamp too far from server time"
	// MsgBadExpiration refuses an event with more than one expiration tag
	// or a value that is not a decimal Unix time in seconds
	// (docs/PROTOCOL.md §6.6).
	MsgBadExpiration = "invalid: malformed expiration tag"
)

// Read gate refusals (docs/PROTOCOL.md §7.7, §7.10). The p-gate is spelled twice:
// MsgPGateREQ for a REQ, MsgPGateCount for COUNT, POST /query and POST
// /count. The other gates read the same on every surface.
const (
	// MsgPGateREQ refuses a REQ filter that can match p-gated kinds
	// without #p=[self].
	MsgPGateREQ = "restricted: p-gated events require #p matching your pubkey"
	// MsgPGateCount is MsgPGateREQ's wording for COUNT and the HTTP reads.
	MsgPGateCount = "restricted: p-gated kinds require #p tag matching your pubkey"
	// MsgEngram refuses a filter that can match agent engrams (kind 30174)
	// without authors=[self] or #p=[self].
	MsgEngram = "restricted: agent-engram reads require authors=[self] or #p=[self]"
	// MsgAuthorOnly refuses a filter whose kinds are all author-only
	// without authors=[self].
	MsgAuthorOnly = "restricted: author-only kinds require authors=[self]"
)

// FrameTooLarge is the NOTICE / OK text for an oversized frame.
func FrameTooLarge(n, limit int) string {
	return "error: frame too large (" + strconv.Itoa(n) + " bytes, limit " + strconv.Itoa(limit) + ")"
}

// EventTooLarge is the refusal of an event whose serialized JSON, tags
// included, is n bytes, over the maximum; both doors answer it.
func EventTooLarge(n, maximum int) string {
	return Invalid + ": event too large (" + strconv.Itoa(n) + " bytes, maximum " + strconv.Itoa(maximum) + ")"
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
