package admission_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/redistest"
)

// TestShared: with Redis the count is shared by every Limiter (every relay
// process) on it; when Redis goes away each counts alone, without refusing
// what its own count allows, and when Redis is back they share again.
func TestShared(t *testing.T) {
	t.Parallel()

	t.Run("TwoProcessesShareTheCount", func(t *testing.T) {
		t.Parallel()
		rs := redistest.Start(t)
		a := setup(t, admission.Quotas{HumanMessagesPerMin: 4}, rs.URL(), nil)
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 4}, rs.URL(), nil)
		pk := eventtest.NewKey().PubKey
		spend(t, a, 2, admission.Messages, "c1", pk)
		spend(t, b, 2, admission.Messages, "c1", pk)
		d := charge(a, admission.Messages, "c1", pk)
		require.False(t, d.Allowed, "the fifth charge, over two processes")
		require.InDelta(t, 60, d.RetryAfter, 2)
		require.False(t, charge(b, admission.Messages, "c1", pk).Allowed)
		spend(t, b, 4, admission.Messages, "c2", pk)
		ttl, err := rs.Client().TTL(t.Context(), "buzz:admission:messages:c1:"+pk).Result()
		require.NoError(t, err)
		require.InDelta(t, 60, ttl.Seconds(), 2, "the window is the key's TTL")
		require.Equal(t, 0.0, testutil.ToFloat64(a.m.Admission.Fallback))
	})

	t.Run("WindowResets", func(t *testing.T) {
		t.Parallel()
		rs := redistest.Start(t)
		a := setup(t, admission.Quotas{WSEventsPerSec: 1}, rs.URL(), nil)
		pk := eventtest.NewKey().PubKey
		spend(t, a, 5, admission.WSEvents, "c1", pk)
		d := charge(a, admission.WSEvents, "c1", pk)
		require.False(t, d.Allowed)
		require.LessOrEqual(t, d.RetryAfter, 5)
		require.Eventually(t, func() bool { return charge(a, admission.WSEvents, "c1", pk).Allowed },
			8*time.Second, 100*time.Millisecond, "the 5 s window ends")
	})

	t.Run("RedisDownThenBack", func(t *testing.T) {
		t.Parallel()
		rs := redistest.Start(t)
		a := setup(t, admission.Quotas{HumanMessagesPerMin: 3}, rs.URL(), nil)
		pk := eventtest.NewKey().PubKey
		spend(t, a, 3, admission.Messages, "c1", pk)
		require.False(t, charge(a, admission.Messages, "c1", pk).Allowed)

		rs.Stop()
		other := eventtest.NewKey().PubKey
		// Counted in this process: the quota still holds, nothing else is refused.
		spend(t, a, 3, admission.Messages, "c1", other)
		require.False(t, charge(a, admission.Messages, "c1", other).Allowed)
		spend(t, a, 3, admission.Messages, "c1", pk) // a fresh window here: Redis's count is out of reach
		require.Equal(t, 1.0, testutil.ToFloat64(a.m.Admission.RedisDown))
		require.Equal(t, 7.0, testutil.ToFloat64(a.m.Admission.Fallback))
		require.Equal(t, 1, countLines(a.log.String(), "redis unavailable"), "logged once per outage")

		rs.Restart()
		fresh := eventtest.NewKey().PubKey
		require.Eventually(t, func() bool {
			charge(a, admission.APICalls, "c1", fresh) // off: never reaches Redis
			charge(a, admission.Messages, "c9", fresh)
			return testutil.ToFloat64(a.m.Admission.RedisDown) == 0
		}, 10*time.Second, 50*time.Millisecond, "one charge a second tries Redis again")
		require.Contains(t, a.log.String(), "redis answers again")
		n, err := rs.Client().Get(t.Context(), "buzz:admission:messages:c9:"+fresh).Int()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 1, "counted in Redis again")
	})
}

func countLines(s, substr string) int { return strings.Count(s, substr) }
