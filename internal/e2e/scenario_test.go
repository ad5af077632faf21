package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nbd-wtf/go-nostr"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// scClient is a user of the deployment community speaking through go-nostr:
// its connection, envelopes, event signing and signature checks. (Its
// Relay type is not used: Relay.Close races with its own writer goroutine
// under the race detector, and it dispatches events through goroutines,
// which loses their order.) Frames read while waiting for something else
// are kept in pending, so nothing is lost.
type scClient struct {
	t       *testing.T
	name    string
	ctx     context.Context
	conn    *nostr.Connection
	key     eventtest.Key
	sk      string
	pending []nostr.Envelope
}

func scConnect(t *testing.T, ctx context.Context, url, name string, key eventtest.Key) *scClient {
	t.Helper()
	conn, err := nostr.NewConnection(ctx, url, nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := &scClient{t: t, name: name, ctx: ctx, conn: conn, key: key, sk: hex.EncodeToString(key.SK)}
	challenge, ok := c.read().(*nostr.AuthEnvelope)
	require.True(t, ok)
	auth := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"relay", url}, {"challenge", *challenge.Challenge}}}
	require.NoError(t, auth.Sign(c.sk))
	c.send(&nostr.AuthEnvelope{Event: auth})
	okEnv, ok := c.read().(*nostr.OKEnvelope)
	require.True(t, ok)
	require.Equal(t, nostr.OKEnvelope{EventID: auth.ID, OK: true, Reason: ""}, *okEnv)
	return c
}

func (c *scClient) send(env nostr.Envelope) {
	c.t.Helper()
	b, err := env.MarshalJSON()
	require.NoError(c.t, err)
	require.NoError(c.t, c.conn.WriteMessage(c.ctx, b))
}

func (c *scClient) read() nostr.Envelope {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(c.t, c.conn.ReadMessage(ctx, &buf), "%s: waiting for a frame", c.name)
	env, err := nostr.NewMessageParser().ParseMessage(buf.String())
	require.NoError(c.t, err, "unparsable frame %s", buf.String())
	if ev, ok := env.(*nostr.EventEnvelope); ok {
		valid, err := ev.CheckSignature()
		require.NoError(c.t, err)
		require.True(c.t, valid, "bad signature on %s", ev.ID)
	}
	return env
}

// event signs a new event of the client's user.
func (c *scClient) event(kind int, content string, tags ...nostr.Tag) nostr.Event {
	c.t.Helper()
	ev := nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Tags: nostr.Tags(tags), Content: content}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	require.NoError(c.t, ev.Sign(c.sk))
	return ev
}

// publish sends an EVENT and returns its OK.
func (c *scClient) publish(ev nostr.Event) (bool, string) {
	c.t.Helper()
	c.send(&nostr.EventEnvelope{Event: ev})
	for {
		env := c.read()
		if ok, isOK := env.(*nostr.OKEnvelope); isOK && ok.EventID == ev.ID {
			return ok.OK, ok.Reason
		}
		c.pending = append(c.pending, env)
	}
}

func (c *scClient) mustPublish(ev nostr.Event) nostr.Event {
	c.t.Helper()
	ok, reason := c.publish(ev)
	require.True(c.t, ok, "%s: kind %d refused: %s", c.name, ev.Kind, reason)
	require.Equal(c.t, "", reason)
	return ev
}

func (c *scClient) refused(ev nostr.Event, reason string) {
	c.t.Helper()
	ok, got := c.publish(ev)
	require.False(c.t, ok, "%s: kind %d accepted", c.name, ev.Kind)
	require.Equal(c.t, reason, got)
}

// req sends a REQ and returns its history, or the CLOSED reason.
func (c *scClient) req(sub string, filters ...nostr.Filter) (history []nostr.Event, closed string) {
	c.t.Helper()
	c.send(&nostr.ReqEnvelope{SubscriptionID: sub, Filters: filters})
	for {
		env := c.read()
		switch v := env.(type) {
		case *nostr.EventEnvelope:
			if *v.SubscriptionID == sub {
				history = append(history, v.Event)
				continue
			}
		case *nostr.EOSEEnvelope:
			if string(*v) == sub {
				return history, ""
			}
		case *nostr.ClosedEnvelope:
			if v.SubscriptionID == sub {
				return history, v.Reason
			}
		}
		c.pending = append(c.pending, env)
	}
}

