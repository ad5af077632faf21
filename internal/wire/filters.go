package wire

import "strconv"

// The refusals of the filter caps (docs/OPERATIONS.md "Filter caps"). The
// first two are the read door's, on every surface; the others are the
// WebSocket door's, on REQ only.

// FilterTooManyValues refuses a filter array over its cap. field is the
// key as the client spelled it ("ids", "authors", "kinds", "#t", …):
// `invalid: filter "kinds" has 65 values (maximum 64)`.
func FilterTooManyValues(field string, n, limit int) string {
	return Reason(Invalid, "filter "+strconv.Quote(field)+" has "+strconv.Itoa(n)+
		" values (maximum "+strconv.Itoa(limit)+")")
}

// FilterTooManyTagKeys refuses a filter with more distinct "#x" keys than
// its cap: `invalid: filter has 9 tag keys (maximum 8)`.
func FilterTooManyTagKeys(n, limit int) string {
	return Reason(Invalid, "filter has "+strconv.Itoa(n)+" tag keys (maximum "+strconv.Itoa(limit)+")")
}

// SubscriptionTooManyIndexKeys refuses a REQ whose live index keys exceed
// the subscription cap:
// `invalid: subscription needs 5000 index keys (maximum 4096)`.
func SubscriptionTooManyIndexKeys(n, limit int) string {
	return Reason(Invalid, "subscription needs "+strconv.Itoa(n)+" index keys (maximum "+strconv.Itoa(limit)+")")
}

// ConnectionTooManyIndexKeys refuses a REQ that would take its
// connection's live index keys over the connection cap:
// `blocked: connection would hold 16385 index keys (maximum 16384); close a subscription first`.
func ConnectionTooManyIndexKeys(n, limit int) string {
	return Reason(Blocked, "connection would hold "+strconv.Itoa(n)+" index keys (maximum "+
		strconv.Itoa(limit)+"); close a subscription first")
}

// ConnectionTooManyFilterBytes refuses a REQ that would take the filter
// bytes its connection's live subscriptions retain over the connection cap:
// `blocked: connection would hold 262145 filter bytes (maximum 262144); close a subscription first`.
func ConnectionTooManyFilterBytes(n, limit int) string {
	return Reason(Blocked, "connection would hold "+strconv.Itoa(n)+" filter bytes (maximum "+
		strconv.Itoa(limit)+"); close a subscription first")
}
