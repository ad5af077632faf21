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
// answers an #e, #p or authors filter that runs out of candidates, when
// no event older than its horizon carries any of the filter's values
// (docs/ARCHITECTURE.md "Hot window"). It knows those values from the
// warm's read below the horizon, from the events its trim pushes below
// it and from events committed below it later; a value among them sends
// the filter to PostgreSQL, which answers the older events.
func TestOlderE(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_EVENTS": "20", "TEST_HEARTBEAT": "1h"})
	a := author(t, r)
	// The authors whose only event is the trimmed one, the late one, and
	// two in the window.
	trimmer, late, fresh := authorOn(t, r, ""), authorOn(t, r, ""), authorOn(t, r, "")
	value := func() string { return hex.EncodeToString(event.GenerateKey()) } // any 64-hex value
	oldT, newT, trimT, lateT := value(), value(), value(), value()
	oldP, newP, trimP, lateP := value(), value(), value(), value()
	base := time.Now().Unix() - 200
	publish := func(c client, at int64, e, p string) string {
		ev := c.key.Signed(t, 1, eventtest.At(at), eventtest.Content("e"), eventtest.Tag("e", e), eventtest.Tag("p", p))
		c.ws.MustPublish(ev)
		return ev.ID
	}
	oldID := publish(a, base, oldT, oldP) // below the horizon once warm
	trimID := ""
	for i := range 25 { // base+10 … base+34: the window keeps base+15 on
		switch i {
		case 5: // at base+15, the oldest second held
			trimID = publish(trimmer, base+15, trimT, trimP)
		case 20, 22:
			publish(fresh, base+10+int64(i), newT, newP)
		default:
			publish(a, base+10+int64(i), value(), value())
		}
	}
	warm(t, r, a)
	beyond := func() float64 { return r.Metric(t, `buzz_hot_window_reads_total{result="beyond_horizon"}`) }
	ask := func(k, v string) []string {
		f := map[string]any{"kinds": []int{1}, "limit": 50} // more than any answer here
		if k == "authors" {
			f["authors"] = []string{v}
		} else {
			f[k] = []string{v}
		}
		return a.req(t, f)
	}

	h, b := hits(t, r), beyond()
	for _, q := range [][2]string{{"#e", newT}, {"#p", newP}, {"authors", fresh.key.PubKey}} {
		require.Len(t, ask(q[0], q[1]), 2, q[0])
		h++
		require.Equal(t, [2]float64{h, b}, [2]float64{hits(t, r), beyond()},
			"%s: two matches, fewer than the limit, and none older: the window's answer", q[0])
	}
	for _, q := range [][2]string{{"#e", oldT}, {"#p", oldP}, {"authors", a.key.PubKey}} {
		got := ask(q[0], q[1])
		require.Contains(t, got, oldID, q[0])
		b++
		require.Equal(t, b, beyond(), "%s: a value below the horizon (the warm's read) goes to PostgreSQL", q[0])
	}

	publish(a, base+35, value(), value()) // one over: the second base+15 leaves
	for _, q := range [][2]string{{"#e", trimT}, {"#p", trimP}, {"authors", trimmer.key.PubKey}} {
		require.Equal(t, []string{trimID}, ask(q[0], q[1]), q[0])
		b++
		require.Equal(t, b, beyond(), "%s: a value the trim pushed below the horizon goes to PostgreSQL", q[0])
	}

	lateID := publish(late, base+1, lateT, lateP) // committed below the horizon
	for _, q := range [][2]string{{"#e", lateT}, {"#p", lateP}, {"authors", late.key.PubKey}} {
		require.Equal(t, []string{lateID}, ask(q[0], q[1]), q[0])
		b++
		require.Equal(t, b, beyond(), "%s: a value committed below the horizon goes to PostgreSQL", q[0])
	}

	// COUNT takes the same proof.
	a.ws.Send("COUNT", "c1", map[string]any{"kinds": []int{1}, "#e": []string{newT}})
	msg := a.ws.Next()
	for msg[0] != "COUNT" { // the CLOSED answers of req's CLOSEs
		msg = a.ws.Next()
	}
	require.Equal(t, []any{"COUNT", "c1", map[string]any{"count": 2.0}}, msg)
	require.Equal(t, h+1, hits(t, r))
}

// TestOlderECap: a window keeps at most 4 × BUZZ_HOT_WINDOW_EVENTS values
// below its horizon (here an author and its e values). At the cap it
// still proves; one over, it drops them and an #e filter short of its
// limit reads PostgreSQL.
func TestOlderECap(t *testing.T) {
	t.Parallel()
	for name, values := range map[string]int{"AtCap": 80, "OneOver": 81} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := relaytest.Start(t, map[string]string{"BUZZ_HOT_WINDOW_EVENTS": "20", "TEST_HEARTBEAT": "1h"})
			a := author(t, r)
			base := time.Now().Unix() - 100
			opts := []eventtest.Option{eventtest.At(base), eventtest.Content("many")}
			for range values - 1 { // and its author
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
