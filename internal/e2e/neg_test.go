package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
	gonegentropy "github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// negRecord is one record of a client's local set.
type negRecord struct {
	id string
	at int64
}

func negRecords(evs ...event.Event) []negRecord {
	out := make([]negRecord, len(evs))
	for i, ev := range evs {
		out[i] = negRecord{ev.ID, ev.CreatedAt}
	}
	return out
}

// negOutcome is what one reconciliation taught the client.
type negOutcome struct {
	have, need []string // ids only the client has; ids only the relay has
	rounds     int
	err        string // the NEG-ERR reason, if any
}

// negSync reconciles local against the relay's set of filter through c,
// with go-nostr's negentropy as the client: NEG-OPEN, NEG-MSG until the
// client is done, NEG-CLOSE.
func (c *scClient) negSync(sub string, filter nostr.Filter, local []negRecord) negOutcome {
	c.t.Helper()
	var o negOutcome
	neg, collected := negClient(local, 64<<10, &o.have, &o.need)
	open, err := nip77.OpenEnvelope{SubscriptionID: sub, Filter: filter, Message: neg.Start()}.MarshalJSON()
	require.NoError(c.t, err)
	require.NoError(c.t, c.conn.WriteMessage(c.ctx, open))
	for {
		o.rounds++
		require.Less(c.t, o.rounds, 100)
		switch env := c.readNeg().(type) {
		case *nip77.ErrorEnvelope:
			require.Equal(c.t, sub, env.SubscriptionID)
			o.err = env.Reason
			close(neg.Haves)
			close(neg.HaveNots)
			collected()
			return o
		case *nip77.MessageEnvelope:
			require.Equal(c.t, sub, env.SubscriptionID)
			next, err := neg.Reconcile(env.Message)
			require.NoError(c.t, err)
			if next == "" {
				collected()
				closeMsg, _ := nip77.CloseEnvelope{SubscriptionID: sub}.MarshalJSON()
				require.NoError(c.t, c.conn.WriteMessage(c.ctx, closeMsg))
				return o
			}
			msg, err := nip77.MessageEnvelope{SubscriptionID: sub, Message: next}.MarshalJSON()
			require.NoError(c.t, err)
			require.NoError(c.t, c.conn.WriteMessage(c.ctx, msg))
		default:
			c.t.Fatalf("unexpected %T", env)
		}
	}
}

// readNeg reads the next frame, which must be a NIP-77 message.
func (c *scClient) readNeg() nostr.Envelope {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(c.t, c.conn.ReadMessage(ctx, &buf), "%s: waiting for a NEG frame", c.name)
	env := nip77.ParseNegMessage(buf.String())
	require.NotNil(c.t, env, "not a NEG frame: %s", buf.String())
	return env
}

