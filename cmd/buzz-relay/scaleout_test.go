package main

// The multi-process checks of docs/PROTOCOL.md §16: two real buzz-relay
// processes, A and B, on one PostgreSQL database, one relay key and one
// real redis-server that the tests stop and start. Helpers are in
// scaleout_helpers_test.go.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/redistest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// An event published on A reaches a subscriber on B within 1 s,
// exactly once, and a subscriber on A exactly once too: the local-echo set
// keeps A from delivering its own event again when Redis hands it back.
func TestScaleOutCrossProcessDelivery(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "publisher on A", owner)
	pubB := authedPeer(t, s.b, "publisher on B", owner)
	ch := createChannel(t, pubA, owner)
	onA := authedPeer(t, s.a, "subscriber on A", reader)
	onB := authedPeer(t, s.b, "subscriber on B", reader)
	onA.subscribe("s", channelFilter(ch))
	onB.subscribe("s", channelFilter(ch))

	x := message(t, owner, ch, "x")
	pubA.mustPublish(x)
	_, before := onB.expect(deliveryWait, "X on B", isEvent("s", x.ID))
	require.Empty(t, before)
	_, before = onA.expect(deliveryWait, "X on A", isEvent("s", x.ID))
	require.Empty(t, before)

	// Redis delivers in publish order and both processes publish before
	// their OK, so a second copy of X would arrive ahead of markers
	// published afterwards on each process.
	markA, markB := message(t, owner, ch, "marker from A"), message(t, owner, ch, "marker from B")
	pubA.mustPublish(markA)
	pubB.mustPublish(markB)
	for _, w := range []*peer{onA, onB} {
		got := map[string]int{}
		for got[markA.ID] == 0 || got[markB.ID] == 0 {
			f := w.next(deliveryWait)
			require.Equal(t, "EVENT", f[0], "%s: %v", w.name, f)
			got[eventID(f, "s")]++
		}
		require.Equal(t, map[string]int{markA.ID: 1, markB.ID: 1}, got, "%s: X exactly once, then each marker once", w.name)
	}
}

// A subscriber on B to {"kinds":[44100],"#p":[T]} receives the
// 44100 of T being added to a channel via A, within 1 s.
func TestScaleOutGlobalTopic(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, target := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)
	ch := createChannel(t, pubA, owner, private)
	onB := authedPeer(t, s.b, "target on B", target)
	onB.subscribe("n", map[string]any{"kinds": []int{44100}, "#p": []string{target.PubKey}})

	pubA.mustPublish(addMember(t, owner, ch, target.PubKey))
	f, _ := onB.expect(deliveryWait, "the 44100 on B", func(f []any) bool { return len(f) == 3 && f[0] == "EVENT" })
	ev := frameEvent(t, f)
	require.Equal(t, 44100, ev.Kind)
	require.Equal(t, s.relayPub, ev.PubKey)
	require.Equal(t, event.Tags{{"p", target.PubKey}, {"h", ch}}, ev.Tags)
}

// Checks 3 and 4: with Redis stopped both processes keep accepting and
// serving what they accepted, and stay ready; when Redis returns both
// reconnect, every subscription that may have missed events is closed
// with "live delivery interrupted; resubscribe", a re-sent REQ with since
// from before the outage returns what was published meanwhile, and live
// delivery across processes resumes.
func TestScaleOutRedisOutage(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "publisher on A", owner)
	pubB := authedPeer(t, s.b, "publisher on B", owner)
	ch := createChannel(t, pubA, owner)
	subA := authedPeer(t, s.a, "subscriber on A", reader)
	subB := authedPeer(t, s.b, "subscriber on B", reader)
	subA.subscribe("live", channelFilter(ch))
	subB.subscribe("live", channelFilter(ch))
	first := message(t, owner, ch, "before the outage")
	pubA.mustPublish(first)
	subB.expect(deliveryWait, "the first event on B", isEvent("live", first.ID))
	subA.expect(deliveryWait, "the first event on A", isEvent("live", first.ID))
	since := first.CreatedAt

	s.redis.Stop()
	// Accepted at once, whether or not the processes have noticed yet.
	var onA, onB []string
	publish := func(w *peer, ids *[]string, content string) {
		t.Helper()
		ev := message(t, owner, ch, content)
		ok, msg := w.publish(ev)
		require.True(t, ok, "%s while Redis is down: %s", w.name, msg)
		*ids = append(*ids, ev.ID)
	}
	publish(pubA, &onA, "on A, Redis just stopped")
	publish(pubB, &onB, "on B, Redis just stopped")
	for _, p := range s.both() {
		p.waitMetric("buzz_pubsub_connected", 15*time.Second, func(v float64) bool { return v == 0 })
	}
	publish(pubA, &onA, "on A, Redis known down")
	publish(pubB, &onB, "on B, Redis known down")
	outage := append(append([]string{}, onA...), onB...)

	for _, p := range s.both() {
		p.requireReady()
		require.Equal(t, "disconnected", p.status()["redis"])
		require.Positive(t, p.metric("buzz_pubsub_publish_errors_total"), "skipped publishes are counted")
		history, closed := authedPeer(t, p, "reader on "+p.AppAddr, reader).req("h", channelFilter(ch))
		require.Empty(t, closed)
		require.Subset(t, idsOf(history), outage, "REQ on %s returns what both processes accepted", p.AppAddr)
	}
	// Local subscribers still receive their own process's events live.
	for _, id := range onA {
		subA.take(deliveryWait, "A's event on A during the outage", isEvent("live", id))
	}

	s.redis.Restart()
	for _, p := range s.both() {
		p.waitMetric("buzz_pubsub_connected", reconnectWait, func(v float64) bool { return v == 1 })
		require.Equal(t, "connected", p.status()["redis"])
		require.Positive(t, p.metric("buzz_pubsub_reconnects_total"))
	}
	interrupted := isFrame("CLOSED", "live", wire.MsgLiveInterrupted)
	// The closing is spread over 5 s after the reconnect.
	subA.take(frameWait, "the interruption on A", interrupted)
	_, before := subB.expect(frameWait, "the interruption on B", interrupted)
	for _, f := range before {
		require.Contains(t, onB, eventID(f, "live"), "only B's own events reached B during the outage: %v", f)
	}
	for _, p := range s.both() {
		require.Positive(t, p.metric("buzz_pubsub_interrupted_subscriptions_total"))
	}

	resumed := channelFilter(ch)
	resumed["since"] = since
	history := subB.subscribe("live", resumed)
	require.Subset(t, idsOf(history), append([]string{first.ID}, outage...), "the re-sent REQ returns the outage")
	next := message(t, owner, ch, "after the outage")
	pubA.mustPublish(next)
	_, before = subB.expect(deliveryWait, "the next event from A, live on B", isEvent("live", next.ID))
	require.Empty(t, before)
}

