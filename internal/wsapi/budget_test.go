package wsapi

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// TestIndexKeyCount holds the counted keys (distinctPairs) to the keys
// keysOf builds, on generated requests that share kinds, #p values and
// channels across filters, global and channel subscriptions alike.
func TestIndexKeyCount(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(26, 2))
	pick := func(n int, of func(i int) string) []string {
		out := make([]string, r.IntN(n))
		for i := range out {
			out[i] = of(r.IntN(6))
		}
		return out
	}
	chans := map[string]struct{}{"c0": {}, "c1": {}, "c2": {}}
	for range 3000 {
		filters := make([]event.Filter, r.IntN(10)+1)
		for i := range filters {
			f := &filters[i]
			if r.IntN(4) > 0 {
				f.Kinds = make([]int, r.IntN(6))
				for j := range f.Kinds {
					f.Kinds[j] = r.IntN(5)
				}
			}
			f.Tags = map[string][]string{
				"p": pick(6, func(i int) string { return "p" + strconv.Itoa(i) }),
				"h": pick(5, func(i int) string { return "c" + strconv.Itoa(i) }),
			}
		}
		for _, scope := range []map[string]struct{}{nil, chans} {
			want := len(keysOf("x", filters, scope, 0))
			require.Equal(t, want, indexKeyCount(filters, scope))
		}
	}
	many := make([]event.Filter, maxMaskedProducts+2) // the set fallback
	for i := range many {
		many[i] = event.Filter{Kinds: []int{i % 3, 7}, Tags: map[string][]string{"p": {"a", strconv.Itoa(i % 5)}}}
	}
	require.Equal(t, len(keysOf("x", many, nil, 0)), indexKeyCount(many, nil))
}

// capReq returns a REQ filter of kinds 1…kinds and ps #p values.
func capReq(kinds, ps int) map[string]any {
	ks := make([]int, kinds)
	for i := range ks {
		ks[i] = i + 1
	}
	vs := make([]string, ps)
	for i := range vs {
		vs[i] = "p" + strconv.Itoa(i)
	}
	return map[string]any{"kinds": ks, "#p": vs, "limit": 1}
}

