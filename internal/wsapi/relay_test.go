package wsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
)

func TestUpgrade(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("UnmappedHost", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		status, body := rawUpgrade(t, b.ts.URL, "unknown.test")
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, "relay: no community is configured for this host", body)
	})

	t.Run("ConnectionLimit", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.MaxConnections = 2 })
		b.dial(t)
		b.dial(t)
		status, body := rawUpgrade(t, b.ts.URL, b.hostA)
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Equal(t, "relay: connection limit reached", body)
	})

	t.Run("ShutdownClosesWith1012", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		b.srv.Shutdown(ctx)
		err := c.closed(t)
		require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err))
		require.Contains(t, err.Error(), "relay restarting")
		status, body := rawUpgrade(t, b.ts.URL, b.hostA)
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Equal(t, "relay restarting", body)
		require.Zero(t, b.srv.Connections())
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("ChallengeFirstAndUnique", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c1, c2 := b.dial(t), b.dial(t)
		hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
		require.Regexp(t, hex64, c1.challenge)
		require.Regexp(t, hex64, c2.challenge)
		require.NotEqual(t, c1.challenge, c2.challenge)
		eventually(t, func() bool { return testutil.ToFloat64(b.metrics.WSConnectionsActive) == 2 }, "gauge counts both")
	})

	t.Run("VerificationFailures", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		cases := map[string]func(c *client) event.Event{
			"WrongRelay": func(c *client) event.Event { return c.authEvent(t, "ws://"+b.hostB) },
			"Old": func(c *client) event.Event {
				return c.authEvent(t, "ws://"+b.hostA, eventtest.At(time.Now().Unix()-61))
			},
			"OtherChallenge": func(c *client) event.Event {
				return c.key.Signed(t, event.KindAuth, eventtest.Tag("relay", "ws://"+b.hostA), eventtest.Tag("challenge", strings.Repeat("0", 64)))
			},
			"ChallengePlusX": func(c *client) event.Event {
				return c.key.Signed(t, event.KindAuth, eventtest.Tag("relay", "ws://"+b.hostA), eventtest.Tag("challenge", c.challenge+"x"))
			},
			"Kind1": func(c *client) event.Event {
				return c.key.Signed(t, 1, eventtest.Tag("relay", "ws://"+b.hostA), eventtest.Tag("challenge", c.challenge))
			},
		}
		for name, mk := range cases {
			c := b.dial(t)
			ev := mk(c)
			c.send(t, "AUTH", ev)
			c.expect(t, "OK", ev.ID, false, "auth-required: verification failed")
			good := c.authEvent(t, "ws://"+b.hostA)
			c.send(t, "AUTH", good)
			c.expect(t, "OK", good.ID, false, "auth-required: authentication already failed")
			_ = name
		}
	})

	t.Run("SecondAuth", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		ev := c.authEvent(t, "ws://"+b.hostA)
		c.send(t, "AUTH", ev)
		c.expect(t, "OK", ev.ID, false, "auth-required: already authenticated")
	})

	t.Run("OtherTenant", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dialWith(t, dialOpts{host: b.hostB})
		ev := c.authEvent(t, "ws://"+b.hostA)
		c.send(t, "AUTH", ev)
		c.expect(t, "OK", ev.ID, false, "auth-required: verification failed")
		c2 := b.dialWith(t, dialOpts{host: b.hostB})
		ev = c2.authEvent(t, "ws://"+b.hostB)
		c2.send(t, "AUTH", ev)
		c2.expect(t, "OK", ev.ID, true, "")
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.AuthTimeout = 100 * time.Millisecond })
		c := b.dial(t)
		err := c.closed(t)
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
		require.Contains(t, err.Error(), "auth timeout")
		// The counter is incremented once the close is queued, so it may
		// trail the close frame the client has already read.
		eventually(t, func() bool { return testutil.ToFloat64(b.metrics.WSAuthTimeouts) == 1 }, "one auth timeout counted")
		require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.WSAuthTimeouts))
	})

	t.Run("BeforeAuth", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.send(t, "REQ", "s1", map[string]any{"kinds": []int{1}})
		c.expect(t, "NOTICE", "auth-required: authenticate before subscribing")
		c.expect(t, "CLOSED", "s1", "auth-required: not authenticated")
		ev := c.key.Signed(t, 1)
		c.send(t, "EVENT", ev)
		c.expect(t, "OK", ev.ID, false, "auth-required: not authenticated")
		c.send(t, "COUNT", "c1", map[string]any{"kinds": []int{1}})
		c.expect(t, "CLOSED", "c1", "auth-required: not authenticated")
		c.send(t, "CLOSE", "s1")
		c.expect(t, "CLOSED", "s1", "")
	})

	t.Run("RelayMembershipGate", func(t *testing.T) {
		t.Parallel()
		// A database of its own: the test locks relay_members whole. The
		// relay asks a pool whose lookups give up on a lock after 200 ms.
		own := newTestDB(t)
		members := openStore(t, own.url, "lock_timeout=200ms")
		b := own.setupWith(t, options{config: func(c *Config) { c.Settings.RequireRelayMembership = true }, members: members})
		c := b.dial(t)
		ev := c.authEvent(t, "ws://"+b.hostA)
		c.send(t, "AUTH", ev)
		c.expect(t, "OK", ev.ID, false, "restricted: not a relay member")
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{1}})
		c.expect(t, "NOTICE", "auth-required: authenticate before subscribing")
		c.expect(t, "CLOSED", "s", "auth-required: not authenticated")

		d := b.dial(t)
		l := lock(t, own.pool, `LOCK TABLE relay_members IN ACCESS EXCLUSIVE MODE`)
		ev = d.authEvent(t, "ws://"+b.hostA)
		d.send(t, "AUTH", ev)
		d.expect(t, "OK", ev.ID, false, "error: internal server error") // the lookup failed
		l.release(t)
		b.setRelayMember(t, d.key.PubKey, true)
		d.auth(t) // still pending: a retry succeeds
	})

	t.Run("MembershipRevalidation", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) {
			c.Settings.RequireRelayMembership = true
			c.Settings.MembershipRecheck = 20 * time.Millisecond
		})
		m := NewMembershipService(b.srv)
		require.NoError(t, m.Start(context.Background()))
		t.Cleanup(m.Stop)

		c := b.dial(t)
		b.setRelayMember(t, c.key.PubKey, true)
		c.auth(t)
		b.setRelayMember(t, c.key.PubKey, false)
		c.expect(t, "NOTICE", "restricted: not a relay member")
		err := c.closed(t)
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
	})

	t.Run("DisconnectMember", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c, other := b.dial(t), b.dial(t)
		c.auth(t)
		other.auth(t)
		b.srv.DisconnectMember(b.communityA, c.key.PubKey)
		c.expect(t, "NOTICE", "restricted: not a relay member")
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(c.closed(t)))
		other.send(t, "CLOSE", "x")
		other.expect(t, "CLOSED", "x", "")
	})
}