// Redis holds exactly the topics the processes need, by exact
// name: the control topic, one barrier topic per process, and the channel
// and global topics of live subscriptions, named by community id; never a
// pattern subscription. The hot window is off here: a warm window adds its
// community's window topic (internal/pubsub TestDeliver/WindowTopic,
// internal/hot TestDifferentialRedis) on its own schedule.
func TestScaleOutExactTopics(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, map[string]string{"BUZZ_HOT_WINDOW_EVENTS": "0"})
	monitor := s.redis.Monitor()
	rc := s.redis.Client()
	ctx := context.Background()
	base := []string{"buzz:control", "buzz:barrier:" + s.a.processID(), "buzz:barrier:" + s.b.processID()}
	requireTopics := func(want []string) {
		t.Helper()
		got, err := rc.PubSubChannels(ctx, "buzz:*").Result()
		require.NoError(t, err)
		require.ElementsMatch(t, want, got)
		n, err := rc.PubSubNumPat(ctx).Result()
		require.NoError(t, err)
		require.Zero(t, n, "PUBSUB NUMPAT")
	}
	requireTopics(base)

	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)
	c1, c2 := createChannel(t, pubA, owner), createChannel(t, pubA, owner)
	requireTopics(base) // publishing subscribes to nothing
	onB := authedPeer(t, s.b, "reader on B", reader)
	onA := authedPeer(t, s.a, "reader on A", reader)
	onB.subscribe("c1", channelFilter(c1))
	onB.subscribe("both", map[string]any{"#h": []string{c1, c2}})
	onA.subscribe("global", map[string]any{"kinds": []int{44100}, "#p": []string{reader.PubKey}})
	// Each REQ waited for its SUBSCRIBE before its history, so the topics
	// are there by its EOSE.
	requireTopics(append([]string{
		"buzz:" + s.community + ":channel:" + c1,
		"buzz:" + s.community + ":channel:" + c2,
		"buzz:" + s.community + ":global",
	}, base...))

	onB.send("CLOSE", "c1")
	onB.send("CLOSE", "both")
	onA.send("CLOSE", "global")
	deadline := time.Now().Add(deliveryWait)
	for {
		got, err := rc.PubSubChannels(ctx, "buzz:*").Result()
		require.NoError(t, err)
		if len(got) == len(base) {
			break
		}
		require.True(t, time.Now().Before(deadline), "topics left %s after the CLOSEs: %v", deliveryWait, got)
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	requireTopics(base)
	monitor.Sync()
	for _, line := range monitor.Lines() {
		require.NotContains(t, strings.ToUpper(line), `"PSUBSCRIBE"`)
	}
}