// once reads the history of filters and closes the subscription again.
func (c *scClient) once(sub string, filters ...nostr.Filter) []string {
	c.t.Helper()
	ids := c.mustReq(sub, filters...)
	closeEnv := nostr.CloseEnvelope(sub)
	c.send(&closeEnv)
	for {
		env := c.read()
		if v, ok := env.(*nostr.ClosedEnvelope); ok && v.SubscriptionID == sub {
			require.Equal(c.t, "", v.Reason)
			return ids
		}
		if v, ok := env.(*nostr.EventEnvelope); ok && *v.SubscriptionID == sub {
			continue // live, before the CLOSE took effect
		}
		c.pending = append(c.pending, env)
	}
}

func (c *scClient) mustReq(sub string, filters ...nostr.Filter) []string {
	c.t.Helper()
	evs, closed := c.req(sub, filters...)
	require.Equal(c.t, "", closed, "%s: REQ %s closed", c.name, sub)
	return scDescribe(evs)
}

// drain returns what was delivered since the last drain, per subscription:
// the REQ it sends matches nothing, and everything queued for the
// connection before it (every event whose OK was already seen) comes before
// its EOSE. CLOSED frames appear as "CLOSED:<reason>".
func (c *scClient) drain() map[string][]string {
	c.t.Helper()
	c.send(&nostr.ReqEnvelope{SubscriptionID: "probe", Filters: nostr.Filters{{IDs: []string{hex64(0xee)}}}})
	got := map[string][]string{}
	add := func(env nostr.Envelope) bool {
		switch v := env.(type) {
		case *nostr.EventEnvelope:
			got[*v.SubscriptionID] = append(got[*v.SubscriptionID], scDescribe([]nostr.Event{v.Event})...)
		case *nostr.ClosedEnvelope:
			got[v.SubscriptionID] = append(got[v.SubscriptionID], "CLOSED:"+v.Reason)
		case *nostr.EOSEEnvelope:
			return string(*v) == "probe"
		default:
			require.Failf(c.t, "unexpected frame", "%s: %v", c.name, env)
		}
		return false
	}
	pending := c.pending
	c.pending = nil
	for _, env := range pending {
		require.False(c.t, add(env))
	}
	for !add(c.read()) {
	}
	return got
}

// waitFor reads until sub receives the frame described by want ("CLOSED:…"
// or an event description), keeping everything else pending.
func (c *scClient) waitFor(sub, want string) {
	c.t.Helper()
	for {
		env := c.read()
		switch v := env.(type) {
		case *nostr.ClosedEnvelope:
			if v.SubscriptionID == sub && "CLOSED:"+v.Reason == want {
				return
			}
		case *nostr.EventEnvelope:
			if *v.SubscriptionID == sub && scDescribe([]nostr.Event{v.Event})[0] == want {
				return
			}
		}
		c.pending = append(c.pending, env)
	}
}

// scDescribe names events for comparison: membership notices by kind and
// channel (their ids are the relay's), everything else by id.
func scDescribe(evs []nostr.Event) []string {
	out := []string{}
	for _, ev := range evs {
		if ev.Kind == 44100 || ev.Kind == 44101 {
			h := ""
			if tag := ev.Tags.Find("h"); len(tag) > 1 {
				h = tag[1]
			}
			out = append(out, fmt.Sprintf("%d:%s", ev.Kind, h))
			continue
		}
		out = append(out, ev.ID)
	}
	return out
}

