package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
)

// The isolation sweep publishes the same kind of data in two communities
// of one relay and probes every read path from community B for community
// A's data: by id, author, text, tag and channel id. Each probe runs three
// times: in A for A's data (the probe finds something), in B for B's twin
// data (the probe works in B), and in B for A's data, whose raw answer
// (frames and bodies, not only parsed events) must hold none of A's ids,
// A-only pubkeys, unique words, channel id or channel name.

// swWorld is one community's seeded data.
type swWorld struct {
	host, cid string
	// owner owns the community and its channel; both is a member of A and B.
	owner, both eventtest.Key
	ch, chName  string
	word        string // unique to this community's content and #t tags
	create      event.Event
	root, reply event.Event // kind 9 messages in ch: a root and a thread reply by both
	reaction    event.Event
	note        event.Event // kind 1 with #e root, #p owner, #t word
	readState   event.Event // NIP-RS read state of both
}

// swWord returns a lower-case word that occurs nowhere else.
func swWord(prefix string) string {
	return prefix + strings.ToLower(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return 'a' + (r - '0')
		}
		return r
	}, rand.Text()[:12]))
}

func (w *swWorld) ids() []string {
	return []string{w.create.ID, w.root.ID, w.reply.ID, w.reaction.ID, w.note.ID, w.readState.ID}
}

// markers are the strings of w that must never show in another
// community's answers, each with a label for the failure message. The
// shared member's pubkey is not one: it is legitimately B's too.
func (w *swWorld) markers() map[string]string {
	m := map[string]string{
		w.owner.PubKey: "owner pubkey", w.ch: "channel id", w.chName: "channel name", w.word: "unique word",
		w.readState.Content: "read-state content",
	}
	for _, id := range w.ids() {
		m[id] = "event id"
	}
	return m
}

// swBundle is the relay, the two communities and their data.
type swBundle struct {
	r    *relaytest.Relay
	a, b *swWorld
}

func swSetup(t *testing.T) *swBundle {
	t.Helper()
	r := relaytest.Start(t, map[string]string{"BUZZ_AUDIT_ENABLED": "true"})
	both := eventtest.NewKey()
	bd := &swBundle{r: r}
	bd.a = swSeed(t, r, "iso-a.test", eventtest.NewKey(), both)
	bd.b = swSeed(t, r, "iso-b.test", eventtest.NewKey(), both)
	return bd
}

// pair seeds two more communities on the same relay, in the same shape.
func (bd *swBundle) pair(t *testing.T, name string) *swBundle {
	t.Helper()
	both := eventtest.NewKey()
	return &swBundle{r: bd.r, a: swSeed(t, bd.r, "iso-"+name+"-a.test", eventtest.NewKey(), both),
		b: swSeed(t, bd.r, "iso-"+name+"-b.test", eventtest.NewKey(), both)}
}

// swCountProbes are the event probes COUNT serves: both COUNT doors
// refuse search in every community ("search is not supported in COUNT").
func swCountProbes() []swProbe {
	var out []swProbe
	for _, p := range swEventProbes() {
		if !strings.Contains(p.name, "Search") {
			out = append(out, p)
		}
	}
	return out
}

