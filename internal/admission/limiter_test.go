package admission_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
)

// clock is a settable NowFunc.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// refusal is one report to RateLimitedFunc.
type refusal struct{ community, pubkey, limit, transport string }

type bundle struct {
	l        *admission.Limiter
	m        *metrics.Metrics
	clock    *clock
	log      *logtest.Buffer
	mu       sync.Mutex
	refusals []refusal
	lookups  atomic.Int64
}

func (b *bundle) reported() []refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]refusal(nil), b.refusals...)
}

// setup builds a Limiter with q, counting in this process unless redisURL
// is set. agents are the pubkeys AgentFunc calls agents; failing makes it
// fail for the pubkey "broken".
func setup(t *testing.T, q admission.Quotas, redisURL string, exempt []string, agents ...string) *bundle {
	t.Helper()
	b := &bundle{m: metrics.New(prometheus.NewRegistry()), clock: &clock{now: time.Unix(1_700_000_000, 0)}, log: &logtest.Buffer{}}
	l, err := admission.New(admission.Config{
		Quotas: q, RedisURL: redisURL, Exempt: exempt, Metrics: b.m, NowFunc: b.clock.Now,
		Logger: slog.New(slog.NewTextHandler(b.log, nil)),
		AgentFunc: func(_ context.Context, _, pubkey string) (bool, error) {
			b.lookups.Add(1)
			if pubkey == "broken" {
				return false, errors.New("database down")
			}
			for _, a := range agents {
				if a == pubkey {
					return true, nil
				}
			}
			return false, nil
		},
		RateLimitedFunc: func(community, pubkey, limit, transport string) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.refusals = append(b.refusals, refusal{community, pubkey, limit, transport})
		},
	})
	require.NoError(t, err)
	t.Cleanup(l.Close)
	b.l = l
	return b
}

func charge(b *bundle, limit admission.Limit, community, pubkey string) admission.Decision {
	return b.l.Charge(context.Background(), admission.Charge{Limit: limit, CommunityID: community, Pubkey: pubkey, Transport: "ws"})
}

