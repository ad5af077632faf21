package tenant_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// clock is a settable NowFunc.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type testBundle struct {
	st      *store.Store
	q       pg.Querier
	res     *tenant.Resolver
	clock   *clock
	lookups atomic.Int64
}

// setup resolves through the store, as the composition root does,
// counting the lookups that reach the database.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	b := &testBundle{st: store.New(pool), q: pool, clock: &clock{now: time.Unix(1_800_000_000, 0)}}
	b.res = tenant.NewResolver(tenant.Config{NowFunc: b.clock.Now, LookupFunc: func(ctx context.Context, h string) (string, error) {
		b.lookups.Add(1)
		return b.st.CommunityIDByHost(ctx, h)
	}})
	return b
}

func TestResolve(t *testing.T) {
	t.Parallel()

	t.Run("NormalisedHost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := fixture.Community(t, b.q, "team.test")
		got, err := b.res.Resolve(context.Background(), " TEAM.test.:443 ")
		require.NoError(t, err)
		require.Equal(t, c.ID, got.CommunityID)
		require.Equal(t, "team.test", got.Host)
	})
	t.Run("AliasStaysAlias", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := fixture.Community(t, b.q, "main.test")
		fixture.Alias(t, b.q, c.ID, "other.test:8443")
		got, err := b.res.Resolve(context.Background(), "other.test:8443")
		require.NoError(t, err)
		require.Equal(t, c.ID, got.CommunityID)
		require.Equal(t, "other.test:8443", got.Host)
	})
	t.Run("MalformedHostNeverLooksUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, h := range []string{"", "a b", "x:0", "[::1"} {
			_, err := b.res.Resolve(context.Background(), h)
			require.ErrorIs(t, err, tenant.ErrUnknownHost, h)
		}
		require.Zero(t, b.lookups.Load())
	})
	t.Run("HitsCachedSixtySeconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fixture.Community(t, b.q, "hit.test")
		for range 3 {
			_, err := b.res.Resolve(context.Background(), "hit.test")
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, b.lookups.Load())
		b.clock.Add(tenant.DefaultHitTTL - time.Second)
		_, err := b.res.Resolve(context.Background(), "hit.test")
		require.NoError(t, err)
		require.EqualValues(t, 1, b.lookups.Load())
		b.clock.Add(time.Second)
		_, err = b.res.Resolve(context.Background(), "hit.test")
		require.NoError(t, err)
		require.EqualValues(t, 2, b.lookups.Load())
	})
	// docs/PROTOCOL.md §2.2: a host that has no community yet is remembered for
	// 5 s, so a community added meanwhile is served within 5 s.
	t.Run("MissesCachedFiveSeconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.res.Resolve(context.Background(), "late.test")
		require.ErrorIs(t, err, tenant.ErrUnknownHost)
		c := fixture.Community(t, b.q, "late.test")
		b.clock.Add(tenant.DefaultMissTTL - time.Millisecond)
		_, err = b.res.Resolve(context.Background(), "late.test")
		require.ErrorIs(t, err, tenant.ErrUnknownHost, "still the cached miss")
		require.EqualValues(t, 1, b.lookups.Load())
		b.clock.Add(time.Millisecond)
		got, err := b.res.Resolve(context.Background(), "late.test")
		require.NoError(t, err)
		require.Equal(t, c.ID, got.CommunityID)
	})
	t.Run("LookupErrorsAreNotCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := fixture.Community(t, b.q, "flaky.test")
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the database lookup fails
		_, err := b.res.Resolve(ctx, "flaky.test")
		require.ErrorIs(t, err, tenant.ErrUnknownHost)
		got, err := b.res.Resolve(context.Background(), "flaky.test")
		require.NoError(t, err, "the next request tries again")
		require.Equal(t, c.ID, got.CommunityID)
		require.EqualValues(t, 2, b.lookups.Load())
	})
}

func TestNewResolverNeedsLookup(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { tenant.NewResolver(tenant.Config{}) })
}