// Topics are reference counted and released late. With two
// subscriptions on C, closing one keeps C's topic; closing the other
// leaves it subscribed for a moment, then gone within 2 s; a CLOSE and a
// new REQ on C in quick succession send no UNSUBSCRIBE at all.
func TestScaleOutTopicRefcounts(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	rc := s.redis.Client()
	ctx := context.Background()
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	ch := createChannel(t, authedPeer(t, s.a, "owner on A", owner), owner)
	topic := "buzz:" + s.community + ":channel:" + ch
	subscribed := func() bool {
		t.Helper()
		got, err := rc.PubSubChannels(ctx, topic).Result()
		require.NoError(t, err)
		return len(got) == 1
	}
	onB := authedPeer(t, s.b, "reader on B", reader)
	closeSub := func(sub string) {
		t.Helper()
		onB.send("CLOSE", sub)
		onB.take(frameWait, "the answer to CLOSE "+sub, isFrame("CLOSED", sub, ""))
	}
	onB.subscribe("one", channelFilter(ch))
	onB.subscribe("two", channelFilter(ch))
	require.True(t, subscribed())

	closeSub("one")
	require.True(t, subscribed(), "one subscription on C remains")
	closeSub("two")
	released := time.Now()
	require.True(t, subscribed(), "the UNSUBSCRIBE waits")
	for subscribed() {
		require.Less(t, time.Since(released), 2*time.Second, "%s still subscribed", topic)
		time.Sleep(20 * time.Millisecond) // polling interval
	}

	onB.subscribe("three", channelFilter(ch))
	monitor := s.redis.Monitor()
	closeSub("three")
	closed := time.Now()
	onB.subscribe("four", channelFilter(ch))
	require.Less(t, time.Since(closed), 400*time.Millisecond, "the new REQ must come well within the 500 ms debounce")
	// Past the 500 ms debounce: an UNSUBSCRIBE sent for the CLOSE would be in.
	hold := time.Now().Add(time.Second)
	for time.Now().Before(hold) {
		require.True(t, subscribed(), "C's topic is held by four")
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	monitor.Sync()
	for _, line := range monitor.Lines() {
		require.False(t, strings.Contains(line, `"UNSUBSCRIBE"`) && strings.Contains(line, ch), "churn at Redis: %s", line)
	}
}

// REQs on B for fresh channels while A publishes into them lose
// nothing: B subscribes a channel's topic before it reads its history, so
// every event is in B's history or arrives live. 30 rounds, each with
// several channels registering at once while two connections on A keep
// publishing into them.
func TestScaleOutNoGapAtRegistration(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubs := []*peer{authedPeer(t, s.a, "publisher 1 on A", owner), authedPeer(t, s.a, "publisher 2 on A", owner)}
	onB := authedPeer(t, s.b, "reader on B", reader)
	const rounds, width = 30, 8
	for round := range rounds {
		subs := map[string]string{} // subscription → its fresh channel
		var order []string
		for i := range width {
			sub := "r" + strconv.Itoa(round) + "c" + strconv.Itoa(i)
			subs[sub] = createChannel(t, pubs[0], owner)
			order = append(order, sub)
		}
		// Events go out before, between and after the REQs without waiting
		// for their OKs, so their commits overlap B's registrations.
		var sent []event.Event
		var by []*peer // the connection each event went out on
		burst := func(tag string) {
			for i, sub := range order {
				ev := message(t, owner, subs[sub], sub+" "+tag)
				pubs[i%len(pubs)].send("EVENT", ev)
				sent, by = append(sent, ev), append(by, pubs[i%len(pubs)])
			}
		}
		burst("before")
		for i, sub := range order {
			onB.send("REQ", sub, channelFilter(subs[sub]))
			if i == width/2 {
				burst("among")
			}
		}
		burst("after")
		for i, ev := range sent {
			f := by[i].take(frameWait, "OK of "+ev.Content, isOK(ev.ID))
			require.Equal(t, true, f[2], "%v", f)
		}
		seen := map[string]bool{}
		markers := map[string]bool{}
		for _, sub := range order {
			marker := message(t, owner, subs[sub], sub+" marker")
			markers[marker.ID] = true
			pubs[0].mustPublish(marker)
		}
		// Each marker follows its channel's events through Redis.
		for eose := 0; eose < width || len(markers) > 0; {
			f := onB.next(deliveryWait)
			require.GreaterOrEqual(t, len(f), 2, "%v", f)
			sub, _ := f[1].(string)
			if _, ok := subs[sub]; !ok {
				continue // the answer to a CLOSE of the previous round
			}
			switch f[0] {
			case "EOSE":
				eose++
			case "EVENT":
				id := eventID(f, sub)
				seen[id] = true
				delete(markers, id)
			default:
				t.Fatalf("round %d: %v", round, f)
			}
		}
		for _, ev := range sent {
			require.True(t, seen[ev.ID], "round %d: %q neither in B's history nor live on B", round, ev.Content)
		}
		for _, sub := range order {
			onB.send("CLOSE", sub)
		}
	}
}

// Made deterministic with a frozen Redis: a REQ that subscribes
// a new topic reads its history only once Redis confirmed the SUBSCRIBE,
// or after 1 s. While Redis does not answer, the EOSE is held; it follows
// the confirmation at once, and comes by itself within the bound.
func TestScaleOutRegistrationWaitsForSubscribe(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)
	held, bounded := createChannel(t, pubA, owner), createChannel(t, pubA, owner)

	onB := authedPeer(t, s.b, "reader on B", reader)
	s.redis.Pause()
	onB.send("REQ", "held", channelFilter(held))
	f, ok := onB.tryNext(400 * time.Millisecond)
	require.False(t, ok, "answered before Redis confirmed the SUBSCRIBE: %v", f)
	s.redis.Resume()
	onB.expect(frameWait, "EOSE of held after the confirmation", isFrame("EOSE", "held"))

	// A connection with no other live subscription, so no barrier waits.
	other := authedPeer(t, s.b, "second reader on B", reader)
	s.redis.Pause()
	sent := time.Now()
	other.send("REQ", "bounded", channelFilter(bounded))
	other.expect(deliveryWait, "EOSE of bounded while Redis is frozen", isFrame("EOSE", "bounded"))
	waited := time.Since(sent)
	s.redis.Resume()
	require.Greater(t, waited, 900*time.Millisecond, "the history waited for the SUBSCRIBE")
}

