package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestAuditRateLimited: a "rate-limited:" reply of the handler pool is
// recorded as rate_limit_exceeded with the principal, the limiter and the
// transport — here for REQ (EVENT and COUNT share the same path).
func TestAuditRateLimited(t *testing.T) {
	t.Parallel()
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	hooks := app.Hooks{QueryHookFunc: func(ctx context.Context, f *event.Filter) error {
		if f.Limit != nil && *f.Limit == 7 { // the slow request holds the only permit
			held <- struct{}{}
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	r := relaytest.Start(t, map[string]string{"BUZZ_MAX_CONCURRENT_HANDLERS": "1"}, hooks)
	e := &auEnv{r: r, cid: communityID(t, r, r.Host)}
	alice := eventtest.NewKey()
	slow, w := r.Dial(t, ""), r.Dial(t, "")
	slow.Auth(alice)
	w.Auth(alice)
	slow.Send("REQ", "slow", map[string]any{"kinds": []int{1}, "limit": 7})
	<-held
	_, closed, _ := w.Req("busy", map[string]any{"kinds": []int{1}})
	require.Equal(t, "rate-limited: too many concurrent requests", closed)
	close(hold)

	pool := e.stop(t)
	limited := auFind(auEntries(t, pool, e.cid), "rate_limit_exceeded", "")
	require.NotEmpty(t, limited, "the sampler writes the first refusal of the window individually")
	require.Equal(t, alice.PubKey, limited[0].Actor)
	require.Equal(t, "ws", limited[0].Detail["transport"])
	require.NotEmpty(t, limited[0].Detail["limit"])
	auVerified(t, pool, e.cid)
}
