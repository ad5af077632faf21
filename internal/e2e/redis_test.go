package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestRedisUnreachable is check 4 of spec 10 §12: with REDIS_URL pointing at
// nothing, a publish still gets OK true and REQ returns the event (Redis is
// never on the path of OK; an unreachable link only costs cross-process
// fan-out).
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	key := eventtest.NewKey()
	r := relaytest.Start(t, map[string]string{
		"REDIS_URL":              "redis://127.0.0.1:1/0",
		"BUZZ_RELAY_PRIVATE_KEY": "0000000000000000000000000000000000000000000000000000000000000001",
	})
	w := r.Dial(t, "")
	w.Auth(key)
	ev := key.Signed(t, 1, eventtest.Content("no redis"))
	w.MustPublish(ev)
	evs, closed, eose := w.Req("s", map[string]any{"ids": []string{ev.ID}})
	require.True(t, eose, closed)
	require.Len(t, evs, 1)
	require.Equal(t, ev.ID, evs[0].ID)
}
