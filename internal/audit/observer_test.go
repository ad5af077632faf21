package audit_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// clock is a settable time source for the sampling windows.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

type observerBundle struct {
	*testBundle
	obs        *audit.Observer
	clock      *clock
	suppressed *prometheus.CounterVec
	sendErrors prometheus.Counter
	stop       func()
}

func setupObserver(t *testing.T) *observerBundle {
	t.Helper()
	b := setup(t)
	ob := &observerBundle{testBundle: b, clock: &clock{now: time.Date(2026, 1, 1, 12, 0, 5, 0, time.UTC)},
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "s"}, []string{"action"}),
		sendErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "e"})}
	ob.obs = audit.NewObserver(audit.ObserverConfig{Pool: b.pool, NowFunc: ob.clock.Now,
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Metrics: &audit.Metrics{Suppressed: ob.suppressed, SendErrors: ob.sendErrors}})
	ob.obs.TestSignals.Init()
	require.NoError(t, ob.obs.Start(context.Background()))
	ob.stop = ob.obs.Stop
	t.Cleanup(ob.stop)
	return ob
}

// finish stops the observer (summaries of open windows, queue drained) and
// chains everything.
func (ob *observerBundle) finish(t *testing.T) {
	t.Helper()
	ob.stop()
	ob.flush(t)
}

type entry struct {
	Action string
	Actor  []byte
	Detail map[string]any
}

func entries(t *testing.T, ob *observerBundle, cid string) []entry {
	t.Helper()
	rs, err := ob.pool.Query(context.Background(), `SELECT action, actor_pubkey, detail FROM audit_log WHERE community_id = $1 ORDER BY seq`, cid)
	require.NoError(t, err)
	defer rs.Close()
	var out []entry
	for rs.Next() {
		var (
			e   entry
			raw []byte
		)
		require.NoError(t, rs.Scan(&e.Action, &e.Actor, &raw))
		require.NoError(t, json.Unmarshal(raw, &e.Detail))
		out = append(out, e)
	}
	require.NoError(t, rs.Err())
	return out
}