// A membership added via A reaches B's caches. B's cached
// accessible set of U, which left private C out, is dropped within 1 s
// instead of living out its 10 s; and U, refused on B, is served on B at
// once after being added via A even when no control message can arrive
// (Redis stopped): B confirms a channel its cache lacks without the cache.
func TestScaleOutCacheInvalidation(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner := eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)

	u := eventtest.NewKey()
	ch := createChannel(t, pubA, owner, private)
	msg := message(t, owner, ch, "members only")
	pubA.mustPublish(msg)
	onB := authedPeer(t, s.b, "U on B", u)
	// A REQ without #h reads every accessible channel from B's cache.
	everywhere := map[string]any{"kinds": []int{9}, "authors": []string{owner.PubKey}}
	history := onB.subscribe("w0", everywhere)
	require.NotContains(t, idsOf(history), msg.ID)
	_, closed := onB.req("c", channelFilter(ch))
	require.Equal(t, wire.MsgNotChannelMember, closed)
	misses := s.b.metric("buzz_accessible_channels_cache_misses_total")

	pubA.mustPublish(addMember(t, owner, ch, u.PubKey))
	added := time.Now()
	for i := 1; ; i++ {
		history = onB.subscribe("w"+strconv.Itoa(i), everywhere)
		if len(history) > 0 && history[0].ID == msg.ID {
			break
		}
		require.Less(t, time.Since(added), deliveryWait, "B still serves U's cached set without C")
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	require.Greater(t, s.b.metric("buzz_accessible_channels_cache_misses_total"), misses, "B looked U up afresh")

	// Without Redis nothing tells B; its confirmation must not need telling.
	s.redis.Stop()
	v := eventtest.NewKey()
	ch = createChannel(t, pubA, owner, private)
	onB = authedPeer(t, s.b, "V on B", v)
	_, closed = onB.req("c", channelFilter(ch))
	require.Equal(t, wire.MsgNotChannelMember, closed)
	pubA.mustPublish(addMember(t, owner, ch, v.PubKey))
	_, closed = onB.req("c", channelFilter(ch))
	require.Empty(t, closed, "V added via A is served on B at once")
}

// U removed from C via A loses its subscription on C held on B:
// B sends CLOSED "restricted: channel access revoked" within 1 s.
func TestScaleOutEviction(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner := eventtest.NewKey()
	for _, visibility := range []string{"open", "private"} {
		t.Run(strings.ToUpper(visibility[:1])+visibility[1:], func(t *testing.T) {
			t.Parallel()
			// Each subtest dials when it runs: a parallel subtest may wait
			// minutes for its turn, and one failing must not close the
			// other's connection.
			pubA := authedPeer(t, s.a, "owner on A", owner)
			u := eventtest.NewKey()
			ch := createChannel(t, pubA, owner, eventtest.Tag("visibility", visibility))
			pubA.mustPublish(addMember(t, owner, ch, u.PubKey))
			onB := authedPeer(t, s.b, "U on B", u)
			onB.subscribe("s", channelFilter(ch))
			onB.subscribe("all", map[string]any{"#h": []string{ch}})

			pubA.mustPublish(removeMember(t, owner, ch, u.PubKey))
			removed := time.Now()
			onB.take(deliveryWait, "CLOSED of s", isFrame("CLOSED", "s", wire.MsgAccessRevoked))
			onB.take(deliveryWait, "CLOSED of all", isFrame("CLOSED", "all", wire.MsgAccessRevoked))
			t.Logf("evicted on B %s after the removal's OK on A", time.Since(removed).Round(time.Millisecond))
		})
	}
}

