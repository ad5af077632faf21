package auth

// Observer records the observational audit actions of docs/PROTOCOL.md §13.4 for both
// doors: every authentication outcome and every rate-limit refusal of a
// principal. It samples and queues and never blocks the caller; the
// composition root fills it with *audit.Observer, and a nil Observer
// disables it.
type Observer interface {
	// AuthSuccess records an accepted NIP-42 AUTH or NIP-98 token.
	AuthSuccess(communityID, pubkey, method string)
	// AuthFailure records a refused one; actor is set only for a policy
	// refusal of a cryptographically valid, fresh event (docs/PROTOCOL.md §13.4).
	AuthFailure(communityID, actor, method, reason string)
	// RateLimited records a "rate-limited:" answer.
	RateLimited(communityID, principal, limit, transport string)
}