func randomID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func idsOf(evs ...event.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func sortedIDs(ids []string) []string {
	out := append([]string{}, ids...)
	slices.Sort(out)
	return out
}

// TestNegentropy reconciles over a real socket with go-nostr's negentropy
// as the client (docs/PROTOCOL.md §7.13): bob, a member of one private
// channel and not of another, learns exactly the ids he lacks of what a
// REQ would show him and the ids he has that the relay does not; the
// other private channel's events never appear. The record cap is checked
// at the cap and one over.
func TestNegentropy(t *testing.T) {
	t.Parallel()
	e := chSetup(t, map[string]string{"BUZZ_NEG_MAX_RECORDS": "30"})
	alice, bobKey := eventtest.NewKey(), eventtest.NewKey()
	aw := e.dial(t, alice)
	open := chCreate(t, aw, alice)
	mine := chCreate(t, aw, alice, chPrivate)
	theirs := chCreate(t, aw, alice, chPrivate)
	aw.MustPublish(chPutEv(t, alice, mine, bobKey.PubKey, ""))
	post := func(kind int, opts ...eventtest.Option) event.Event {
		ev := alice.Signed(t, kind, append(opts, chNonce())...)
		aw.MustPublish(ev)
		return ev
	}
	var inOpen, inMine, inTheirs, global []event.Event
	for i := range 10 {
		at := eventtest.At(time.Now().Unix() - int64(100-i))
		inOpen = append(inOpen, post(9, eventtest.Channel(open), at))
		inMine = append(inMine, post(9, eventtest.Channel(mine), at))
		inTheirs = append(inTheirs, post(9, eventtest.Channel(theirs), at))
		if i < 5 {
			global = append(global, post(1, at))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bob := scConnect(t, ctx, "ws://"+e.r.Host, "bob", bobKey)
	// Bob holds some of what he may read, misses the rest, and has two
	// events the relay never saw.
	local := negRecords(inOpen[:6]...)
	local = append(local, negRecords(inMine[3:]...)...)
	local = append(local, negRecords(global[1:]...)...)
	extra := []negRecord{{randomID(), time.Now().Unix() - 50}, {randomID(), time.Now().Unix() - 1000}}
	local = append(local, extra...)
	wantNeed := append(idsOf(inOpen[6:]...), idsOf(inMine[:3]...)...)
	wantNeed = append(wantNeed, global[0].ID)

	o := bob.negSync("sync", nostr.Filter{Kinds: []int{1, 9}}, local)
	require.Empty(t, o.err)
	require.Equal(t, sortedIDs(wantNeed), sortedIDs(o.need), "the ids bob lacks")
	require.Equal(t, sortedIDs([]string{extra[0].id, extra[1].id}), sortedIDs(o.have), "the ids only bob has")
	for _, id := range idsOf(inTheirs...) {
		require.NotContains(t, o.need, id, "an event of a private channel bob is not in")
	}

	// Bob holding the other channel's events learns nothing about them:
	// to the relay they are ids it does not have for him.
	withTheirs := append(slices.Clone(local), negRecords(inTheirs...)...)
	o = bob.negSync("sync", nostr.Filter{Kinds: []int{1, 9}}, withTheirs)
	require.Empty(t, o.err)
	require.Subset(t, o.have, idsOf(inTheirs...))

	// A channel-scoped set, and the private channel bob is not in refused
	// as a REQ is.
	o = bob.negSync("mine", nostr.Filter{Tags: nostr.TagMap{"h": {mine}}, Kinds: []int{9}}, nil)
	require.Equal(t, sortedIDs(idsOf(inMine...)), sortedIDs(o.need))
	o = bob.negSync("theirs", nostr.Filter{Tags: nostr.TagMap{"h": {theirs}}, Kinds: []int{9}}, nil)
	require.Equal(t, wire.MsgNotChannelMember, o.err)
	require.Empty(t, o.need)
	// The gates of a REQ: p-gated kinds without #p=[self].
	o = bob.negSync("gated", nostr.Filter{Kinds: []int{1059}}, nil)
	require.Equal(t, wire.MsgPGateREQ, o.err)

	// The record cap: 25 records now, 30 at the cap, 31 over it.
	for range 5 {
		global = append(global, post(1))
	}
	o = bob.negSync("cap", nostr.Filter{Kinds: []int{1, 9}}, nil)
	require.Empty(t, o.err, "at the cap")
	require.Len(t, o.need, 30)
	post(1)
	o = bob.negSync("cap", nostr.Filter{Kinds: []int{1, 9}}, nil)
	require.Equal(t, wire.NegTooManyRecords(30), o.err, "one over the cap")
	require.Empty(t, o.need)
}

// negNext reads frames until a NEG-MSG or NEG-ERR.
func negNext(t *testing.T, w *relaytest.WS) []any {
	t.Helper()
	for {
		msg := w.Next()
		if msg[0] == "NEG-MSG" || msg[0] == "NEG-ERR" {
			return msg
		}
	}
}

// emptyOpen is the initial message of a client with no records: the
// version and one IdList range to infinity with no ids.
const emptyOpen = "6100000200"

// TestNegentropySessions: the session's refusals over a raw socket, each
// leaving the connection usable: authentication, hex, version, the
// message size at the cap and one over, the open sessions at the cap and
// one over, NEG-CLOSE freeing a session, replacement by id, the idle
// timeout.
func TestNegentropySessions(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_NEG_MAX_SESSIONS": "2", "BUZZ_NEG_IDLE_TIMEOUT_MS": "1000",
		"BUZZ_NEG_MAX_MESSAGE_BYTES": "4096"})
	filter := map[string]any{"kinds": []int{1}}

	anon := r.Dial(t, "")
	anon.Send("NEG-OPEN", "n", filter, emptyOpen)
	require.Equal(t, []any{"NEG-ERR", "n", wire.MsgNotAuthenticated}, negNext(t, anon))

	key := eventtest.NewKey()
	w := rpAuthed(t, r, "", key)
	ev := key.Signed(t, 1, chNonce())
	w.MustPublish(ev)
	one := "6100000201" + ev.ID // an IdList holding the one event

	w.Send("NEG-OPEN", "a", filter, "zz")
	require.Equal(t, []any{"NEG-ERR", "a", wire.MsgNegBadHex}, negNext(t, w))
	w.Send("NEG-OPEN", "a", filter, "62")
	require.Equal(t, []any{"NEG-ERR", "a", wire.MsgNegVersion}, negNext(t, w))
	w.Send("NEG-OPEN", "a", filter, "6100ff")
	require.Equal(t, []any{"NEG-ERR", "a", wire.MsgNegMalformed}, negNext(t, w))
	w.Send("NEG-MSG", "a", emptyOpen)
	require.Equal(t, []any{"NEG-ERR", "a", wire.MsgNegNoSession}, negNext(t, w), "a refused NEG-OPEN opens nothing")
	w.Send("NEG-OPEN", "a", filter, strings.Repeat("00", 4097))
	require.Equal(t, []any{"NEG-ERR", "a", wire.NegMessageTooLarge(4097, 4096)}, negNext(t, w))
	// At the cap: a message of 1,365 skipped ranges, answered with none.
	w.Send("NEG-OPEN", "a", filter, "61"+strings.Repeat("000000", 1365))
	require.Equal(t, []any{"NEG-MSG", "a", "61"}, negNext(t, w), "a message at the cap is served")
	w.Send("NEG-CLOSE", "a")

	// Two sessions at the cap; a third is refused until one is closed.
	w.Send("NEG-OPEN", "a", filter, emptyOpen)
	require.Equal(t, []any{"NEG-MSG", "a", "6100000201" + ev.ID}, negNext(t, w), "the relay's ids")
	w.Send("NEG-OPEN", "b", filter, one)
	require.Equal(t, []any{"NEG-MSG", "b", "6100000201" + ev.ID}, negNext(t, w))
	w.Send("NEG-OPEN", "c", filter, emptyOpen)
	require.Equal(t, []any{"NEG-ERR", "c", wire.MsgNegTooManySessions}, negNext(t, w))
	w.Send("NEG-OPEN", "b", filter, emptyOpen)
	require.Equal(t, "NEG-MSG", negNext(t, w)[0], "a NEG-OPEN under an open id replaces it")
	w.Send("NEG-CLOSE", "a")
	w.Send("NEG-MSG", "a", emptyOpen)
	require.Equal(t, []any{"NEG-ERR", "a", wire.MsgNegNoSession}, negNext(t, w), "NEG-CLOSE ends the session")
	w.Send("NEG-OPEN", "c", filter, emptyOpen)
	require.Equal(t, "NEG-MSG", negNext(t, w)[0], "NEG-CLOSE freed a place")
	w.Send("NEG-MSG", "c", "zz")
	require.Equal(t, []any{"NEG-ERR", "c", wire.MsgNegBadHex}, negNext(t, w))
	w.Send("NEG-MSG", "c", emptyOpen)
	require.Equal(t, []any{"NEG-ERR", "c", wire.MsgNegNoSession}, negNext(t, w), "an error ends the session")

	// The idle timeout: b, untouched since its NEG-OPEN, is closed.
	start := time.Now()
	require.Equal(t, []any{"NEG-ERR", "b", wire.MsgNegIdle}, negNext(t, w))
	require.Less(t, time.Since(start), 3*time.Second)

	// The connection is still usable.
	evs, closed, eose := w.Req("r", map[string]any{"ids": []string{ev.ID}})
	require.True(t, eose, closed)
	require.Len(t, evs, 1)
}

// TestNegentropyQuota: NEG-OPEN and NEG-MSG are frames of the WebSocket
// quota, as REQ and COUNT are: five in a window at 1 a second, the sixth
// refused with NEG-ERR, which ends the session.
func TestNegentropyQuota(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC": "1"})
	w := rpAuthed(t, r, "", eventtest.NewKey())
	filter := map[string]any{"kinds": []int{1}}
	w.Send("NEG-OPEN", "q", filter, emptyOpen) // 1
	require.Equal(t, []any{"NEG-MSG", "q", emptyOpen}, negNext(t, w))
	for range 4 { // 2–5
		w.Send("NEG-MSG", "q", emptyOpen)
		require.Equal(t, []any{"NEG-MSG", "q", emptyOpen}, negNext(t, w))
	}
	w.Send("NEG-MSG", "q", emptyOpen)
	msg := negNext(t, w)
	require.Equal(t, []any{"NEG-ERR", "q"}, msg[:2])
	requireQuota(t, msg[2].(string), 1, 5)
}

// negClient is go-nostr's negentropy client over the records local, with
// frames of at most frame bytes: the ids only it has are appended to *have
// and those it lacks to *need as reconciliation finds them. collected
// returns once both lists are complete (the client is done, or its
// channels were closed).
func negClient(local []negRecord, frame int, have, need *[]string) (neg *gonegentropy.Negentropy, collected func()) {
	vec := vector.New()
	for _, r := range local {
		vec.Insert(nostr.Timestamp(r.at), r.id)
	}
	vec.Seal()
	neg = gonegentropy.New(vec, frame)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for id := range neg.Haves {
			*have = append(*have, id)
		}
	}()
	go func() {
		defer wg.Done()
		for id := range neg.HaveNots {
			*need = append(*need, id)
		}
	}()
	return neg, wg.Wait
}