func TestEvent(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("DoorChecks", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		authEv := c.authEvent(t, "ws://"+b.hostA)
		c.send(t, "EVENT", authEv)
		c.expect(t, "OK", authEv.ID, false, "invalid: AUTH events cannot be submitted via EVENT")
		foreign := eventtest.NewKey().Signed(t, 1)
		c.send(t, "EVENT", foreign)
		c.expect(t, "OK", foreign.ID, false, "invalid: event pubkey does not match authenticated identity")
		wrap := eventtest.NewKey().Signed(t, event.KindGiftWrap)
		c.publish(t, wrap)
	})

	t.Run("RateLimited", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, func(c *Config) { c.Settings.MaxConcurrentHandlers = 1 })
		c := b.dial(t)
		c.auth(t)
		slow := c.key.Signed(t, 1, eventtest.Content("slow"))
		l := b.blockEvent(t, slow)
		c.send(t, "EVENT", slow)
		l.waitBlocked(t, 1) // the one handler waits in PostgreSQL
		second := c.key.Signed(t, 1, eventtest.Content("second"))
		c.send(t, "EVENT", second)
		c.expect(t, "OK", second.ID, false, "rate-limited: too many concurrent requests")
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{1}})
		c.expect(t, "CLOSED", "s", "rate-limited: too many concurrent requests")
		c.send(t, "COUNT", "n", map[string]any{"kinds": []int{1}})
		c.expect(t, "CLOSED", "n", "rate-limited: too many concurrent requests")
		l.release(t)
		c.expect(t, "OK", slow.ID, true, "")
	})
}