func TestObserver(t *testing.T) {
	t.Parallel()

	t.Run("AuthSuccessOncePerHour", func(t *testing.T) {
		t.Parallel()
		ob := setupObserver(t)
		cid := ob.community(t, "a.test")
		key := eventtest.NewKey()
		for i := range 5 {
			ob.clock.Set(ob.clock.Now().Add(time.Duration(i) * 5 * time.Minute))
			ob.obs.AuthSuccess(cid, key.PubKey, "nip42")
		}
		ob.finish(t)
		es := entries(t, ob, cid)
		require.Len(t, es, 1)
		require.Equal(t, "auth_success", es[0].Action)
		require.Equal(t, key.PubKey, hexOf(es[0].Actor))
		require.Equal(t, map[string]any{"method": "nip42"}, es[0].Detail)
		require.Equal(t, 4.0, testutil.ToFloat64(ob.suppressed.WithLabelValues("auth_success")))
	})

	t.Run("AuthFailureFlood", func(t *testing.T) {
		t.Parallel()
		ob := setupObserver(t)
		ca, cb := ob.community(t, "a.test"), ob.community(t, "b.test")
		start := ob.clock.Now()
		const attempts = 10000
		for i := range attempts {
			ob.clock.Set(start.Add(time.Duration(i) * 20 * time.Millisecond)) // 200 s: four windows
			reason := "invalid"
			if i%3 == 0 {
				reason = "expired"
			}
			ob.obs.AuthFailure(ca, "", "nip42", reason)
		}
		for range 3 {
			ob.obs.AuthFailure(cb, "", "nip98", "replay")
		}
		ob.finish(t)

		// The attempts of each 60 s window, from the clock above.
		var starts []int64
		attemptsIn := map[int64]int{}
		for i := range attempts {
			w := start.Add(time.Duration(i) * 20 * time.Millisecond).Truncate(time.Minute).Unix()
			if attemptsIn[w] == 0 {
				starts = append(starts, w)
			}
			attemptsIn[w]++
		}
		require.Len(t, starts, 4)

		// Entries are chained in the order the observer queued them: a
		// window's individual entries, then its summary when the window
		// ends. So the individual entries before a summary are that window's.
		type windowCount struct {
			start                  int64
			individual, suppressed int
		}
		var windows []windowCount
		pending, total := 0, 0
		for _, e := range entries(t, ob, ca) {
			require.Equal(t, "auth_failure", e.Action)
			require.Nil(t, e.Actor)
			if e.Detail["summary"] != true {
				require.Equal(t, "nip42", e.Detail["method"])
				pending++
				continue
			}
			require.EqualValues(t, 60, e.Detail["window_seconds"])
			n := int(e.Detail["suppressed"].(float64))
			byReason := e.Detail["by_reason"].(map[string]any)
			require.Equal(t, e.Detail["suppressed"], byReason["invalid"].(float64)+byReason["expired"].(float64))
			windows = append(windows, windowCount{start: int64(e.Detail["window_start"].(float64)), individual: pending, suppressed: n})
			total += n
			pending = 0
		}
		require.Zero(t, pending, "every individual entry is followed by its window's summary")
		require.Len(t, windows, len(starts), "one summary per window with overflow")
		individual := 0
		for k, w := range windows {
			require.Equal(t, starts[k], w.start, "window %d", k)
			require.Equal(t, 10, w.individual, "window %d: the first 10 attempts, at most 10", k)
			require.Equal(t, attemptsIn[w.start], w.individual+w.suppressed, "window %d: individual + suppressed = its attempts", k)
			individual += w.individual
		}
		require.Equal(t, attempts, individual+total)
		require.Equal(t, float64(total), testutil.ToFloat64(ob.suppressed.WithLabelValues("auth_failure")))
		eb := entries(t, ob, cb)
		require.Len(t, eb, 3)
		for _, e := range eb {
			require.Equal(t, map[string]any{"method": "nip98", "reason": "replay"}, e.Detail)
		}
	})

	t.Run("RateLimitOncePerPrincipal", func(t *testing.T) {
		t.Parallel()
		ob := setupObserver(t)
		cid := ob.community(t, "a.test")
		key := eventtest.NewKey()
		for range 100 {
			ob.obs.RateLimited(cid, key.PubKey, "handler_pool", "ws")
		}
		ob.finish(t)
		es := entries(t, ob, cid)
		require.Len(t, es, 2)
		require.Equal(t, key.PubKey, hexOf(es[0].Actor))
		require.Equal(t, map[string]any{"limit": "handler_pool", "transport": "ws"}, es[0].Detail)
		require.Nil(t, es[1].Actor)
		require.Equal(t, true, es[1].Detail["summary"])
		require.EqualValues(t, 99, es[1].Detail["suppressed"])
		require.Equal(t, map[string]any{"handler_pool": 99.0}, es[1].Detail["by_limit"])
	})

	t.Run("AuthSuccessCapPerWindow", func(t *testing.T) {
		t.Parallel()
		ob := setupObserver(t)
		cid := ob.community(t, "a.test")
		for range 70 {
			ob.obs.AuthSuccess(cid, eventtest.NewKey().PubKey, "nip98")
		}
		ob.finish(t)
		es := entries(t, ob, cid)
		require.Len(t, es, 61)
		last := es[60]
		require.Equal(t, true, last.Detail["summary"])
		require.EqualValues(t, 10, last.Detail["suppressed"])
		require.NotContains(t, last.Detail, "by_reason")
	})

	t.Run("WriterWritesWhileRunning", func(t *testing.T) {
		t.Parallel()
		ob := setupObserver(t)
		require.NoError(t, ob.obs.Start(context.Background()), "a second Start is a no-op")
		cid := ob.community(t, "a.test")
		ob.obs.AuthFailure(cid, "", "nip42", "invalid")
		require.Equal(t, 1, ob.obs.TestSignals.Written.WaitOrTimeout(t))
		n, err := audit.PendingCount(context.Background(), ob.pool, cid)
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the intent reached the outbox before the writer stopped")
		ob.stop()
		ob.obs.TestSignals.Written.RequireEmpty(t)
	})

	t.Run("ClosedAfterShutdown", func(t *testing.T) {
		t.Parallel()
		ob := setupObserver(t)
		cid := ob.community(t, "a.test")
		ob.stop()
		ob.obs.AuthFailure(cid, "", "nip42", "invalid")
		require.Equal(t, 1.0, testutil.ToFloat64(ob.sendErrors))
	})
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}
