package audit

import (
	"context"
	"time"
)

// ObservationShapes returns one intent of each observational detail shape,
// summaries included, for the round-trip test.
func ObservationShapes(communityID, pubkey string) []Intent {
	o := NewObserver(ObserverConfig{NowFunc: func() time.Time { return time.Unix(1767225600, 0) }})
	o.AuthSuccess(communityID, pubkey, "nip42")
	o.AuthFailure(communityID, "", "nip98", "invalid")
	o.RateLimited(communityID, pubkey, "handler_pool", "ws")
	for range 70 {
		o.AuthSuccess(communityID, pubkey+"x", "nip98")
		o.AuthFailure(communityID, "", "nip42", "expired")
		o.RateLimited(communityID, "", "handler_pool", "http")
	}
	o.CloseWindows(true)
	var out []Intent
	for len(o.queue) > 0 {
		out = append(out, <-o.queue)
	}
	return out
}

// PendingCommunities is the chainer's list of communities with pending
// intents, oldest intent first.
func (c *Chainer) PendingCommunities(ctx context.Context) ([]string, error) { return c.pending(ctx) }