// swSeed creates a community owned by owner, with both as a member, and
// publishes its data over the WebSocket.
func swSeed(t *testing.T, r *relaytest.Relay, name string, owner, both eventtest.Key) *swWorld {
	t.Helper()
	ctx := context.Background()
	host := name + ":" + strconv.Itoa(r.Port)
	com, err := r.App.Store().CommunityAdd(ctx, store.CommunityAddParams{Host: host, Owner: owner.PubKey})
	require.NoError(t, err)
	_, err = r.App.Store().RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{
		CommunityID: com.ID, Pubkey: both.PubKey, Role: "member", AddedBy: "cli"})
	require.NoError(t, err)
	w := &swWorld{host: host, cid: com.ID, owner: owner, both: both, ch: uuid.NewString(), word: swWord("isoword")}
	w.chName = swWord("isoname")
	wo, wb := swDial(t, r, host, owner), swDial(t, r, host, both)
	base := time.Now().Unix() - 30
	w.create = owner.Signed(t, event.KindCreateGroup, eventtest.Channel(w.ch), eventtest.Tag("name", w.chName), eventtest.At(base))
	wo.MustPublish(w.create)
	w.root = owner.Signed(t, 9, eventtest.Channel(w.ch), eventtest.Content("root "+w.word), eventtest.At(base+1))
	wo.MustPublish(w.root)
	w.reply = both.Signed(t, 9, eventtest.Channel(w.ch), eventtest.Content("reply "+w.word), eventtest.At(base+2),
		eventtest.Tag("e", w.root.ID, "", "root"), eventtest.Tag("e", w.root.ID, "", "reply"))
	wb.MustPublish(w.reply)
	w.reaction = owner.Signed(t, 7, eventtest.Content("+"), eventtest.Channel(w.ch), eventtest.Tag("e", w.root.ID),
		eventtest.Tag("p", owner.PubKey), eventtest.At(base+3))
	wo.MustPublish(w.reaction)
	w.note = owner.Signed(t, 1, eventtest.Content("note "+w.word), eventtest.Tag("e", w.root.ID),
		eventtest.Tag("p", owner.PubKey), eventtest.Tag("t", w.word), eventtest.At(base+4))
	wo.MustPublish(w.note)
	w.readState = rsEvent(t, both, newSlot(), base+5)
	wb.MustPublish(w.readState)
	return w
}

func swDial(t *testing.T, r *relaytest.Relay, host string, key eventtest.Key) *relaytest.WS {
	t.Helper()
	w := r.Dial(t, host)
	w.Auth(key)
	return w
}

// swNoLeak fails when raw holds any marker of w.
func swNoLeak(t *testing.T, w *swWorld, raw, what string) {
	t.Helper()
	for m, label := range w.markers() {
		require.NotContains(t, raw, m, "%s: community %s's %s leaked into %s", what, w.host, label, raw)
	}
}

// swHas fails unless raw holds every id (the probe is not vacuous).
func swHas(t *testing.T, raw, what string, ids ...string) {
	t.Helper()
	require.NotEmpty(t, ids)
	for _, id := range ids {
		require.Contains(t, raw, id, "%s finds nothing even where the data is: %s", what, raw)
	}
}

// swProbe is one filter asked of a world, and what it finds there.
type swProbe struct {
	name   string
	filter func(w *swWorld) map[string]any
	reader func(w *swWorld) eventtest.Key
	want   func(w *swWorld) []string
	// specific is false for a filter that names nothing of the world
	// (kinds only, the shared author): in B it rightly finds B's data.
	specific bool
}

// swOwner reads as the community's owner.
func swOwner(w *swWorld) eventtest.Key { return w.owner }

