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
		// pk stays refused until its window ends: this process remembers
		// Redis's refusal, and that answer costs no count.
		require.False(t, charge(a, admission.Messages, "c1", pk).Allowed)
		require.Equal(t, 1.0, testutil.ToFloat64(a.m.Admission.RedisDown))
		require.Equal(t, 4.0, testutil.ToFloat64(a.m.Admission.Fallback))
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

// TestSharedRefusedRemembered: once Redis refuses a key, this process
// refuses it again until the window ends without another INCR, and
// Refused answers the same without charging; another process's charge
// still goes to Redis and is refused by its count.
func TestSharedRefusedRemembered(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a := setup(t, admission.Quotas{HumanAPICallsPerMin: 2}, rs.URL(), nil)
	b := setup(t, admission.Quotas{HumanAPICallsPerMin: 2}, rs.URL(), nil)
	pk := eventtest.NewKey().PubKey
	key := "buzz:admission:api_calls:c1:" + pk
	call := admission.Charge{Limit: admission.APICalls, CommunityID: "c1", Pubkey: pk, Transport: "http"}
	require.True(t, a.l.Refused(call).Allowed, "nothing refused yet")
	spend(t, a, 2, admission.APICalls, "c1", pk)
	require.True(t, a.l.Refused(call).Allowed, "at the quota: not refused")
	require.False(t, charge(a, admission.APICalls, "c1", pk).Allowed)
	for range 10 {
		require.False(t, charge(a, admission.APICalls, "c1", pk).Allowed)
		d := a.l.Refused(call)
		require.False(t, d.Allowed)
		require.InDelta(t, 60, d.RetryAfter, 2)
	}
	n, err := rs.Client().Get(t.Context(), key).Int()
	require.NoError(t, err)
	require.Equal(t, 3, n, "the refusals after the first were answered from memory")
	require.Equal(t, 11.0, testutil.ToFloat64(a.m.Admission.Rejections.WithLabelValues("api_calls", "ws")))
	require.Equal(t, 10.0, testutil.ToFloat64(a.m.Admission.Rejections.WithLabelValues("api_calls", "http")))
	require.Len(t, a.reported(), 21, "each refusal is reported for the audit log")

	require.True(t, b.l.Refused(call).Allowed, "another process has not seen the refusal")
	require.False(t, charge(b, admission.APICalls, "c1", pk).Allowed)
	n, err = rs.Client().Get(t.Context(), key).Int()
	require.NoError(t, err)
	require.Equal(t, 4, n)
}

func countLines(s, substr string) int { return strings.Count(s, substr) }