func TestReq(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)

	t.Run("SubscriptionLimitAndReuse", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		for i := range MaxSubscriptions {
			c.send(t, "REQ", fmt.Sprintf("s%d", i), map[string]any{"kinds": []int{1}})
		}
		for range MaxSubscriptions {
			c.expect(t, "EOSE")
		}
		require.Equal(t, MaxSubscriptions, b.srv.Subscriptions())
		c.send(t, "REQ", "one-too-many", map[string]any{"kinds": []int{1}})
		c.expect(t, "CLOSED", "one-too-many", "error: too many subscriptions")
		// Reusing an id replaces the subscription without a CLOSED.
		c.send(t, "REQ", "s0", map[string]any{"kinds": []int{3}})
		c.expect(t, "EOSE", "s0")
		require.Equal(t, MaxSubscriptions, b.srv.Subscriptions())
		ev := c.key.Signed(t, 3)
		c.send(t, "EVENT", ev)
		f := c.expect(t, "EVENT", "s0")
		require.Equal(t, ev.ID, eventID(t, f))
		c.expect(t, "OK", ev.ID, true)
	})

	t.Run("TooManyChannels", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		hs := make([]string, 129)
		for i := range hs {
			hs[i] = fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		}
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{9}, "#h": hs})
		c.expect(t, "CLOSED", "s", "restricted: too many explicit channels")
	})

	t.Run("EmptyKinds", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.publish(t, c.key.Signed(t, 1, unique()))
		c.send(t, "REQ", "empty", map[string]any{"kinds": []int{}})
		c.expect(t, "EOSE", "empty")
		c.send(t, "REQ", "all", map[string]any{"kinds": []int{1}, "limit": 0})
		c.expect(t, "EOSE", "all")
		ev := c.key.Signed(t, 1, unique())
		c.send(t, "EVENT", ev)
		f := c.expect(t, "EVENT", "all") // the kinds:[] subscription never sees it
		require.Equal(t, ev.ID, eventID(t, f))
		c.expect(t, "OK", ev.ID, true)
	})

	t.Run("NotAChannelMember", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{9}, "#h": []string{b.private}})
		c.expect(t, "CLOSED", "s", "restricted: not a channel member")
	})

	t.Run("GateOnGlobalOnly", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.send(t, "REQ", "g", map[string]any{"kinds": []int{1059}})
		c.expect(t, "CLOSED", "g", "restricted: p-gated events require #p matching your pubkey")
		c.send(t, "REQ", "mixed", map[string]any{"kinds": []int{9}, "search": "x"}, map[string]any{"kinds": []int{9}})
		c.expect(t, "CLOSED", "mixed", "error: mixed search and non-search filters not supported")
		c.send(t, "REQ", "blank", map[string]any{"search": "  "})
		c.expect(t, "EOSE", "blank")
		require.Zero(t, b.srv.Subscriptions())
	})

	t.Run("HistoryErrorClosesWithoutEOSE", func(t *testing.T) {
		t.Parallel()
		b := db.setupWith(t, options{queryHook: func(context.Context, *event.Filter) error { return errors.New("boom") }})
		c := b.dial(t)
		c.auth(t)
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{1}})
		c.expect(t, "CLOSED", "s", "error: database error")
		require.Zero(t, b.srv.Subscriptions())
	})

	t.Run("HistoryDedupesAcrossFilters", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		old := c.key.Signed(t, 1, eventtest.At(time.Now().Unix()-10))
		newest := c.key.Signed(t, 1)
		c.publish(t, old)
		c.publish(t, newest)
		c.send(t, "REQ", "s", map[string]any{"ids": []string{old.ID}},
			map[string]any{"authors": []string{c.key.PubKey}, "kinds": []int{1}, "limit": 2})
		require.Equal(t, old.ID, eventID(t, c.expect(t, "EVENT", "s")))
		require.Equal(t, newest.ID, eventID(t, c.expect(t, "EVENT", "s")))
		c.expect(t, "EOSE", "s")
	})

	t.Run("CloseUnknownAndNothingAfter", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.send(t, "CLOSE", "nope")
		c.expect(t, "CLOSED", "nope", "")
		c.send(t, "REQ", "s", map[string]any{"kinds": []int{1}})
		c.expect(t, "EOSE", "s")
		c.send(t, "CLOSE", "s")
		c.expect(t, "CLOSED", "s", "")
		require.Zero(t, b.srv.Subscriptions())
		ev := c.key.Signed(t, 1)
		c.send(t, "EVENT", ev)
		c.expect(t, "OK", ev.ID, true) // no EVENT for s before it
	})

	t.Run("DeliveryBarrier", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		k := b.dial(t)
		k.auth(t)
		k.send(t, "REQ", "live", map[string]any{"#h": []string{b.channelC}, "kinds": []int{9}})
		k.expect(t, "EOSE", "live")
		x := k.key.Signed(t, 9, eventtest.Channel(b.channelC))
		k.send(t, "EVENT", x)
		require.Equal(t, x.ID, eventID(t, k.expect(t, "EVENT", "live")))
		k.expect(t, "OK", x.ID, true, "")
		k.send(t, "REQ", "again", map[string]any{"#h": []string{b.channelC}, "kinds": []int{9}})
		require.Equal(t, x.ID, eventID(t, k.expect(t, "EVENT", "again")))
		k.expect(t, "EOSE", "again")
	})

	t.Run("ChannelGlobalSplit", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		a := b.dial(t)
		a.auth(t)
		g := b.dial(t)
		g.auth(t)
		ch := b.dial(t)
		ch.auth(t)
		// Kind 9 lives in channels only and kind 1 is global only: each
		// subscription asks for both.
		g.send(t, "REQ", "g", map[string]any{"kinds": []int{1, 9}, "authors": []string{a.key.PubKey}})
		g.expect(t, "EOSE", "g")
		ch.send(t, "REQ", "c", map[string]any{"#h": []string{b.channelC}, "kinds": []int{1, 9}})
		ch.expect(t, "EOSE", "c")

		inChannel := a.key.Signed(t, 9, eventtest.Channel(b.channelC), eventtest.At(time.Now().Unix()-1))
		a.publish(t, inChannel)
		require.Equal(t, inChannel.ID, eventID(t, ch.expect(t, "EVENT", "c")))
		global := a.key.Signed(t, 1)
		a.publish(t, global)
		// FIFO: had g received the channel event, it would come first.
		require.Equal(t, global.ID, eventID(t, g.expect(t, "EVENT", "g")))

		g.send(t, "REQ", "fresh", map[string]any{"kinds": []int{1, 9}, "authors": []string{a.key.PubKey}})
		require.Equal(t, global.ID, eventID(t, g.expect(t, "EVENT", "fresh")))
		require.Equal(t, inChannel.ID, eventID(t, g.expect(t, "EVENT", "fresh")))
		g.expect(t, "EOSE", "fresh")

		next := a.key.Signed(t, 9, eventtest.Channel(b.channelC))
		a.publish(t, next)
		// FIFO again: the global event never reached the channel subscription.
		require.Equal(t, next.ID, eventID(t, ch.expect(t, "EVENT", "c")))
	})

	t.Run("Evict", func(t *testing.T) {
		t.Parallel()
		b := db.setup(t, nil)
		c := b.dial(t)
		c.auth(t)
		c.send(t, "REQ", "s", map[string]any{"#h": []string{b.channelC, b.channelD}, "kinds": []int{9}})
		c.expect(t, "EOSE", "s")
		b.srv.Evict(b.communityA, b.channelC, c.key.PubKey, nil)
		ev := c.key.Signed(t, 9, eventtest.Channel(b.channelC))
		c.publish(t, ev) // no longer delivered
		b.srv.Evict(b.communityA, b.channelD, "", func(string) bool { return true })
		c.expect(t, "CLOSED", "s", "restricted: channel access revoked")
		require.Zero(t, b.srv.Subscriptions())
	})
}