// swEventProbes are the plain filters every event read path is asked.
func swEventProbes() []swProbe {
	return []swProbe{
		{name: "Ids", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"ids": w.ids(), "kinds": []int{1, 7, 9, 9007, 30078}}
			},
			want: func(w *swWorld) []string {
				return []string{w.create.ID, w.root.ID, w.reply.ID, w.reaction.ID, w.note.ID}
			}},
		{name: "Authors", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"authors": []string{w.owner.PubKey}, "kinds": []int{1, 7, 9}}
			},
			want: func(w *swWorld) []string { return []string{w.root.ID, w.reaction.ID, w.note.ID} }},
		{name: "SharedAuthor", reader: swOwner,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"authors": []string{w.both.PubKey}, "kinds": []int{9}}
			},
			want: func(w *swWorld) []string { return []string{w.reply.ID} }},
		{name: "Kinds", reader: swOwner,
			filter: func(w *swWorld) map[string]any { return map[string]any{"kinds": []int{1, 7, 9, 9007}, "limit": 500} },
			want:   func(w *swWorld) []string { return []string{w.root.ID, w.reply.ID, w.reaction.ID, w.note.ID} }},
		{name: "TagE", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"#e": []string{w.root.ID}, "kinds": []int{1, 7, 9}}
			},
			want: func(w *swWorld) []string { return []string{w.reply.ID, w.reaction.ID, w.note.ID} }},
		{name: "TagP", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"#p": []string{w.owner.PubKey}, "kinds": []int{1, 7}}
			},
			want: func(w *swWorld) []string { return []string{w.reaction.ID, w.note.ID} }},
		{name: "TagT", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any { return map[string]any{"#t": []string{w.word}, "kinds": []int{1}} },
			want:   func(w *swWorld) []string { return []string{w.note.ID} }},
		{name: "ChannelID", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any { return map[string]any{"#h": []string{w.ch}, "kinds": []int{9, 9007}} },
			want:   func(w *swWorld) []string { return []string{w.create.ID, w.root.ID, w.reply.ID} }},
		{name: "ChannelMetadata", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"kinds": []int{event.KindGroupMetadata, event.KindGroupAdmins, event.KindGroupMembers},
					"#d": []string{w.ch}}
			},
			want: func(w *swWorld) []string { return []string{w.chName, w.owner.PubKey} }},
		{name: "ReadState", reader: func(w *swWorld) eventtest.Key { return w.both },
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{w.both.PubKey}}
			},
			want: func(w *swWorld) []string { return []string{w.readState.ID} }},
		{name: "Search", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any { return map[string]any{"search": w.word, "kinds": []int{9}} },
			want:   func(w *swWorld) []string { return []string{w.root.ID, w.reply.ID} }},
		{name: "SearchAuthors", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"search": w.word, "kinds": []int{9}, "authors": []string{w.owner.PubKey}}
			},
			want: func(w *swWorld) []string { return []string{w.root.ID} }},
		{name: "SearchIDs", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"search": w.word, "kinds": []int{9}, "ids": []string{w.reply.ID}}
			},
			want: func(w *swWorld) []string { return []string{w.reply.ID} }},
		{name: "SharedSearch", reader: swOwner,
			filter: func(w *swWorld) map[string]any { return map[string]any{"search": "reply", "kinds": []int{9}} },
			want:   func(w *swWorld) []string { return []string{w.reply.ID} }},
	}
}

// swWindowProbes are the NIP-CW window and summary filters of /query.
func swWindowProbes() []swProbe {
	return []swProbe{
		{name: "ThreadWindow", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"thread_window": true, "#h": []string{w.ch}, "#e": []string{w.root.ID},
					"kinds": []int{9}, "limit": 50, "include_aux": true}
			},
			want: func(w *swWorld) []string { return []string{w.reply.ID} }},
		{name: "ChannelWindow", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"top_level": true, "#h": []string{w.ch}, "kinds": []int{9}, "limit": 50,
					"include_summaries": true}
			},
			want: func(w *swWorld) []string { return []string{w.root.ID} }},
		{name: "ResolveThreadRoots", reader: swOwner, specific: true,
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"resolve_thread_roots": true, "#h": []string{w.ch}, "kinds": []int{39005},
					"ids": []string{w.reply.ID}}
			},
			want: func(w *swWorld) []string { return []string{w.root.ID} }},
	}
}

// swPath reads one filter through one read path as reader on host and
// returns the raw answer and the number of results it reports.
type swPath func(t *testing.T, r *relaytest.Relay, host string, reader eventtest.Key, filter map[string]any) (string, int)

// swFrames sends verb (REQ or COUNT) with filters and returns the raw
// frames of the subscription up to EOSE, CLOSED or COUNT, and the number
// of EVENT frames (or the count). A REQ stays open.
func swFrames(t *testing.T, w *relaytest.WS, verb, sub string, filters ...any) (string, int) {
	t.Helper()
	w.Send(append([]any{verb, sub}, filters...)...)
	var raw strings.Builder
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, b, err := w.C.Read(ctx)
		cancel()
		require.NoError(t, err, "%s %s: no answer", verb, sub)
		raw.Write(b)
		raw.WriteByte('\n')
		var msg []json.RawMessage
		require.NoError(t, json.Unmarshal(b, &msg), "%s", b)
		if len(msg) < 2 || string(msg[1]) != strconv.Quote(sub) {
			continue
		}
		var typ string
		require.NoError(t, json.Unmarshal(msg[0], &typ))
		switch typ {
		case "EVENT":
			n++
		case "EOSE", "CLOSED":
			return raw.String(), n
		case "COUNT":
			var c struct{ Count int }
			require.NoError(t, json.Unmarshal(msg[2], &c))
			return raw.String(), c.Count
		}
	}
}