// TestScenario is a day in two communities: three users, an open and a
// private channel, a thread three levels deep, a reaction, an edit, a
// deletion and a removal while subscribed. Every step checks what each
// reader receives live, and the history where it changed.
func TestScenario(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := "ws://" + e.r.Host
	aliceKey, bobKey, carolKey := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	alice := scConnect(t, ctx, url, "alice", aliceKey)
	bob := scConnect(t, ctx, url, "bob", bobKey)
	carol := scConnect(t, ctx, url, "carol", carolKey)
	everyone := []*scClient{alice, bob, carol}
	open, secret := uuid.NewString(), uuid.NewString()

	// expect drains every client and compares with want (missing = nothing).
	expect := func(step string, want map[*scClient]map[string][]string) {
		t.Helper()
		for _, c := range everyone {
			w := want[c]
			if w == nil {
				w = map[string][]string{}
			}
			require.Equal(t, w, c.drain(), "%s: what %s received", step, c.name)
		}
	}
	channels := func(chs ...string) nostr.Filter {
		return nostr.Filter{Kinds: []int{5, 7, 9, 40003}, Tags: nostr.TagMap{"h": chs}}
	}
	notices := func(c *scClient) nostr.Filter {
		return nostr.Filter{Kinds: []int{44100, 44101}, Tags: nostr.TagMap{"p": {c.key.PubKey}}}
	}
	h := func(ch string) nostr.Tag { return nostr.Tag{"h", ch} }

	// Alice creates the open and the private channel.
	alice.mustPublish(alice.event(9007, "", h(open), nostr.Tag{"name", "general"}))
	alice.mustPublish(alice.event(9007, "", h(secret), nostr.Tag{"name", "secret"}, nostr.Tag{"visibility", "private"}))
	require.ElementsMatch(t, []string{"44100:" + open, "44100:" + secret}, alice.mustReq("notes", notices(alice)))
	for _, c := range []*scClient{bob, carol} {
		require.Empty(t, c.mustReq("notes", notices(c)))
	}
	for _, c := range everyone {
		require.Empty(t, c.mustReq("chans", channels(open, secret)))
	}
	require.Empty(t, alice.mustReq("secret", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {secret}}}))
	_, closed := carol.req("secret", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {secret}}})
	require.Equal(t, "restricted: not a channel member", closed)
	expect("subscribed", nil)

	// Bob joins the open channel; alice adds carol to the private one.
	bob.mustPublish(bob.event(9021, "", h(open)))
	expect("bob joins", map[*scClient]map[string][]string{bob: {"notes": {"44100:" + open}}})
	alice.mustPublish(alice.event(9000, "", h(secret), nostr.Tag{"p", carolKey.PubKey}))
	expect("carol added", map[*scClient]map[string][]string{carol: {"notes": {"44100:" + secret}}})
	// Carol's channel subscription was scoped when she was not a member; she
	// subscribes again to take the private channel in.
	require.Empty(t, carol.mustReq("chans", channels(open, secret)))
	require.Empty(t, carol.mustReq("secret", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {secret}}}))

	// A thread three levels deep in the open channel.
	root := alice.mustPublish(alice.event(9, "kick-off", h(open)))
	all := func(ids ...string) map[*scClient]map[string][]string {
		return map[*scClient]map[string][]string{alice: {"chans": ids}, bob: {"chans": ids}, carol: {"chans": ids}}
	}
	expect("root", all(root.ID))
	a := bob.mustPublish(bob.event(9, "first!", h(open), nostr.Tag{"e", root.ID, "", "reply"}))
	expect("reply 1", all(a.ID))
	b := carol.mustPublish(carol.event(9, "second", h(open), nostr.Tag{"e", root.ID, "", "root"}, nostr.Tag{"e", a.ID, "", "reply"}))
	expect("reply 2", all(b.ID))
	c := alice.mustPublish(alice.event(9, "third", h(open), nostr.Tag{"e", root.ID, "", "root"}, nostr.Tag{"e", b.ID, "", "reply"}))
	expect("reply 3", all(c.ID))
	for id, depth := range map[string]int{a.ID: 1, b.ID: 2, c.ID: 3} {
		require.Equal(t, depth, e.thRow(t, id).depth)
	}
	require.Equal(t, thRow{depth: 0, replies: 1, descendants: 3}, e.thRow(t, root.ID))

	// Carol posts in the private channel: bob sees nothing.
	m := carol.mustPublish(carol.event(9, "just us", h(secret)))
	members := func(ids ...string) map[*scClient]map[string][]string {
		return map[*scClient]map[string][]string{alice: {"chans": ids, "secret": ids}, carol: {"chans": ids, "secret": ids}}
	}
	expect("private message", members(m.ID))
	require.Empty(t, bob.once("peek", nostr.Filter{IDs: []string{m.ID}}))

	// Reactions: bob on the open root, not on the private message.
	plus := bob.mustPublish(bob.event(7, "+", nostr.Tag{"e", root.ID}, nostr.Tag{"p", aliceKey.PubKey}))
	expect("reaction", all(plus.ID))
	bob.refused(bob.event(7, "+", nostr.Tag{"e", m.ID}), "restricted: not a channel member")
	heart := alice.mustPublish(alice.event(7, "❤️", nostr.Tag{"e", m.ID}))
	expect("private reaction", map[*scClient]map[string][]string{alice: {"chans": {heart.ID}}, carol: {"chans": {heart.ID}}})

	// Carol edits her reply; bob may not.
	bob.refused(bob.event(40003, "hijacked", h(open), nostr.Tag{"e", b.ID}), "invalid: must be event author to edit")
	edit := carol.mustPublish(carol.event(40003, "second (edited)", h(open), nostr.Tag{"e", b.ID}))
	expect("edit", all(edit.ID))

	// Alice deletes her reply.
	del := alice.mustPublish(alice.event(5, "", nostr.Tag{"e", c.ID}))
	expect("deletion", all(del.ID))
	require.ElementsMatch(t, []string{root.ID, a.ID, b.ID}, bob.once("hist", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {open}}}))
	require.ElementsMatch(t, []string{root.ID, a.ID, b.ID, plus.ID, edit.ID, del.ID},
		carol.once("hist", nostr.Filter{Kinds: []int{5, 7, 9, 40003}, Tags: nostr.TagMap{"h": {open}}}))
	require.Equal(t, thRow{depth: 0, replies: 1, descendants: 2}, e.thRow(t, root.ID))

	// Alice removes carol from the private channel while she is subscribed.
	alice.mustPublish(alice.event(9001, "", h(secret), nostr.Tag{"p", carolKey.PubKey}))
	carol.waitFor("secret", "CLOSED:restricted: channel access revoked")
	expect("carol removed", map[*scClient]map[string][]string{carol: {"notes": {"44101:" + secret}}})
	m2 := alice.mustPublish(alice.event(9, "without carol", h(secret)))
	expect("after the removal", map[*scClient]map[string][]string{alice: {"chans": {m2.ID}, "secret": {m2.ID}}})
	carol.refused(carol.event(9, "hello?", h(secret)), "restricted: not a channel member")
	_, closed = carol.req("again", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {secret}}})
	require.Equal(t, "restricted: not a channel member", closed)
	require.ElementsMatch(t, []string{b.ID}, carol.once("mine", nostr.Filter{Kinds: []int{9}, Authors: []string{carolKey.PubKey}}))
	require.ElementsMatch(t, []string{m.ID, m2.ID}, alice.once("priv", nostr.Filter{Kinds: []int{9}, Tags: nostr.TagMap{"h": {secret}}}))
	// The open channel still reaches carol's narrowed subscription.
	late := bob.mustPublish(bob.event(9, "carol, still here?", h(open)))
	expect("open channel after the removal", all(late.ID))

	// A second community: the same channel id is a different channel, and
	// nothing crosses between the communities.
	hostB := e.r.Community(t, "b.test")
	aliceB, bobB := rpAuthed(t, e.r, hostB, aliceKey), rpAuthed(t, e.r, hostB, bobKey)
	aliceB.MustPublish(chCreateEv(t, aliceKey, open, eventtest.Tag("visibility", "private")))
	_, closedB, _ := bobB.Req("b", map[string]any{"#h": []string{open}})
	require.Equal(t, "restricted: not a channel member", closedB, "bob's membership in A means nothing in B")
	got, closedB, eose := bobB.Req("ids", map[string]any{"ids": []string{root.ID, a.ID, plus.ID}})
	require.True(t, eose, closedB)
	require.Empty(t, got)
	aliceB.MustPublish(chPutEv(t, aliceKey, open, bobKey.PubKey, ""))
	history, _ := chSubscribe(t, bobB, "b", map[string]any{"#h": []string{open}, "kinds": []int{9}})
	require.Empty(t, history, "A's messages are not in B's channel")
	inB := chMsg(t, aliceKey, open, "hello from B")
	aliceB.MustPublish(inB)
	chUntilEvent(t, bobB, "b", inB.ID)
	expect("a message in B", nil)
	require.Empty(t, bob.once("fromB", nostr.Filter{IDs: []string{inB.ID}}))
	require.Equal(t, []string{"44100:" + open}, bob.once("notes2", notices(bob)), "B's notices stay in B")
}