// With Redis stopped: the removal via A cannot reach B, so U's
// subscription on B is not closed, but B's send-time access check stops
// delivering C's events to U at the latest when its cached access expires,
// 10 s after the removal.
func TestScaleOutEvictionWithoutRedis(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, u := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)
	pubB := authedPeer(t, s.b, "owner on B", owner)
	ch := createChannel(t, pubA, owner, private)
	pubA.mustPublish(addMember(t, owner, ch, u.PubKey))
	onB := authedPeer(t, s.b, "U on B", u)
	onB.subscribe("s", channelFilter(ch))

	s.redis.Stop()
	pubA.mustPublish(removeMember(t, owner, ch, u.PubKey))
	removed := time.Now()
	const ttl = 10 * time.Second
	// Events of C on B itself, the only ones that can still reach U there.
	late := map[string]bool{}
	for i := 0; time.Since(removed) < ttl+time.Second; i++ {
		ev := message(t, owner, ch, "after the removal "+strconv.Itoa(i))
		if time.Since(removed) > ttl {
			late[ev.ID] = true
		}
		pubB.mustPublish(ev)
		time.Sleep(250 * time.Millisecond) // pacing the publishes
	}
	marker := message(t, owner, ch, "marker")
	// The owner's own subscription on B shows when fan-out of the last
	// event is done.
	watch := authedPeer(t, s.b, "owner watching on B", owner)
	watch.subscribe("w", channelFilter(ch))
	pubB.mustPublish(marker)
	watch.expect(deliveryWait, "the marker", isEvent("w", marker.ID))
	early := 0
	for {
		f, ok := onB.tryNext(0)
		if !ok {
			break
		}
		early++
		require.NotEqual(t, "CLOSED", f[0], "nothing can close U's subscription on B: %v", f)
		require.False(t, late[eventID(f, "s")], "U received an event of C more than %s after the removal", ttl)
		require.NotEqual(t, marker.ID, eventID(f, "s"))
	}
	t.Logf("U received %d events of C on B after the removal, none more than %s after it", early, ttl)
}

// A 9002 visibility=private via A closes, within 1 s, the
// subscriptions on C that non-members hold on B; a member's stays.
func TestScaleOutOpenToPrivate(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, member, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)
	ch := createChannel(t, pubA, owner)
	pubA.mustPublish(addMember(t, owner, ch, member.PubKey))
	onBx := authedPeer(t, s.b, "outsider on B", outsider)
	onBm := authedPeer(t, s.b, "member on B", member)
	onBx.subscribe("x", channelFilter(ch))
	onBx.subscribe("x2", map[string]any{"#h": []string{ch}})
	onBm.subscribe("m", channelFilter(ch))

	pubA.mustPublish(owner.Signed(t, 9002, nonce(), eventtest.Channel(ch), eventtest.Tag("visibility", "private")))
	onBx.take(deliveryWait, "CLOSED of x", isFrame("CLOSED", "x", wire.MsgAccessRevoked))
	onBx.take(deliveryWait, "CLOSED of x2", isFrame("CLOSED", "x2", wire.MsgAccessRevoked))
	for _, f := range onBx.setAside() {
		require.NotEqual(t, "EVENT", f[0], "a non-member must not see the private state: %v", f)
	}

	msg := message(t, owner, ch, "members only now")
	pubA.mustPublish(msg)
	_, before := onBm.expect(deliveryWait, "the member's next event", isEvent("m", msg.ID))
	require.Empty(t, before)
	_, closed := onBx.req("again", channelFilter(ch))
	require.Equal(t, wire.MsgNotChannelMember, closed)
}

// A NIP-98 token used on A is refused on B with 401 "NIP-98:
// replay detected", with Redis up and with Redis stopped: replay ids live
// in PostgreSQL.
func TestScaleOutReplay(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	key := eventtest.NewKey()
	body := []byte(`[{"kinds":[0],"limit":1}]`)
	check := func(t *testing.T) {
		t.Helper()
		token := auth.NIP98Header(key.Signed(t, event.KindNIP98, eventtest.Content(""),
			eventtest.Tag("u", "http://"+deploymentHost+"/query"), eventtest.Tag("method", "POST"),
			eventtest.Tag("nonce", rand.Text())))
		status, resp := postQuery(t, s.a, token, body)
		require.Equal(t, http.StatusOK, status, resp)
		status, resp = postQuery(t, s.b, token, body)
		require.Equal(t, http.StatusUnauthorized, status, resp)
		require.JSONEq(t, `{"error":"NIP-98: replay detected"}`, resp)
	}
	check(t)
	s.redis.Stop()
	check(t)
}