func swREQ(t *testing.T, r *relaytest.Relay, host string, reader eventtest.Key, filter map[string]any) (string, int) {
	t.Helper()
	return swFrames(t, swDial(t, r, host, reader), "REQ", "sweep", filter)
}

func swCOUNT(t *testing.T, r *relaytest.Relay, host string, reader eventtest.Key, filter map[string]any) (string, int) {
	t.Helper()
	return swFrames(t, swDial(t, r, host, reader), "COUNT", "sweep", filter)
}

// swHTTP posts one filter to path (/query or /count) with a NIP-98 token.
func swHTTP(path string) swPath {
	return func(t *testing.T, r *relaytest.Relay, host string, reader eventtest.Key, filter map[string]any) (string, int) {
		t.Helper()
		body, err := json.Marshal([]any{filter})
		require.NoError(t, err)
		status, resp := r.HTTP(t, host, http.MethodPost, path, &reader, body)
		raw := strconv.Itoa(status) + " " + string(resp)
		if status != http.StatusOK {
			return raw, 0
		}
		if path == "/count" {
			var c struct{ Count int }
			require.NoError(t, json.Unmarshal(resp, &c), raw)
			return raw, c.Count
		}
		var evs []json.RawMessage
		if err := json.Unmarshal(resp, &evs); err != nil {
			var snap struct{ Events []json.RawMessage }
			require.NoError(t, json.Unmarshal(resp, &snap), raw)
			evs = snap.Events
		}
		return raw, len(evs)
	}
}

// swSweep runs every probe through path: in A for A, in B for B, in B for A.
func (bd *swBundle) swSweep(t *testing.T, path swPath, counts bool, probes []swProbe) {
	t.Helper()
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			a, b := bd.a, bd.b
			own, nOwn := path(t, bd.r, a.host, p.reader(a), p.filter(a))
			twin, nTwin := path(t, bd.r, b.host, p.reader(b), p.filter(b))
			cross, nCross := path(t, bd.r, b.host, p.reader(b), p.filter(a))
			swNoLeak(t, a, cross, p.name+" from B")
			swNoLeak(t, b, own, p.name+" from A")
			if counts {
				require.GreaterOrEqual(t, nOwn, len(p.want(a)), "in A: %s", own)
				require.GreaterOrEqual(t, nTwin, len(p.want(b)), "in B: %s", twin)
				if p.specific {
					require.Zero(t, nCross, "B counts A's data: %s", cross)
				} else {
					require.Equal(t, nTwin, nCross, "B's count of its own data changes with A's filter: %s", cross)
				}
				return
			}
			swHas(t, own, p.name+" in A", p.want(a)...)
			swHas(t, twin, p.name+" in B", p.want(b)...)
			if p.specific {
				require.Zero(t, nCross, "B returns results for A's data: %s", cross)
			}
		})
	}
}

