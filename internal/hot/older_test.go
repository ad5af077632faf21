package hot_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// TestOlderE: a window that does not hold its whole community still
// answers an #e filter that runs out of candidates, when no event older
// than its horizon carries any of the filter's e values
// (docs/ARCHITECTURE.md "Hot window"). It knows those values from the
// warm's read below the horizon, from the events its trim pushes below
// it and from events committed below it later; a value among them sends
// the filter to PostgreSQL, which answers the older events.
func TestOlderE(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_EVENTS": "20", "TEST_HEARTBEAT": "1h"})
	a := author(t, r)
	target := func() string { return hex.EncodeToString(event.GenerateKey()) } // any 64-hex value
	oldT, newT, trimT, lateT := target(), target(), target(), target()
	base := time.Now().Unix() - 200
	publish := func(at int64, e string) string {
		ev := a.key.Signed(t, 1, eventtest.At(at), eventtest.Content("e"), eventtest.Tag("e", e))
		a.ws.MustPublish(ev)
		return ev.ID
	}
	oldID := publish(base, oldT) // below the horizon once warm
	for i := range 25 {          // base+10 … base+34: the window keeps base+15 on
		e := target()
		switch i {
		case 5:
			e = trimT // at base+15, the oldest second held
		case 20, 22:
			e = newT
		}
		publish(base+10+int64(i), e)
	}
	warm(t, r, a)
	beyond := func() float64 { return r.Metric(t, `buzz_hot_window_reads_total{result="beyond_horizon"}`) }
	ask := func(e string) []string {
		return a.req(t, map[string]any{"kinds": []int{1}, "#e": []string{e}, "limit": 10})
	}

	h, b := hits(t, r), beyond()
	require.Len(t, ask(newT), 2)
	require.Equal(t, [2]float64{h + 1, b}, [2]float64{hits(t, r), beyond()},
		"two matches, fewer than the limit, and none older: the window's answer")

	require.Equal(t, []string{oldID}, ask(oldT))
	require.Equal(t, b+1, beyond(), "an e value below the horizon (the warm's read) goes to PostgreSQL")

	publish(base+35, target()) // one over: the second base+15 leaves
	require.Len(t, ask(trimT), 1)
	require.Equal(t, b+2, beyond(), "an e value the trim pushed below the horizon goes to PostgreSQL")

	lateID := publish(base+1, lateT) // committed below the horizon
	require.Equal(t, []string{lateID}, ask(lateT))
	require.Equal(t, b+3, beyond(), "an e value committed below the horizon goes to PostgreSQL")

	// COUNT takes the same proof.
	a.ws.Send("COUNT", "c1", map[string]any{"kinds": []int{1}, "#e": []string{newT}})
	msg := a.ws.Next()
	for msg[0] != "COUNT" { // the CLOSED answers of req's CLOSEs
		msg = a.ws.Next()
	}
	require.Equal(t, []any{"COUNT", "c1", map[string]any{"count": 2.0}}, msg)
	require.Equal(t, h+2, hits(t, r))
}

// TestOlderECap: a window keeps at most 4 × BUZZ_HOT_WINDOW_EVENTS e
// values below its horizon. At the cap it still proves; one over, it
// drops the set and an #e filter short of its limit reads PostgreSQL.
func TestOlderECap(t *testing.T) {
	t.Parallel()
	for name, values := range map[string]int{"AtCap": 80, "OneOver": 81} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_EVENTS": "20", "TEST_HEARTBEAT": "1h"})
			a := author(t, r)
			base := time.Now().Unix() - 100
			opts := []eventtest.Option{eventtest.At(base), eventtest.Content("many")}
			for range values {
				opts = append(opts, eventtest.Tag("e", hex.EncodeToString(event.GenerateKey())))
			}
			a.ws.MustPublish(a.key.Signed(t, 1, opts...)) // below the horizon once warm
			for i := range 20 {
				a.ws.MustPublish(a.key.Signed(t, 1, eventtest.At(base+1+int64(i)), eventtest.Content("e")))
			}
			warm(t, r, a)
			h := hits(t, r)
			require.Empty(t, a.req(t, map[string]any{"kinds": []int{1}, "#e": []string{hex.EncodeToString(event.GenerateKey())}, "limit": 10}))
			if values <= 80 {
				require.Equal(t, h+1, hits(t, r), "%d values: the window proves", values)
			} else {
				require.Equal(t, h, hits(t, r), "%d values: the window no longer proves", values)
				require.Equal(t, 1.0, r.Metric(t, `buzz_hot_window_reads_total{result="beyond_horizon"}`))
			}
		})
	}
}