// postQuery sends POST /query to p for the deployment host with the given
// Authorization and returns status and body.
func postQuery(t *testing.T, p *relayProc, authorization string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.AppAddr+"/query", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Host = deploymentHost
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authorization)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Relay-signed events made by A and by B verify against the one
// NIP-11 self both processes advertise.
func TestScaleOutSharedIdentity(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner := eventtest.NewKey()
	chA := createChannel(t, authedPeer(t, s.a, "owner on A", owner), owner)
	chB := createChannel(t, authedPeer(t, s.b, "owner on B", owner), owner)
	for _, p := range s.both() {
		code, body, err := httpGet("http://" + p.AppAddr + "/info")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		var info struct {
			Self string `json:"self"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &info), body)
		require.Equal(t, s.relayPub, info.Self, "NIP-11 self of %s", p.AppAddr)

		w := authedPeer(t, p, "reader on "+p.AppAddr, eventtest.NewKey())
		for _, ch := range []string{chA, chB} {
			state := w.subscribe("m"+ch[:8], map[string]any{"kinds": []int{39000}, "#d": []string{ch}})
			require.Len(t, state, 1)
			ev := state[0]
			require.Equal(t, info.Self, ev.PubKey)
			_, ok := ev.CheckID()
			require.True(t, ok, "id of the 39000 of %s", ch)
			require.True(t, ev.VerifySignature(), "signature of the 39000 of %s", ch)
		}
	}
}

// The startup rules: REDIS_URL needs BUZZ_RELAY_PRIVATE_KEY and
// DATABASE_URL, and each missing one stops startup with status 2.
func TestScaleOutStartupErrors(t *testing.T) {
	t.Parallel()
	t.Run("WithoutRelayKey", func(t *testing.T) {
		t.Parallel()
		env := relayEnv(t)
		env["DATABASE_URL"] = unreachableDB
		env["REDIS_URL"] = "redis://127.0.0.1:1"
		res := runBinary(t, env, "serve")
		require.Equal(t, 2, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		require.Equal(t, "invalid BUZZ_RELAY_PRIVATE_KEY: required when REDIS_URL is set\n", res.Stderr)
		requireNotListening(t, env["BUZZ_BIND_ADDR"])
	})
	t.Run("WithoutDatabase", func(t *testing.T) {
		t.Parallel()
		env := relayEnv(t)
		env["BUZZ_DATA_DIR"] = t.TempDir()
		env["REDIS_URL"] = "redis://127.0.0.1:1"
		env["BUZZ_RELAY_PRIVATE_KEY"] = strings.Repeat("01", 32)
		res := runBinary(t, env, "serve")
		require.Equal(t, 2, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		require.Equal(t, "invalid REDIS_URL: requires DATABASE_URL\n", res.Stderr)
		requireNotListening(t, env["BUZZ_BIND_ADDR"])
		require.NoDirExists(t, filepath.Join(env["BUZZ_DATA_DIR"], "pg"), "no private cluster")
	})
}

// A and B started at the same instant on an empty database with
// auto-migrate both become ready; the migrations ran once between them,
// each with one ledger row, and the partitions were made once.
func TestScaleOutConcurrentStart(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	url := dbtest.NewEmptyDB(t)
	key := hex.EncodeToString(event.GenerateKey())
	var procs []*relayProc
	for range 2 {
		env := relayEnv(t)
		env["DATABASE_URL"] = url
		env["BUZZ_AUTO_MIGRATE"] = "true"
		env["BUZZ_RELAY_PRIVATE_KEY"] = key
		env["REDIS_URL"] = rs.URL()
		procs = append(procs, startRelay(t, env))
	}
	applied := 0
	for _, p := range procs {
		p.waitReady()
		for _, rec := range p.logRecords() {
			if rec["msg"] == "applied migration" {
				applied++
			}
		}
	}
	require.Equal(t, len(pg.Migrations()), applied, "each migration applied by one process")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var rows, versions int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM buzz_schema_migrations`).Scan(&rows, &versions))
	require.Equal(t, len(pg.Migrations()), rows)
	require.Equal(t, rows, versions)
	var partitions, bounds int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT pg_get_expr(c.relpartbound, c.oid))
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass`).Scan(&partitions, &bounds))
	require.GreaterOrEqual(t, partitions, 4, "this month and the next three")
	require.Equal(t, partitions, bounds)
	for _, p := range procs {
		for _, rec := range p.logRecords() {
			require.NotEqual(t, "ERROR", rec["level"], "%v", rec)
		}
	}
}

// What a stray client publishes on Redis is dropped: junk and an
// event whose id does not match it on a topic both processes hold, and an
// event on a topic that does not parse (which no process even subscribes,
// holding no pattern). Nothing reaches a subscriber, both processes count
// the two they read in buzz_pubsub_invalid_messages_total, and both keep
// serving.
func TestScaleOutMalformedRedisTraffic(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "publisher on A", owner)
	pubB := authedPeer(t, s.b, "publisher on B", owner)
	ch := createChannel(t, pubA, owner)
	onA := authedPeer(t, s.a, "subscriber on A", reader)
	onB := authedPeer(t, s.b, "subscriber on B", reader)
	onA.subscribe("s", channelFilter(ch))
	onB.subscribe("s", channelFilter(ch))
	invalid := map[*relayProc]float64{}
	for _, p := range s.both() {
		invalid[p] = p.metric("buzz_pubsub_invalid_messages_total")
	}

	rc := s.redis.Client()
	ctx := context.Background()
	topic := "buzz:" + s.community + ":channel:" + ch
	tampered := message(t, owner, ch, "signed")
	tampered.Content = "changed after signing"
	tamperedJSON, err := json.Marshal(tampered)
	require.NoError(t, err)
	stray, err := json.Marshal(message(t, owner, ch, "on a topic that does not parse"))
	require.NoError(t, err)
	for _, m := range []struct {
		topic     string
		payload   string
		receivers int64
	}{
		{topic, "junk", 2},
		{topic, string(tamperedJSON), 2},
		{"buzz:not-a-uuid:global", string(stray), 0},
	} {
		n, err := rc.Publish(ctx, m.topic, m.payload).Result()
		require.NoError(t, err)
		require.Equal(t, m.receivers, n, "receivers of %.40s on %s", m.payload, m.topic)
	}
	for _, p := range s.both() {
		got := p.waitMetric("buzz_pubsub_invalid_messages_total", deliveryWait, func(v float64) bool { return v >= invalid[p]+2 })
		require.Equal(t, invalid[p]+2, got, "invalid messages counted on %s", p.AppAddr)
		p.requireReady()
	}

	// Each process's marker reaches the other through Redis after the
	// stray messages, so anything delivered from them would come first.
	markA, markB := message(t, owner, ch, "marker from A"), message(t, owner, ch, "marker from B")
	pubA.mustPublish(markA)
	pubB.mustPublish(markB)
	for _, w := range []*peer{onA, onB} {
		got := map[string]bool{}
		for !got[markA.ID] || !got[markB.ID] {
			f := w.next(deliveryWait)
			id := eventID(f, "s")
			require.True(t, id == markA.ID || id == markB.ID, "%s received %v", w.name, f)
			got[id] = true
		}
	}
}

// A kind 20001 on A writes the presence key
// buzz:{community}:presence:{hex} with a TTL of at most 180 s; "offline"
// deletes it, and so does closing the pubkey's last connection on A.
func TestScaleOutPresence(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	rc := s.redis.Client()
	ctx := context.Background()
	u := eventtest.NewKey()
	key := "buzz:" + s.community + ":presence:" + u.PubKey
	presence := func(status string) event.Event { // a nonce keeps two of the same second apart
		return u.Signed(t, event.KindPresence, eventtest.Content(status), eventtest.Tag("nonce", rand.Text()))
	}
	waitKey := func(what string, ok func(val string, exists bool) bool) {
		t.Helper()
		deadline := time.Now().Add(deliveryWait)
		for {
			val, err := rc.Get(ctx, key).Result()
			exists := err == nil
			if !exists {
				require.ErrorIs(t, err, redis.Nil)
			}
			if ok(val, exists) {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: key %s is %q (exists %v)", what, key, val, exists)
			time.Sleep(20 * time.Millisecond) // polling interval
		}
	}
	isOnline := func(val string, exists bool) bool { return exists && val == "online" }
	gone := func(_ string, exists bool) bool { return !exists }

	w := authedPeer(t, s.a, "U on A", u)
	w.mustPublish(presence("online"))
	waitKey("online", isOnline)
	ttl, err := rc.TTL(ctx, key).Result()
	require.NoError(t, err)
	require.Positive(t, ttl)
	require.LessOrEqual(t, ttl, 180*time.Second)

	w.mustPublish(presence("offline"))
	waitKey("offline", gone)

	w.mustPublish(presence("online"))
	waitKey("online again", isOnline)
	second := authedPeer(t, s.a, "U's second connection on A", u)
	second.close()
	// U still has a connection on A: the key stays.
	w.subscribe("roundtrip", map[string]any{"kinds": []int{0}, "authors": []string{u.PubKey}})
	holdUntil := time.Now().Add(time.Second)
	for time.Now().Before(holdUntil) {
		waitKey("while a connection remains", isOnline)
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	w.close()
	waitKey("after the last connection closed", gone)
}

// The delivery barrier across processes. K on B holds a live
// subscription; X is published on A and acknowledged; K's next REQ ends
// with EOSE only after X reached K's first subscription. 200 rounds, and no
// barrier timed out, for a channel filter (docs/PROTOCOL.md §16.2) and for the NIP-RS
// read-state filter (the cross-process half of docs/PROTOCOL.md §14.5).
func TestScaleOutBarrier(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "publisher on A", owner)
	ch := createChannel(t, pubA, owner)
	slot := "read-state:" + strings.ReplaceAll(uuid.NewString(), "-", "")
	base := time.Now().Unix() - 400
	kinds := []struct {
		name   string
		filter map[string]any
		next   func(round int) event.Event
	}{
		{"Channel", channelFilter(ch), func(round int) event.Event { return message(t, owner, ch, "x"+strconv.Itoa(round)) }},
		{"ReadState", map[string]any{"kinds": []int{30078}, "authors": []string{reader.PubKey}, "#t": []string{"read-state"}},
			func(round int) event.Event {
				return reader.Signed(t, 30078, eventtest.Tag("d", slot), eventtest.Tag("t", "read-state"), eventtest.At(base+int64(round)))
			}},
	}
	for _, kind := range kinds {
		pub := pubA
		if kind.name == "ReadState" {
			pub = authedPeer(t, s.a, "read-state publisher on A", reader)
		}
		k := authedPeer(t, s.b, "K on B", reader)
		k.subscribe("live", kind.filter)
		// New events only: no history to read, so the EOSE would otherwise
		// follow the REQ at once.
		fresh := maps.Clone(kind.filter)
		fresh["limit"] = 0
		for round := range 200 {
			x := kind.next(round)
			pub.mustPublish(x)
			sub := "q" + strconv.Itoa(round)
			k.send("REQ", sub, fresh)
			_, before := k.expect(frameWait, "EOSE of "+sub, isFrame("EOSE", sub))
			var ids []string
			for _, f := range before {
				if f[1] == "live" {
					ids = append(ids, eventID(f, "live"))
				} // else X on the previous round's subscription, if it was still open
			}
			require.Equal(t, []string{x.ID}, ids, "%s round %d: X on the first subscription before the EOSE", kind.name, round)
			k.send("CLOSE", sub)
		}
	}
	require.Zero(t, s.b.metric("buzz_pubsub_barrier_timeouts_total"))
}

// The harness scenario of the scale-out issue: 8 publishers on A and 200
// subscribers on B, with Redis restarted once in the middle. Nothing
// acknowledged is missing from the database, no subscriber receives an
// event twice, and every subscriber either received every event or was
// told to resubscribe; those told get the rest from a REQ with since.
func TestScaleOutHarness(t *testing.T) {
	t.Parallel()
	s := startScaleOut(t, nil)
	owner := eventtest.NewKey()
	ch := createChannel(t, authedPeer(t, s.a, "owner on A", owner), owner)
	start := time.Now().Unix()
	const publishers, subscribers, rounds = 8, 200, 30

	type publisher struct {
		key eventtest.Key
		w   *peer
	}
	pubs := make([]publisher, publishers)
	for i := range pubs {
		pubs[i].key = eventtest.NewKey()
		pubs[i].w = authedPeer(t, s.a, "publisher "+strconv.Itoa(i)+" on A", pubs[i].key)
	}
	subs := make([]*peer, subscribers)
	for i := range subs {
		subs[i] = authedPeer(t, s.b, "subscriber "+strconv.Itoa(i)+" on B", eventtest.NewKey())
		subs[i].subscribe("live", channelFilter(ch))
	}

	var acked []string
	publishRound := func(round int) {
		t.Helper()
		evs := make([]event.Event, publishers)
		for i, p := range pubs {
			evs[i] = message(t, p.key, ch, "round "+strconv.Itoa(round)+" from "+strconv.Itoa(i))
			p.w.send("EVENT", evs[i])
		}
		for i, p := range pubs {
			f := p.w.take(frameWait, "OK of "+evs[i].Content, isOK(evs[i].ID))
			require.Equal(t, true, f[2], "%s: %v", p.w.name, f)
			acked = append(acked, evs[i].ID)
		}
	}
	for round := range rounds {
		if round == rounds/2 {
			s.redis.Restart()
		}
		publishRound(round)
	}
	for _, p := range s.both() {
		p.waitMetric("buzz_pubsub_connected", reconnectWait, func(v float64) bool { return v == 1 })
	}
	marker := message(t, owner, ch, "marker after the restart")
	authedPeer(t, s.a, "marker on A", owner).mustPublish(marker)

	// In the database: every acknowledged event.
	stored := storedIDs(t, s.a.Env["DATABASE_URL"], s.community, ch)
	for _, id := range acked {
		require.True(t, stored[id], "acknowledged %s is not in the database", id)
	}

	interrupted := isFrame("CLOSED", "live", wire.MsgLiveInterrupted)
	told := 0
	for _, w := range subs {
		got := map[string]int{}
		closed := false
		for !closed && got[marker.ID] == 0 {
			f := w.next(frameWait)
			if interrupted(f) {
				closed = true
				continue
			}
			id := eventID(f, "live")
			require.NotEmpty(t, id, "%s: %v", w.name, f)
			got[id]++
			require.Equal(t, 1, got[id], "%s received %s twice", w.name, id)
		}
		missing := 0
		for _, id := range acked {
			if got[id] == 0 {
				missing++
			}
		}
		if !closed && missing > 0 {
			// Live again, but it missed events: it must be told.
			_, before := w.expect(frameWait, "the interruption after missing "+strconv.Itoa(missing)+" events", interrupted)
			require.Empty(t, before, "%s: after the marker", w.name)
			closed = true
		}
		if !closed {
			continue
		}
		told++
		resumed := channelFilter(ch)
		resumed["since"] = start
		for _, ev := range w.subscribe("live", resumed) {
			got[ev.ID]++
		}
		for _, id := range acked {
			require.Positive(t, got[id], "%s: %s neither live nor in its re-sent REQ", w.name, id)
		}
	}
	t.Logf("%d events acknowledged, %d of %d subscribers told to resubscribe", len(acked), told, subscribers)
}

// storedIDs returns the ids of the kind 9 events stored in channel ch.
func storedIDs(t *testing.T, databaseURL, community, ch string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, databaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT encode(id, 'hex') FROM events
		WHERE community_id = $1 AND channel_id = $2 AND kind = 9`, community, ch)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