// TestIsolationSweep is the isolation sweep of issue 16: every read path
// that exists (REQ, COUNT, NIP-50 search, POST /query and /count, thread
// and channel windows, the read-state snapshot, live delivery, refusal
// texts, the audit CLI's output) asked from B for A's data by id, author,
// text, tag and channel id, with zero leaks.
func TestIsolationSweep(t *testing.T) {
	t.Parallel()
	bd := swSetup(t)

	t.Run("REQ", func(t *testing.T) {
		t.Parallel()
		// The WebSocket serves window fields as the plain filter that remains.
		bd.swSweep(t, swREQ, false, append(swEventProbes(), swWindowProbes()[:2]...))
	})
	t.Run("COUNT", func(t *testing.T) {
		t.Parallel()
		bd.swSweep(t, swCOUNT, true, swCountProbes())
	})
	t.Run("Query", func(t *testing.T) {
		t.Parallel()
		bd.swSweep(t, swHTTP("/query"), false, swEventProbes())
	})
	t.Run("Count", func(t *testing.T) {
		t.Parallel()
		bd.swSweep(t, swHTTP("/count"), true, swCountProbes())
	})
	t.Run("Windows", func(t *testing.T) {
		t.Parallel()
		bd.swSweep(t, swHTTP("/query"), false, swWindowProbes())
	})
	t.Run("Snapshot", func(t *testing.T) {
		t.Parallel()
		bd.swSweep(t, swHTTP("/query"), false, []swProbe{{name: "ReadStateSnapshot",
			reader: func(w *swWorld) eventtest.Key { return w.both },
			filter: func(w *swWorld) map[string]any {
				return map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{w.both.PubKey}, "read_state_snapshot": 1}
			},
			want: func(w *swWorld) []string { return []string{w.readState.ID, w.readState.Content} }}})
	})
	// These two publish more in A, so each has a pair of communities of
	// its own and the stored sweeps above see a fixed data set.
	t.Run("LiveDelivery", func(t *testing.T) {
		t.Parallel()
		bd.pair(t, "live").swLive(t)
	})
	t.Run("ErrorTexts", func(t *testing.T) {
		t.Parallel()
		bd.pair(t, "err").swErrors(t)
	})
	t.Run("AuditCLI", func(t *testing.T) {
		t.Parallel()
		bd.swAudit(t)
	})
}

