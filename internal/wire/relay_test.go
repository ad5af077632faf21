package wire_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/wire"
)

// TestMessages pins every fixed message to its spelling in docs/PROTOCOL.md §7.10 and
// checks that it starts with one of the reason prefixes: clients match on
// these strings, so a change here is a change of the protocol.
func TestMessages(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, got, want string }{
		{"Internal", wire.MsgInternal, "error: internal server error"},
		{"NotAuthenticated", wire.MsgNotAuthenticated, "auth-required: not authenticated"},
		{"RateLimited", wire.MsgRateLimited, "rate-limited: too many concurrent requests"},
		{"ConnectRate", wire.MsgConnectRate, "rate-limited: too many connections from this address"},
		{"Duplicate", wire.MsgDuplicate, "duplicate:"},
		{"DatabaseError", wire.MsgDatabaseError, "error: database error"},
		{"AuthBeforeSub", wire.MsgAuthBeforeSub, "auth-required: authenticate before subscribing"},
		{"TooManySubs", wire.MsgTooManySubs, "error: too many subscriptions"},
		{"TooManyChannels", wire.MsgTooManyChannels, "restricted: too many explicit channels"},
		{"NotChannelMember", wire.MsgNotChannelMember, "restricted: not a channel member"},
		{"NotRelayMember", wire.MsgNotRelayMember, "restricted: not a relay member"},
		{"Verification", wire.MsgVerification, "auth-required: verification failed"},
		{"AlreadyAuthed", wire.MsgAlreadyAuthed, "auth-required: already authenticated"},
		{"AuthAlreadyFailed", wire.MsgAuthAlreadyFailed, "auth-required: authentication already failed"},
		{"SearchInCount", wire.MsgSearchInCount, "error: search is not supported in COUNT"},
		{"CountTooBroad", wire.MsgCountTooBroad, "restricted: count filter requires narrower constraints"},
		{"AccessRevoked", wire.MsgAccessRevoked, "restricted: channel access revoked"},
		{"MixedSearch", wire.MsgMixedSearch, "error: mixed search and non-search filters not supported"},
		{"AuthViaEvent", wire.MsgAuthViaEvent, "invalid: AUTH events cannot be submitted via EVENT"},
		{"PubkeyMismatch", wire.MsgPubkeyMismatch, "invalid: event pubkey does not match authenticated identity"},
		{"Expired", wire.MsgExpired, "invalid: event has expired"},
		{"ClockDrift", wire.MsgClockDrift, "invalid: event timestamp too far from server time"},
		{"BadExpiration", wire.MsgBadExpiration, "invalid: malformed expiration tag"},
		{"PGateREQ", wire.MsgPGateREQ, "restricted: p-gated events require #p matching your pubkey"},
		{"PGateCount", wire.MsgPGateCount, "restricted: p-gated kinds require #p tag matching your pubkey"},
		{"Engram", wire.MsgEngram, "restricted: agent-engram reads require authors=[self] or #p=[self]"},
		{"AuthorOnly", wire.MsgAuthorOnly, "restricted: author-only kinds require authors=[self]"},
		{"FrameTooLarge", wire.FrameTooLarge(70000, 65536), "error: frame too large (70000 bytes, limit 65536)"},
		{"EventTooLarge", wire.EventTooLarge(393217, 393216), "invalid: event too large (393217 bytes, maximum 393216)"},
		{"Reason", wire.Reason(wire.Blocked, "x"), "blocked: x"},
		{"NegBadHex", wire.MsgNegBadHex, "invalid: negentropy message is not hex"},
		{"NegVersion", wire.MsgNegVersion, "invalid: unsupported negentropy protocol version; this relay speaks 0x61"},
		{"NegMalformed", wire.MsgNegMalformed, "invalid: malformed negentropy message"},
		{"NegTooManySessions", wire.MsgNegTooManySessions, "blocked: too many open negentropy sessions"},
		{"NegNoSession", wire.MsgNegNoSession, "closed: no open negentropy session with this id"},
		{"NegIdle", wire.MsgNegIdle, "closed: negentropy session idle too long"},
		{"SearchInNeg", wire.MsgSearchInNeg, "blocked: search is not supported in negentropy sync"},
		{"NegTooManyRecords", wire.NegTooManyRecords(500000), "blocked: more than 500000 events match; narrow the filter"},
		{"NegMessageTooLarge", wire.NegMessageTooLarge(4097, 4096), "blocked: negentropy message too large (4097 bytes, maximum 4096)"},
	}
	prefixes := []string{wire.Invalid, wire.Restricted, wire.AuthRequired, wire.Blocked, wire.RateLimited, wire.Error, wire.Duplicate, wire.NegClosed}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.got)
			prefix, _, ok := strings.Cut(tc.got, ":")
			require.True(t, ok, "no colon in %q", tc.got)
			require.Contains(t, prefixes, prefix)
		})
	}
}