// TestSubscriptionCaps checks the subscription and connection caps over a
// real socket, at each cap and one over: the refused REQ gets its exact
// CLOSED text, the connection stays usable, a closed or replaced
// subscription gives its share back.
func TestSubscriptionCaps(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("FilterArraysOnReqAndCount", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		tags := func(n int) map[string]any {
			vs := make([]string, n)
			for i := range vs {
				vs[i] = "v" + strconv.Itoa(i)
			}
			return map[string]any{"kinds": []int{1}, "#t": vs}
		}
		cases := []struct {
			at, over map[string]any
			msg      string
		}{
			{capReq(64, 1), capReq(65, 1), `invalid: filter "kinds" has 65 values (maximum 64)`},
			{tags(1000), tags(1001), `invalid: filter "#t" has 1001 values (maximum 1000)`},
		}
		for i, tc := range cases {
			id := "r" + strconv.Itoa(i)
			c.send(t, "REQ", id, tc.at)
			c.expect(t, "EOSE", id)
			c.send(t, "REQ", id+"x", tc.over)
			c.expect(t, "CLOSED", id+"x", tc.msg)
			c.send(t, "COUNT", "n"+id, tc.at)
			c.expect(t, "COUNT", "n"+id)
			c.send(t, "COUNT", "n"+id+"x", tc.over)
			c.expect(t, "CLOSED", "n"+id+"x", tc.msg)
		}
	})

	t.Run("SubscriptionIndexKeys", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.send(t, "REQ", "at", capReq(64, 64))
		c.expect(t, "EOSE", "at")
		c.send(t, "REQ", "twice", capReq(64, 64), capReq(64, 64))
		c.expect(t, "EOSE", "twice") // keys are counted once however many filters name them
		c.send(t, "REQ", "over", capReq(64, 65))
		c.expect(t, "CLOSED", "over", "invalid: subscription needs 4160 index keys (maximum 4096)")
		c.send(t, "REQ", "over2", capReq(64, 64), map[string]any{"kinds": []int{65}})
		c.expect(t, "CLOSED", "over2", "invalid: subscription needs 4097 index keys (maximum 4096)")
		require.InDelta(t, 2, testutil.ToFloat64(b.metrics.FilterCapRefusals.WithLabelValues("subscription_index_keys")), 0)
		ev := c.key.Signed(t, 1, eventtest.Tag("p", "p63"))
		c.send(t, "EVENT", ev)
		require.ElementsMatch(t, []string{"at", "twice"}, c.eventSubs(t, 2))
		c.expect(t, "OK", ev.ID, true)
	})

	t.Run("ConnectionIndexKeys", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		for i := range 4 {
			c.send(t, "REQ", "s"+strconv.Itoa(i), capReq(64, 64))
			c.expect(t, "EOSE", "s"+strconv.Itoa(i))
		}
		require.Equal(t, 16384, c.srvConn(t, b).held().indexKeys)
		c.send(t, "REQ", "more", map[string]any{"kinds": []int{1}})
		c.expect(t, "CLOSED", "more", "blocked: connection would hold 16385 index keys (maximum 16384); close a subscription first")
		require.InDelta(t, 1, testutil.ToFloat64(b.metrics.FilterCapRefusals.WithLabelValues("connection_index_keys")), 0)
		// A replaced subscription gives its share back first.
		c.send(t, "REQ", "s0", capReq(64, 64))
		c.expect(t, "EOSE", "s0")
		c.send(t, "CLOSE", "s3")
		c.expect(t, "CLOSED", "s3", "")
		c.send(t, "REQ", "more", map[string]any{"kinds": []int{1}})
		c.expect(t, "EOSE", "more")
		require.Equal(t, 3*4096+1, c.srvConn(t, b).held().indexKeys)
	})

	t.Run("ConnectionFilterBytes", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.Filters.ConnMaxFilterBytes = 1024 })
		c := b.dial(t)
		c.auth(t)
		small := map[string]any{"kinds": []int{1}} // {"kinds":[1]}: 13 bytes
		pad := 1024 - 13 - len(`{"kinds":[1],"#t":[""]}`)
		big := map[string]any{"kinds": []int{1}, "#t": []string{strings.Repeat("x", pad)}} // 1011 bytes
		c.send(t, "REQ", "big", big)
		c.expect(t, "EOSE", "big")
		c.send(t, "REQ", "small", small)
		c.expect(t, "EOSE", "small")
		require.Equal(t, 1024, c.srvConn(t, b).held().filterBytes)
		c.send(t, "REQ", "third", small)
		c.expect(t, "CLOSED", "third", "blocked: connection would hold 1037 filter bytes (maximum 1024); close a subscription first")
		require.InDelta(t, 1, testutil.ToFloat64(b.metrics.FilterCapRefusals.WithLabelValues("connection_filter_bytes")), 0)
		c.send(t, "CLOSE", "small")
		c.expect(t, "CLOSED", "small", "")
		c.send(t, "REQ", "third", small)
		c.expect(t, "EOSE", "third")
		ev := c.key.Signed(t, 1, eventtest.Tag("t", strings.Repeat("x", pad)))
		c.send(t, "EVENT", ev)
		require.ElementsMatch(t, []string{"big", "third"}, c.eventSubs(t, 2))
		c.expect(t, "OK", ev.ID, true)
	})

	t.Run("ChannelEvictionGivesKeysBack", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.send(t, "REQ", "ch", map[string]any{"kinds": []int{9, 7}, "#h": []string{b.channelC, b.channelD}})
		c.expect(t, "EOSE", "ch")
		require.Equal(t, 4, c.srvConn(t, b).held().indexKeys)
		b.srv.Evict(b.communityA, b.channelC, "", nil)
		require.Equal(t, 2, c.srvConn(t, b).held().indexKeys)
		b.srv.Evict(b.communityA, b.channelD, "", nil)
		c.expect(t, "CLOSED", "ch", "restricted: channel access revoked")
		require.Equal(t, held{}, c.srvConn(t, b).held())
	})
}

// eventSubs reads n EVENT frames and returns their subscription ids, in
// the order they came (live fan-out has none).
func (c *client) eventSubs(t *testing.T, n int) []string {
	t.Helper()
	subs := make([]string, n)
	for i := range subs {
		subs[i] = str(t, c.expect(t, "EVENT")[1])
	}
	return subs
}

// held is what a connection's subscriptions hold against its caps.
type held struct{ indexKeys, filterBytes int }

func (c *conn) held() held {
	c.mu.Lock()
	defer c.mu.Unlock()
	return held{c.indexKeys, c.filterBytes}
}

// srvConn returns the server side of the client's connection: the one
// connection of the test's server authenticated as c.key.
func (c *client) srvConn(t *testing.T, b *testBundle) *conn {
	t.Helper()
	for _, sc := range b.srv.snapshot() {
		if pk, ok := sc.identity(); ok && pk == c.key.PubKey {
			return sc
		}
	}
	t.Fatalf("no connection of %s", c.key.PubKey)
	return nil
}
