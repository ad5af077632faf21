package wire

import (
	"strconv"

	"github.com/buzz-relay/buzz/internal/event"
)

// Refusals of the NIP-77 negentropy sessions, sent in NEG-ERR
// (docs/PROTOCOL.md §7.13). A NEG-OPEN's read refusals are the REQ's.
const (
	// MsgNegBadHex refuses a negentropy message that is not an even-length
	// hex string.
	MsgNegBadHex = "invalid: negentropy message is not hex"
	// MsgNegVersion refuses a message of a protocol version other than 1
	// (0x61).
	MsgNegVersion = "invalid: unsupported negentropy protocol version; this relay speaks 0x61"
	// MsgNegMalformed refuses a message that cannot be decoded.
	MsgNegMalformed = "invalid: malformed negentropy message"
	// MsgNegTooManySessions refuses a NEG-OPEN past the connection's open
	// sessions (BUZZ_NEG_MAX_SESSIONS).
	MsgNegTooManySessions = "blocked: too many open negentropy sessions"
	// MsgNegNoSession answers a NEG-MSG whose session is not open (never
	// opened, closed, refused or idle).
	MsgNegNoSession = "closed: no open negentropy session with this id"
	// MsgNegIdle closes a session idle past BUZZ_NEG_IDLE_TIMEOUT_MS.
	MsgNegIdle = "closed: negentropy session idle too long"
	// MsgSearchInNeg refuses a NEG-OPEN with a search filter: a relevance
	// search has no set to reconcile.
	MsgSearchInNeg = "blocked: search is not supported in negentropy sync"
)

// NegTooManyRecords refuses a NEG-OPEN whose filter matches more than
// maximum events (BUZZ_NEG_MAX_RECORDS).
func NegTooManyRecords(maximum int) string {
	return Blocked + ": more than " + strconv.Itoa(maximum) + " events match; narrow the filter"
}

// NegMessageTooLarge refuses a negentropy message of n bytes (decoded)
// over maximum (BUZZ_NEG_MAX_MESSAGE_BYTES).
func NegMessageTooLarge(n, maximum int) string {
	return Blocked + ": negentropy message too large (" + strconv.Itoa(n) + " bytes, maximum " + strconv.Itoa(maximum) + ")"
}

// NegMsg builds ["NEG-MSG",sub,hex].
func NegMsg(sub, hex string) []byte {
	b := make([]byte, 0, 16+len(sub)+len(hex))
	b = append(b, `["NEG-MSG",`...)
	b = event.AppendString(b, sub)
	b = append(b, ',')
	b = event.AppendString(b, hex)
	return append(b, ']')
}

// NegErr builds ["NEG-ERR",sub,reason].
func NegErr(sub, reason string) []byte {
	b := append([]byte(`["NEG-ERR",`), event.AppendString(nil, sub)...)
	b = append(b, ',')
	b = event.AppendString(b, reason)
	return append(b, ']')
}
