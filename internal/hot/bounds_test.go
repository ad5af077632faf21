package hot_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// The window's bounds at their cap and one over (docs/OPERATIONS.md "Hot
// window"): BUZZ_HOT_WINDOW_EVENTS events, BUZZ_HOT_WINDOW_MIB of
// estimated memory, BUZZ_HOT_WINDOW_COMMUNITIES communities. Past a
// bound the oldest second leaves and answers that reach past it go to
// PostgreSQL; answers stay whole either way.
func TestBounds(t *testing.T) {
	t.Parallel()
	t.Run("Events", func(t *testing.T) {
		t.Parallel()
		r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_EVENTS": "20", "TEST_HEARTBEAT": "1h"})
		a := author(t, r)
		base := time.Now().Unix() - 100
		for i := range 20 {
			a.ws.MustPublish(a.key.Signed(t, 1, eventtest.At(base+int64(i)), eventtest.Content("e")))
		}
		warm(t, r, a)
		require.Equal(t, 20.0, r.Metric(t, "buzz_hot_window_events"), "at the cap every event is held")
		got := a.req(t, map[string]any{"kinds": []int{1}, "limit": 100})
		require.Len(t, got, 20)
		require.Equal(t, 1.0, hits(t, r), "a window that holds the whole community answers any limit")

		a.ws.MustPublish(a.key.Signed(t, 1, eventtest.At(base+20), eventtest.Content("e")))
		require.Equal(t, 20.0, r.Metric(t, "buzz_hot_window_events"), "one over: the oldest second left")
		got = a.req(t, map[string]any{"kinds": []int{1}, "limit": 100})
		require.Len(t, got, 21, "PostgreSQL answers what reaches past the horizon")
		require.Equal(t, 1.0, r.Metric(t, `buzz_hot_window_reads_total{result="beyond_horizon"}`))
		got = a.req(t, map[string]any{"kinds": []int{1}, "limit": 20})
		require.Len(t, got, 20)
		require.Equal(t, 2.0, hits(t, r), "the newest 20 are the window's")
	})
	t.Run("Bytes", func(t *testing.T) {
		t.Parallel()
		r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_MIB": "1", "TEST_HEARTBEAT": "1h"})
		a := author(t, r)
		base := time.Now().Unix() - 100
		big := strings.Repeat("x", 20000)
		// Each is charged 2 × its JSON (the 20,000 bytes of content and
		// about 340 more) + 320, about 41,000 bytes: 25 fit in 1 MiB, 26 do not.
		cost := 0
		for i := range 25 {
			ev := a.key.Signed(t, 1, eventtest.At(base+int64(i)), eventtest.Content(big))
			a.ws.MustPublish(ev)
			cost += 2*len(ev.AppendJSON(nil)) + 320
		}
		warm(t, r, a)
		require.Equal(t, 25.0, r.Metric(t, "buzz_hot_window_events"))
		require.Equal(t, float64(cost), r.Metric(t, "buzz_hot_window_bytes"))
		require.Less(t, cost+cost/25, 1<<20+cost/25, "25 fit")
		require.Greater(t, cost+cost/25, 1<<20, "26 do not")
		a.ws.MustPublish(a.key.Signed(t, 1, eventtest.At(base+25), eventtest.Content(big)))
		require.Equal(t, 25.0, r.Metric(t, "buzz_hot_window_events"), "one over: the oldest second left")
		require.LessOrEqual(t, r.Metric(t, "buzz_hot_window_bytes"), float64(1<<20))
		require.Len(t, a.req(t, map[string]any{"kinds": []int{1}, "limit": 1000}), 26)
	})
	t.Run("Communities", func(t *testing.T) {
		t.Parallel()
		r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_COMMUNITIES": "1", "TEST_HEARTBEAT": "1h"})
		a := author(t, r)
		a.ws.MustPublish(a.key.Signed(t, 1, eventtest.Content("here")))
		warm(t, r, a)
		other := r.Community(t, "other")
		b := authorOn(t, r, other)
		b.ws.MustPublish(b.key.Signed(t, 1, eventtest.Content("there")))
		b.req(t, map[string]any{"kinds": []int{1}, "limit": 5})
		require.Eventually(t, func() bool {
			return r.Metric(t, `buzz_hot_window_warms_total{outcome="ok"}`) == 2
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, 1.0, r.Metric(t, `buzz_hot_window_resets_total{reason="communities"}`),
			"one community over the cap: the one read least recently went cold")
		require.Equal(t, 1.0, r.Metric(t, "buzz_hot_window_events"))

		// Back to the first community: its warm would reset the second
		// window too, less than 30 s after the last such reset. It is
		// deferred, and PostgreSQL answers.
		got := a.req(t, map[string]any{"kinds": []int{1}, "limit": 5})
		require.Len(t, got, 1)
		require.Equal(t, 1.0, r.Metric(t, `buzz_hot_window_warms_total{outcome="deferred"}`),
			"a warm that evicts again within 30 s waits")
		require.Equal(t, 2.0, r.Metric(t, `buzz_hot_window_warms_total{outcome="ok"}`))
		require.Equal(t, 1.0, r.Metric(t, `buzz_hot_window_resets_total{reason="communities"}`))
		before := hits(t, r)
		require.Len(t, b.req(t, map[string]any{"kinds": []int{1}, "limit": 5}), 1)
		require.Equal(t, before+1, hits(t, r), "the second window still answers")
	})
}

type client struct {
	key eventtest.Key
	ws  *relaytest.WS
	n   *int
}

func author(t *testing.T, r *relaytest.Relay) client { return authorOn(t, r, "") }

func authorOn(t *testing.T, r *relaytest.Relay, host string) client {
	k := eventtest.NewKey()
	ws := r.Dial(t, host)
	ws.Auth(k)
	return client{key: k, ws: ws, n: new(int)}
}

// req is a REQ's events, under a subscription id of its own (a CLOSE is
// answered with a CLOSED of the id it names).
func (c client) req(t *testing.T, f map[string]any) []string {
	*c.n++
	sub := "q" + strconv.Itoa(*c.n)
	evs, closed, eose := c.ws.Req(sub, f)
	require.True(t, eose, closed)
	c.ws.Send("CLOSE", sub)
	ids := make([]string, len(evs))
	for i := range evs {
		ids[i] = evs[i].ID
	}
	return ids
}

// warm makes the first REQ of c's community, which starts the warm, and
// waits for it to end.
func warm(t *testing.T, r *relaytest.Relay, c client) {
	// A REQ starts a warm only once the window is on, which waits for its
	// LISTEN connection after the relay is ready.
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_hot_window_on") == 1 },
		10*time.Second, 10*time.Millisecond, "the window is on")
	before := r.Metric(t, `buzz_hot_window_warms_total{outcome="ok"}`)
	c.req(t, map[string]any{"kinds": []int{1}, "limit": 1})
	require.Eventually(t, func() bool {
		return r.Metric(t, `buzz_hot_window_warms_total{outcome="ok"}`) > before
	}, 10*time.Second, 10*time.Millisecond)
}

func hits(t *testing.T, r *relaytest.Relay) float64 {
	return r.Metric(t, `buzz_hot_window_reads_total{result="hit"}`)
}