func TestCount(t *testing.T) {
	t.Parallel()
	b := newTestDB(t).setup(t, nil)
	c := b.dial(t)
	c.auth(t)
	for range 3 {
		c.publish(t, c.key.Signed(t, 1, unique()))
	}
	for range 4 {
		c.publish(t, c.key.Signed(t, 9, eventtest.Channel(b.channelC), unique()))
	}
	c.send(t, "COUNT", "n", map[string]any{"kinds": []int{1}}, map[string]any{"kinds": []int{9}, "#h": []string{b.channelC}})
	f := c.expect(t, "COUNT", "n")
	require.JSONEq(t, `{"count":7}`, string(f[2]))
	c.send(t, "COUNT", "p", map[string]any{"kinds": []int{1059}})
	c.expect(t, "CLOSED", "p", "restricted: p-gated kinds require #p tag matching your pubkey")
	c.send(t, "COUNT", "q", map[string]any{"kinds": []int{9}, "search": "x"})
	c.expect(t, "CLOSED", "q", "error: search is not supported in COUNT")
	fixture.Event(t, b.db.pool, b.communityA, b.owner, 9, eventtest.Channel(b.private)) // stored, but not the reader's
	c.send(t, "COUNT", "d", map[string]any{"kinds": []int{9}, "#h": []string{b.private}})
	require.JSONEq(t, `{"count":0}`, string(c.expect(t, "COUNT", "d")[2]))
	o := b.dial(t)
	o.key = b.owner // the channel's member counts it
	o.auth(t)
	o.send(t, "COUNT", "d", map[string]any{"kinds": []int{9}, "#h": []string{b.private}})
	require.JSONEq(t, `{"count":1}`, string(o.expect(t, "COUNT", "d")[2]))
}