// swLive opens subscriptions in A and B that match A's data, publishes
// more of it in A, then a sentinel in B that a second subscription on
// each B connection matches: a connection's frames go out in publish
// order, so once it has the sentinel it has had every chance to receive
// A's events, and it must have received none.
func (bd *swBundle) swLive(t *testing.T) {
	a, b, r := bd.a, bd.b, bd.r
	word := swWord("isolive")
	// Markers of the new events join A's for the checks.
	liveMsg := a.owner.Signed(t, 9, eventtest.Channel(a.ch), eventtest.Content("live "+word+" "+a.word))
	liveReply := a.both.Signed(t, 9, eventtest.Channel(a.ch), eventtest.Content("live reply "+word),
		eventtest.Tag("e", a.root.ID, "", "root"), eventtest.Tag("e", a.root.ID, "", "reply"))
	liveNote := a.owner.Signed(t, 1, eventtest.Content("live note "+word), eventtest.Tag("e", a.root.ID),
		eventtest.Tag("p", a.owner.PubKey), eventtest.Tag("t", a.word))
	liveRS := rsEvent(t, a.both, newSlot(), time.Now().Unix())
	published := []event.Event{liveMsg, liveReply, liveNote, liveRS}
	sentinel := b.owner.Signed(t, 1, eventtest.Content("sentinel of B"))

	type sub struct {
		name   string
		reader eventtest.Key
		filter map[string]any
		want   []string // of the published events, what the A subscription receives
	}
	// Live, a channel message reaches the subscriptions that name its
	// channel (#h), so the channel kinds are asked with #h.
	h := func(f map[string]any) map[string]any {
		f["#h"], f["kinds"] = []string{a.ch}, []int{9}
		return f
	}
	subs := []sub{
		{"Authors", a.owner, map[string]any{"authors": []string{a.owner.PubKey}, "kinds": []int{1}}, []string{liveNote.ID}},
		{"AuthorsInChannel", a.owner, h(map[string]any{"authors": []string{a.owner.PubKey}}), []string{liveMsg.ID}},
		{"SharedAuthorInChannel", a.owner, h(map[string]any{"authors": []string{a.both.PubKey}}), []string{liveReply.ID}},
		{"Kinds", a.owner, map[string]any{"kinds": []int{1}}, []string{liveNote.ID}},
		{"TagE", a.owner, map[string]any{"#e": []string{a.root.ID}, "kinds": []int{1}}, []string{liveNote.ID}},
		{"TagEInChannel", a.owner, h(map[string]any{"#e": []string{a.root.ID}}), []string{liveReply.ID}},
		{"TagP", a.owner, map[string]any{"#p": []string{a.owner.PubKey}, "kinds": []int{1}}, []string{liveNote.ID}},
		{"TagT", a.owner, map[string]any{"#t": []string{a.word}, "kinds": []int{1}}, []string{liveNote.ID}},
		{"ChannelID", a.owner, h(map[string]any{}), []string{liveMsg.ID, liveReply.ID}},
		{"ReadState", a.both, map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{a.both.PubKey}}, []string{liveRS.ID}},
	}
	sentinelFilter := map[string]any{"ids": []string{sentinel.ID}, "kinds": []int{1}}
	type open struct {
		sub
		inA, inB *relaytest.WS
	}
	var opened []open
	for _, s := range subs {
		o := open{sub: s, inA: swDial(t, r, a.host, s.reader)}
		_, n := swFrames(t, o.inA, "REQ", s.name, s.filter)
		require.NotZero(t, n, "%s finds A's stored data in A", s.name)
		bReader := b.owner
		if s.reader.PubKey == a.both.PubKey {
			bReader = b.both
		}
		o.inB = swDial(t, r, b.host, bReader)
		raw, _ := swFrames(t, o.inB, "REQ", s.name, s.filter)
		swNoLeak(t, a, raw, "stored "+s.name+" from B")
		swFrames(t, o.inB, "REQ", "sentinel", sentinelFilter)
		opened = append(opened, o)
	}

	pa, pb := swDial(t, r, a.host, a.owner), swDial(t, r, a.host, a.both)
	for _, ev := range published {
		if ev.PubKey == a.both.PubKey {
			pb.MustPublish(ev)
		} else {
			pa.MustPublish(ev)
		}
	}
	swDial(t, r, b.host, b.owner).MustPublish(sentinel)

	markers := func(raw, what string) {
		t.Helper()
		swNoLeak(t, a, raw, what)
		for _, ev := range published {
			require.NotContains(t, raw, ev.ID, "%s: A's live event leaked: %s", what, raw)
		}
		require.NotContains(t, raw, word, "%s: A's live word leaked: %s", what, raw)
	}
	for _, o := range opened {
		// B: everything up to the sentinel, none of it A's.
		var raw strings.Builder
		for {
			_, b, err := o.inB.C.Read(readCtx(t))
			require.NoError(t, err, "%s: B's sentinel never came: %s", o.name, raw.String())
			raw.Write(b)
			if strings.Contains(string(b), sentinel.ID) {
				break
			}
		}
		markers(raw.String(), "live "+o.name+" from B")
		// A: the same subscription receives A's new events.
		var got []string
		for len(got) < len(o.want) {
			msg, err := o.inA.NextErr(10 * time.Second)
			require.NoError(t, err, "%s: A's subscription got %v of %v", o.name, got, o.want)
			if msg[0] == "EVENT" && msg[1] == o.name {
				id := msg[2].(map[string]any)["id"].(string)
				require.Contains(t, o.want, id)
				got = append(got, id)
			}
		}
	}
}