// spend charges n times and requires each to be allowed.
func spend(t *testing.T, b *bundle, n int, limit admission.Limit, community, pubkey string) {
	t.Helper()
	for i := range n {
		require.True(t, charge(b, limit, community, pubkey).Allowed, "charge %d of %d", i+1, n)
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	human, agent := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey

	t.Run("AtTheQuotaThenOneOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 3}, "", nil)
		spend(t, b, 3, admission.Messages, "c1", human)
		b.clock.Add(15 * time.Second)
		d := charge(b, admission.Messages, "c1", human)
		require.Equal(t, admission.Decision{Allowed: false, RetryAfter: 45}, d)
		require.Equal(t, 1.0, testutil.ToFloat64(b.m.Admission.Rejections.WithLabelValues("messages", "ws")))
		require.Equal(t, []refusal{{"c1", human, "messages", "ws"}}, b.reported())
	})

	t.Run("RefusedChargesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanAPICallsPerMin: 2}, "", nil)
		call := admission.Charge{Limit: admission.APICalls, CommunityID: "c1", Pubkey: human, Transport: "http"}
		for range 5 {
			require.True(t, b.l.Refused(call).Allowed, "not past the quota: Refused lets it through")
		}
		spend(t, b, 2, admission.APICalls, "c1", human) // Refused charged nothing
		require.True(t, b.l.Refused(call).Allowed, "at the quota")
		require.False(t, charge(b, admission.APICalls, "c1", human).Allowed)
		b.clock.Add(20 * time.Second)
		require.Equal(t, admission.Decision{RetryAfter: 40}, b.l.Refused(call))
		require.Len(t, b.reported(), 2, "Refused's refusal is reported as Charge's")
		require.True(t, b.l.Refused(admission.Charge{Limit: admission.Messages, CommunityID: "c1", Pubkey: human}).Allowed,
			"a quota that is off")
		b.clock.Add(40 * time.Second)
		require.True(t, b.l.Refused(call).Allowed, "the window ended")
		spend(t, b, 2, admission.APICalls, "c1", human)
	})

	t.Run("WindowResets", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 2}, "", nil)
		spend(t, b, 2, admission.Messages, "c1", human)
		b.clock.Add(59 * time.Second)
		d := charge(b, admission.Messages, "c1", human)
		require.Equal(t, admission.Decision{RetryAfter: 1}, d)
		b.clock.Add(time.Second)
		spend(t, b, 2, admission.Messages, "c1", human)
		require.False(t, charge(b, admission.Messages, "c1", human).Allowed)
	})

	t.Run("PerPubkeyPerCommunityPerLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 1, HumanAPICallsPerMin: 1}, "", nil)
		spend(t, b, 1, admission.Messages, "c1", human)
		require.False(t, charge(b, admission.Messages, "c1", human).Allowed)
		spend(t, b, 1, admission.Messages, "c2", human)
		spend(t, b, 1, admission.Messages, "c1", eventtest.NewKey().PubKey)
		spend(t, b, 1, admission.APICalls, "c1", human)
	})

	t.Run("WSEventsBudgetIsFiveSeconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{WSEventsPerSec: 2}, "", nil)
		spend(t, b, 10, admission.WSEvents, "c1", human)
		require.Equal(t, admission.Decision{RetryAfter: 5}, charge(b, admission.WSEvents, "c1", human))
		b.clock.Add(5 * time.Second)
		spend(t, b, 10, admission.WSEvents, "c1", human)
	})

	t.Run("ChannelCreatesHour", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{ChannelCreatesPerHour: 1}, "", nil)
		spend(t, b, 1, admission.ChannelCreates, "c1", human)
		require.Equal(t, admission.Decision{RetryAfter: 3600}, charge(b, admission.ChannelCreates, "c1", human))
	})

	t.Run("ZeroIsOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 1}, "", nil)
		spend(t, b, 1000, admission.WSEvents, "c1", human)
		spend(t, b, 1000, admission.APICalls, "c1", human)
		l, err := admission.New(admission.Config{})
		require.NoError(t, err)
		require.Nil(t, l, "every quota off: no limiter")
		require.True(t, l.Charge(context.Background(), admission.Charge{Limit: admission.Messages, Pubkey: human}).Allowed)
	})

	t.Run("Exempt", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey().PubKey
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 1}, "", []string{owner, ""})
		spend(t, b, 100, admission.Messages, "c1", owner)
		spend(t, b, 1, admission.Messages, "c1", human)
		require.False(t, charge(b, admission.Messages, "c1", human).Allowed)
	})

	t.Run("AgentBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 2, AgentMessagesPerMin: 4, WSEventsPerSec: 1}, "", nil, agent)
		spend(t, b, 4, admission.Messages, "c1", agent)
		require.False(t, charge(b, admission.Messages, "c1", agent).Allowed)
		spend(t, b, 2, admission.Messages, "c1", human)
		require.False(t, charge(b, admission.Messages, "c1", human).Allowed)
		require.Equal(t, int64(2), b.lookups.Load(), "one lookup per pubkey, then cached")
		spend(t, b, 5, admission.WSEvents, "c1", agent)
		require.False(t, charge(b, admission.WSEvents, "c1", agent).Allowed, "one ws events quota for all")
		require.Equal(t, int64(2), b.lookups.Load(), "no lookup where both budgets are equal")
		b.clock.Add(admission.AgentCacheTTL)
		spend(t, b, 4, admission.Messages, "c1", agent)
		require.Equal(t, int64(3), b.lookups.Load(), "looked up again after the cache's 60 s")
	})

	// Many charges of one new pubkey at once (a key opening many sockets
	// or bridge calls together) share one lookup.
	t.Run("ConcurrentMissesShareOneLookup", func(t *testing.T) {
		t.Parallel()
		var lookups atomic.Int64
		release := make(chan struct{})
		l, err := admission.New(admission.Config{
			Quotas: admission.Quotas{HumanMessagesPerMin: 100, AgentMessagesPerMin: 200}, Metrics: metrics.Disabled(),
			AgentFunc: func(context.Context, string, string) (bool, error) {
				lookups.Add(1)
				<-release
				return false, nil
			},
		})
		require.NoError(t, err)
		t.Cleanup(l.Close)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				d := l.Charge(context.Background(), admission.Charge{Limit: admission.Messages, CommunityID: "c1", Pubkey: human, Transport: "ws"})
				assert.True(t, d.Allowed)
			})
		}
		require.Eventually(t, func() bool { return lookups.Load() > 0 }, 5*time.Second, time.Millisecond)
		time.Sleep(100 * time.Millisecond) // the other charges reach the lookup meanwhile
		close(release)
		wg.Wait()
		require.Equal(t, int64(1), lookups.Load(), "one lookup for twenty concurrent misses")
	})

	t.Run("AgentLookupFailsAsHuman", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 1, AgentMessagesPerMin: 5}, "", nil)
		spend(t, b, 1, admission.Messages, "c1", "broken")
		require.False(t, charge(b, admission.Messages, "c1", "broken").Allowed)
		require.Equal(t, int64(2), b.lookups.Load(), "a failure is not cached")
		require.Contains(t, b.log.String(), "agent lookup failed; counted as a human")
	})

	t.Run("EndedWindowsSwept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, admission.Quotas{HumanMessagesPerMin: 1}, "", nil)
		for range 100 {
			spend(t, b, 1, admission.Messages, "c1", eventtest.NewKey().PubKey)
		}
		require.Equal(t, 100, admission.LocalWindows(b.l))
		b.clock.Add(time.Minute)
		spend(t, b, 1, admission.Messages, "c1", human)
		require.Equal(t, 1, admission.LocalWindows(b.l), "the ended windows are gone")
	})
}
