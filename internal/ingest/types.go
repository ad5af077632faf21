package ingest

import (
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// Source says which door an event came through.
type Source int

const (
	// SourceWebSocket is an EVENT frame; the WebSocket door checks W1–W3 first.
	SourceWebSocket Source = iota
	// SourceHTTP is POST /events, authenticated with NIP-98.
	SourceHTTP
)

func (s Source) String() string {
	if s == SourceHTTP {
		return "http"
	}
	return "ws"
}

// Request is one submitted event with who is speaking and for which community.
type Request struct {
	Tenant tenant.Tenant
	// Author is the authenticated pubkey (NIP-42 or NIP-98), lowercase hex.
	Author string
	Source Source
	Event  event.Event
	// Origin names the WebSocket the event came through ("" for none):
	// its own subscriptions get the event before its OK
	// (docs/PROTOCOL.md §1.3).
	Origin string

	// enqueued is how many operator-listener outbox rows the event's
	// insert wrote (the last run of the write, which is the one that
	// committed), for buzz_operator_listener_enqueued_total.
	enqueued int
	// posterCheck is the channel whose steps 14 and 15 were left to the
	// write (posters.go), "" when they were read or do not apply.
	posterCheck string
}

// Code classifies a Result so each door can answer in its own terms.
type Code int

const (
	// Accepted means committed (or, for an ephemeral event, fanned out). OK true, "".
	Accepted Code = iota
	// Duplicate means already stored, or a replacement that lost. OK true, "duplicate:".
	Duplicate
	// Conflict means a duplicate reaction or channel. OK false, HTTP 200 accepted:false.
	Conflict
	// Rejected means a pipeline refusal. OK false, HTTP 400.
	Rejected
	// Forbidden means the signer is not the event's author. OK false, HTTP 403.
	Forbidden
	// Internal means a failure of ours. OK false "error: internal server error", HTTP 500.
	Internal
	// RateLimited means the sender is past one of its quotas. OK false
	// "rate-limited: quota exceeded; retry in <n>s", HTTP 429.
	RateLimited
)

// Result is the pipeline's answer to one Request.
type Result struct {
	Code Code
	// Message is the exact OK message (empty for Accepted).
	Message string
	// RetryAfter is, for RateLimited, the seconds until the quota's window
	// ends (the HTTP Retry-After).
	RetryAfter int
	// After, when set, is dispatch that must run after the answer was
	// queued (evictions of revoked subscriptions). The door calls it.
	After func()
}

// OK reports the boolean of the OK frame.
func (r Result) OK() bool { return r.Code == Accepted || r.Code == Duplicate }

// Delivery is one event offered to live subscriptions after commit.
type Delivery struct {
	CommunityID string
	// Channel is the event's channel UUID, or "" for a global event.
	Channel string
	Event   *event.Event
	// JSON is the event encoded once, shared by every recipient; nil until
	// the live side needs it (a local subscriber, the bus), which encodes it.
	JSON []byte
	// Origin is the Request's: the connection served before the OK.
	Origin string
}

// Live is the relay's live side as the pipeline sees it: in the relay,
// the composition root's fan-out, which acts on this process and then on
// the other processes over Redis (docs/PROTOCOL.md §16). No method may
// block: each places frames on bounded queues or drops cached state.
type Live interface {
	// Broadcast offers a committed or ephemeral event to live
	// subscriptions (step 21).
	Broadcast(d Delivery)
	// Forget drops cached accessible-channel sets after a commit that
	// changed access; reader "" is every reader of the community, channel
	// is the event's channel.
	Forget(communityID, channel, reader string)
	// Evict removes channel from live subscriptions (step 23): pubkey's,
	// or every holder's when pubkey is "", or, when nonMembersOnly is set,
	// those of the holders it picks.
	Evict(communityID, channel, pubkey string, nonMembersOnly func(pubkey string) bool)
	// Interrupt closes the community's live subscriptions with the
	// live-interrupted reason: an ambiguous commit (ambiguous.go) may have
	// stored an event that was not fanned out, so their clients re-read
	// the history.
	Interrupt(communityID string)
	// Unsettled says a commit of the community may have stored an event
	// that is not in the live stream yet (ambiguous.go): what holds the
	// community's newest events from that stream drops them.
	Unsettled(communityID string)
}