// readCtx is a bounded read context for one frame.
func readCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// swErrors asks B to act on A's channel and events. A refusal must read
// exactly as it reads for a channel or event that exists nowhere (after
// putting the id the client sent back into placeholders), so it neither
// quotes A's data nor tells that A's channel or event exists. In A the
// same requests do not read like the unknown ones, so the comparison can
// tell them apart.
func (bd *swBundle) swErrors(t *testing.T) {
	a, b, r := bd.a, bd.b, bd.r
	type target struct{ ch, root, reply string }
	known := target{a.ch, a.root.ID, a.reply.ID}
	unknown := func() target { return target{uuid.NewString(), swHexID(), swHexID()} }
	type probe struct {
		name string
		// ask sends one request about tg as key on host, returns the answer.
		ask func(t *testing.T, host string, key eventtest.Key, tg target) string
	}
	publish := func(build func(t *testing.T, key eventtest.Key, tg target) event.Event) func(t *testing.T, host string, key eventtest.Key, tg target) string {
		return func(t *testing.T, host string, key eventtest.Key, tg target) string {
			w := swDial(t, r, host, key)
			ev := build(t, key, tg)
			ok, msg := w.Publish(ev)
			return fmt.Sprint(ok, " ", strings.ReplaceAll(msg, ev.ID, "<own>"))
		}
	}
	queryOne := func(path string, f func(tg target) map[string]any) func(t *testing.T, host string, key eventtest.Key, tg target) string {
		return func(t *testing.T, host string, key eventtest.Key, tg target) string {
			raw, _ := swHTTP(path)(t, r, host, key, f(tg))
			return raw
		}
	}
	probes := []probe{
		{"MessageInChannel", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, 9, eventtest.Channel(tg.ch), eventtest.Content("probe"))
		})},
		{"ReplyToRoot", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, 9, eventtest.Channel(tg.ch), eventtest.Content("probe reply"),
				eventtest.Tag("e", tg.root, "", "root"), eventtest.Tag("e", tg.root, "", "reply"))
		})},
		{"JoinChannel", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, event.KindJoinRequest, eventtest.Channel(tg.ch), eventtest.Content(""))
		})},
		{"EditChannel", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, event.KindEditMetadata, eventtest.Channel(tg.ch), eventtest.Tag("name", "renamed"))
		})},
		{"DeleteEvent", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, event.KindDeleteEvent, eventtest.Channel(tg.ch), eventtest.Tag("e", tg.root))
		})},
		{"Deletion", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, event.KindDeletion, eventtest.Tag("e", tg.root), eventtest.Content(""))
		})},
		{"ReactInChannel", publish(func(t *testing.T, k eventtest.Key, tg target) event.Event {
			return k.Signed(t, 7, eventtest.Channel(tg.ch), eventtest.Tag("e", tg.root), eventtest.Content("+"))
		})},
		{"REQChannel", func(t *testing.T, host string, key eventtest.Key, tg target) string {
			raw, _ := swFrames(t, swDial(t, r, host, key), "REQ", "err", map[string]any{"#h": []string{tg.ch}, "kinds": []int{9}})
			return raw
		}},
		{"ThreadWindow", queryOne("/query", func(tg target) map[string]any {
			return map[string]any{"thread_window": true, "#h": []string{tg.ch}, "#e": []string{tg.root}, "kinds": []int{9}, "limit": 5}
		})},
		{"ChannelWindow", queryOne("/query", func(tg target) map[string]any {
			return map[string]any{"top_level": true, "#h": []string{tg.ch}, "kinds": []int{9}, "limit": 5}
		})},
		{"ResolveRoots", queryOne("/query", func(tg target) map[string]any {
			return map[string]any{"resolve_thread_roots": true, "#h": []string{tg.ch}, "kinds": []int{39005}, "ids": []string{tg.reply}}
		})},
		{"CountChannel", queryOne("/count", func(tg target) map[string]any {
			return map[string]any{"#h": []string{tg.ch}, "kinds": []int{9}}
		})},
	}
	// normalise replaces the ids the request carried by placeholders and
	// drops the parts every answer varies in (bounds timestamps and ids).
	normalise := func(raw string, tg target) string {
		raw = strings.ReplaceAll(raw, tg.ch, "<ch>")
		raw = strings.ReplaceAll(raw, tg.reply, "<reply>")
		return strings.ReplaceAll(raw, tg.root, "<root>")
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			u, ua := unknown(), unknown()
			// A root of this probe's own: some probes delete theirs in A.
			root := a.owner.Signed(t, 9, eventtest.Channel(a.ch), eventtest.Content("target "+a.word+" "+p.name))
			swDial(t, r, a.host, a.owner).MustPublish(root)
			known := known
			known.root = root.ID
			cross := p.ask(t, b.host, b.owner, known)
			swNoLeak(t, a, normalise(cross, known), p.name+" from B")
			require.Equal(t, swStable(normalise(p.ask(t, b.host, b.owner, u), u)), swStable(normalise(cross, known)),
				"B's answer about A's channel differs from its answer about no channel")
			// Not vacuous: in A the known channel reads differently from an unknown one.
			require.NotEqual(t, swStable(normalise(p.ask(t, a.host, a.owner, ua), ua)),
				swStable(normalise(p.ask(t, a.host, a.owner, known), known)),
				"the probe cannot tell a known channel from an unknown one even in A")
		})
	}
	t.Run("SnapshotOfAnotherUser", func(t *testing.T) {
		t.Parallel()
		f := map[string]any{"kinds": []int{event.KindAppData}, "authors": []string{a.owner.PubKey}, "read_state_snapshot": 1}
		raw, _ := swHTTP("/query")(t, r, b.host, b.both, f)
		swNoLeak(t, a, strings.ReplaceAll(raw, a.owner.PubKey, "<pk>"), "snapshot refusal")
		require.NotContains(t, raw, "200 ", raw)
	})
}

// swStable drops what differs between two identical requests: the
// timestamps and ids of relay-signed bounds and summaries.
func swStable(raw string) string {
	var evs []map[string]any
	status, body, ok := strings.Cut(raw, " ")
	if !ok || json.Unmarshal([]byte(body), &evs) != nil {
		return raw
	}
	out := []string{}
	for _, ev := range evs {
		kind, _ := ev["kind"].(float64)
		out = append(out, strconv.Itoa(int(kind)))
	}
	slices.Sort(out)
	return status + " kinds " + strings.Join(out, ",")
}

// swAudit checks what `buzz-relay audit head` and `audit verify` print
// for B. The CLI is package main and cannot be imported, and building the
// binary from here would compile the whole relay again, so this calls the
// library functions the subcommands print from: audit.HeadGet and
// audit.NewCheckpoint (head), audit.Verify with its ProgressFunc (verify's
// entry count). B's chain is B's entries alone, and none names A's data.
func (bd *swBundle) swAudit(t *testing.T) {
	a, b, r := bd.a, bd.b, bd.r
	ctx := context.Background()
	require.NotNil(t, r.App.Audit())
	require.NoError(t, r.App.Audit().Chainer.Flush(ctx))
	pool := r.App.Audit().Pool
	for _, w := range []*swWorld{a, b} {
		other := a
		if w == a {
			other = b
		}
		head, found, err := audit.HeadGet(ctx, pool, w.cid)
		require.NoError(t, err)
		require.True(t, found, "%s has audit entries", w.host)
		cp, err := audit.NewCheckpoint(r.App.RelayKey(), w.host, head, time.Now())
		require.NoError(t, err)
		out := string(cp.AppendJSON(nil))
		var entries int64
		ok, err := audit.Verify(ctx, pool, audit.VerifyParams{CommunityID: w.cid, From: 1, To: head.Seq,
			ProgressFunc: func(done int64) { entries = done }})
		require.NoError(t, err)
		require.True(t, ok)
		out += fmt.Sprintf("\nverified %s: seq 1..%d (%d entries)", w.host, head.Seq, entries)
		swNoLeak(t, other, out, "audit of "+w.host)
		require.Contains(t, out, w.host)
		require.Equal(t, head.Seq, entries)
		// The entries verify counts are the community's own, and none of
		// them names the other community's events, channel or author.
		rows, err := pool.Query(ctx, `SELECT COALESCE(encode(actor_pubkey, 'hex'), '') || ' ' || COALESCE(object_id, '') || ' ' || detail::text
			FROM audit_log WHERE community_id = $1 ORDER BY seq`, w.cid)
		require.NoError(t, err)
		var all strings.Builder
		n := int64(0)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			all.WriteString(s + "\n")
			n++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, entries, n)
		swNoLeak(t, other, all.String(), "audit entries of "+w.host)
		require.Contains(t, all.String(), w.ch, "the audit of %s records its own channel", w.host)
	}
}

// swHexID returns a random 64-hex event id that names no event.
func swHexID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}
