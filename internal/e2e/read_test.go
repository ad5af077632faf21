package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip11"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// rpCommunityID returns the id of the community served on host ("" is the
// deployment community).
func rpCommunityID(t testing.TB, r *relaytest.Relay, host string) string {
	t.Helper()
	if host == "" {
		host = r.Host
	}
	c, err := r.App.Store().CommunityByHost(context.Background(), host)
	require.NoError(t, err)
	return c.ID
}

// rpInsertEvents writes validly signed events straight into the events table
// of host's community, in one statement: for bulk data and for kinds
// clients cannot submit. channel is the stored channel_id ("" = NULL).
func rpInsertEvents(t testing.TB, r *relaytest.Relay, host, channel string, evs []event.Event) {
	t.Helper()
	n := len(evs)
	var (
		ids, pubs, sigs = make([][]byte, n), make([][]byte, n), make([][]byte, n)
		ts              = make([]int64, n)
		kinds           = make([]int32, n)
		tags, contents  = make([]string, n), make([]string, n)
		chans, dtags    = make([]*string, n), make([]*string, n)
	)
	for i, ev := range evs {
		var err error
		ids[i], err = hex.DecodeString(ev.ID)
		require.NoError(t, err)
		pubs[i], err = hex.DecodeString(ev.PubKey)
		require.NoError(t, err)
		sigs[i], err = hex.DecodeString(ev.Sig)
		require.NoError(t, err)
		ts[i], kinds[i], contents[i] = ev.CreatedAt, int32(ev.Kind), ev.Content
		b, err := json.Marshal(ev.Tags)
		require.NoError(t, err)
		tags[i] = string(b)
		if channel != "" {
			chans[i] = &channel
		}
		if event.IsAddressable(ev.Kind) {
			d := ""
			for _, tg := range ev.Tags {
				if len(tg) >= 2 && tg[0] == "d" {
					d = tg[1]
					break
				}
			}
			dtags[i] = &d
		}
	}
	_, err := r.App.Pool().Exec(context.Background(), `
		INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag)
		SELECT $1::uuid, u.id, u.pub, to_timestamp(u.ts), u.kind, u.tags::jsonb, u.content, u.sig, u.ch::uuid, u.d
		FROM unnest($2::bytea[], $3::bytea[], $4::bigint[], $5::int[], $6::text[], $7::text[], $8::bytea[], $9::text[], $10::text[])
		     AS u(id, pub, ts, kind, tags, content, sig, ch, d)`,
		rpCommunityID(t, r, host), ids, pubs, ts, kinds, tags, contents, sigs, chans, dtags)
	require.NoError(t, err)
	// The mention rows the store writes with an event: one per distinct
	// lowercase 64-hex p tag.
	_, err = r.App.Pool().Exec(context.Background(), `
		INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, channel_id, event_kind)
		SELECT DISTINCT e.community_id, t->>1, e.id, e.created_at, e.channel_id, e.kind
		FROM events e, jsonb_array_elements(e.tags) t
		WHERE e.community_id = $1::uuid AND e.id = ANY($2::bytea[])
		  AND t->>0 = 'p' AND t->>1 ~ '^[0-9a-f]{64}$'`, rpCommunityID(t, r, host), ids)
	require.NoError(t, err)
	rpNotifyHotWindow(t, r, host)
}

// rpNotifyHotWindow tells the relay that host's community's events were
// written around it, as the importer does (docs/OPERATIONS.md "Hot
// window"), and waits until it heard. A notification sent before the
// relay's LISTEN began is heard by nobody (the window is off until then),
// so it is sent again until one is heard.
func rpNotifyHotWindow(t testing.TB, r *relaytest.Relay, host string) {
	t.Helper()
	const heard = `buzz_hot_window_resets_total{reason="external"}`
	before := r.Metric(t, heard)
	st, id := store.New(r.App.Pool()), rpCommunityID(t, r, host)
	require.Eventually(t, func() bool {
		require.NoError(t, st.NotifyHotWindow(context.Background(), id))
		return r.Metric(t, heard) > before
	}, 10*time.Second, 50*time.Millisecond)
}

// rpAddChannel inserts a channel of host's community with the given
// visibility ("open" or "private") and returns its UUID.
func rpAddChannel(t testing.TB, r *relaytest.Relay, host, visibility string, creator eventtest.Key) string {
	t.Helper()
	pub, err := hex.DecodeString(creator.PubKey)
	require.NoError(t, err)
	var id string
	err = r.App.Pool().QueryRow(context.Background(), `
		INSERT INTO channels (id, community_id, name, visibility, created_by)
		VALUES (gen_random_uuid(), $1, 'c-' || substr(md5(random()::text), 1, 8), $2::channel_visibility, $3)
		RETURNING id::text`, rpCommunityID(t, r, host), visibility, pub).Scan(&id)
	require.NoError(t, err)
	return id
}

// rpAddChannelMember makes key an active member of channel.
func rpAddChannelMember(t testing.TB, r *relaytest.Relay, host, channel string, key eventtest.Key) {
	t.Helper()
	pub, err := hex.DecodeString(key.PubKey)
	require.NoError(t, err)
	_, err = r.App.Pool().Exec(context.Background(), `
		INSERT INTO channel_members (community_id, channel_id, pubkey, role) VALUES ($1, $2, $3, 'member')`,
		rpCommunityID(t, r, host), channel, pub)
	require.NoError(t, err)
}

// rpSignMany signs n events of kind by key; opts(i) gives the options of the
// i-th one.
func rpSignMany(t testing.TB, key eventtest.Key, kind, n int, opts func(i int) []eventtest.Option) []event.Event {
	t.Helper()
	out := make([]event.Event, n)
	for i := range out {
		out[i] = key.Signed(t, kind, opts(i)...)
	}
	return out
}

// rpAuthed dials host and authenticates as key.
func rpAuthed(t testing.TB, r *relaytest.Relay, host string, key eventtest.Key) *relaytest.WS {
	t.Helper()
	w := r.Dial(t, host)
	w.Auth(key)
	return w
}

// rpReadUntil reads frames until done reports true for the frames read so
// far, and returns them all. Each read fails the test after 5 s.
func rpReadUntil(t testing.TB, w *relaytest.WS, done func(frames [][]any) bool) [][]any {
	t.Helper()
	var frames [][]any
	for !done(frames) {
		frames = append(frames, w.Next())
	}
	return frames
}

// has reports whether frames contain one whose first elements equal prefix.
func rpHas(frames [][]any, prefix ...any) bool {
	return slices.ContainsFunc(frames, func(f []any) bool {
		return len(f) >= len(prefix) && slices.Equal(f[:len(prefix)], prefix)
	})
}

// rpEventFrame returns the id of an ["EVENT",sub,ev] frame, "" otherwise.
func rpEventFrame(f []any, sub string) string {
	if len(f) == 3 && f[0] == "EVENT" && f[1] == sub {
		if m, ok := f[2].(map[string]any); ok {
			id, _ := m["id"].(string)
			return id
		}
	}
	return ""
}

// rpCount sends a COUNT and returns its count, or the CLOSED message.
func rpCount(t testing.TB, w *relaytest.WS, sub string, filters ...any) (n int64, closed string) {
	t.Helper()
	w.Send(append([]any{"COUNT", sub}, filters...)...)
	for {
		msg := w.Next()
		if len(msg) < 3 || msg[1] != sub {
			continue
		}
		switch msg[0] {
		case "COUNT":
			n, ok := msg[2].(map[string]any)["count"].(float64)
			require.True(t, ok, "COUNT answer without a count: %v", msg)
			return int64(n), ""
		case "CLOSED":
			return -1, msg[2].(string)
		}
	}
}

func rpIdsOf(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = evs[i].ID
	}
	return out
}

// rpNewestFirst returns the ids of evs ordered created_at DESC, id ASC.
func rpNewestFirst(evs []event.Event) []string {
	s := slices.Clone(evs)
	slices.SortFunc(s, func(a, b event.Event) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return rpIdsOf(s)
}

func TestReadPath(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	now := time.Now().Unix()

	// 1500 stored kind 1 matches of one author, one second apart.
	bulk := eventtest.NewKey()
	stored := rpSignMany(t, bulk, 1, 1500, func(i int) []eventtest.Option {
		return []eventtest.Option{eventtest.At(now - 10 - int64(i)), eventtest.Content("bulk")}
	})
	rpInsertEvents(t, r, "", "", stored)
	newest := rpNewestFirst(stored)[:1000]

	t.Run("LimitClampedAndLiveAfterLimitZero", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", eventtest.NewKey())
		evs, closed, eose := w.Req("big", map[string]any{"kinds": []int{1}, "authors": []string{bulk.PubKey}, "limit": 5000})
		require.True(t, eose, closed)
		require.Equal(t, newest, rpIdsOf(evs))
		evs, closed, eose = w.Req("nolimit", map[string]any{"kinds": []int{1}, "authors": []string{bulk.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, newest, rpIdsOf(evs))

		evs, closed, eose = w.Req("zero", map[string]any{"kinds": []int{1}, "authors": []string{bulk.PubKey}, "limit": 0})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		live := bulk.Signed(t, 1, eventtest.Content("live after limit 0"))
		rpAuthed(t, r, "", bulk).MustPublish(live)
		frames := rpReadUntil(t, w, func(fs [][]any) bool {
			return len(fs) > 0 && rpEventFrame(fs[len(fs)-1], "zero") != ""
		})
		require.Equal(t, live.ID, rpEventFrame(frames[len(frames)-1], "zero"))
	})

	t.Run("EmptyKindsMatchesNothing", func(t *testing.T) {
		t.Parallel()
		me := eventtest.NewKey()
		w := rpAuthed(t, r, "", me)
		evs, closed, eose := w.Req("none", map[string]any{"kinds": []int{}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		_, closed, eose = w.Req("watch", map[string]any{"kinds": []int{1}, "authors": []string{me.PubKey}, "limit": 0})
		require.True(t, eose, closed)

		ev := me.Signed(t, 1, eventtest.Content("nobody asked for kinds []"))
		w.Send("EVENT", ev)
		sentProbe := false
		frames := rpReadUntil(t, w, func(fs [][]any) bool {
			if !sentProbe && rpHas(fs, "OK", ev.ID, true) {
				w.Send("REQ", "probe", map[string]any{"ids": []string{ev.ID}})
				sentProbe = true
			}
			return rpHas(fs, "EVENT", "watch") && rpHas(fs, "EOSE", "probe")
		})
		require.False(t, rpHas(frames, "EVENT", "none"), "kinds [] subscription got a live event: %v", frames)
		require.Equal(t, []any{"OK", ev.ID, true, ""}, frames[slices.IndexFunc(frames, func(f []any) bool { return f[0] == "OK" })])
	})

	t.Run("Ordering", func(t *testing.T) {
		t.Parallel()
		same, diff := eventtest.NewKey(), eventtest.NewKey()
		ws, wd := rpAuthed(t, r, "", same), rpAuthed(t, r, "", diff)
		var sameEvs []event.Event
		for i := range 5 {
			ev := same.Signed(t, 1, eventtest.At(now-60), eventtest.Content("tie "+string(rune('a'+i))))
			ws.MustPublish(ev)
			sameEvs = append(sameEvs, ev)
		}
		var diffEvs []event.Event
		for _, ago := range []int64{20, 40, 10, 30} {
			ev := diff.Signed(t, 1, eventtest.At(now-ago))
			wd.MustPublish(ev)
			diffEvs = append(diffEvs, ev)
		}
		reader := rpAuthed(t, r, "", eventtest.NewKey())
		evs, closed, eose := reader.Req("same", map[string]any{"kinds": []int{1}, "authors": []string{same.PubKey}})
		require.True(t, eose, closed)
		ascending := rpIdsOf(sameEvs)
		slices.Sort(ascending)
		require.Equal(t, ascending, rpIdsOf(evs))
		evs, closed, eose = reader.Req("diff", map[string]any{"kinds": []int{1}, "authors": []string{diff.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, []string{diffEvs[2].ID, diffEvs[0].ID, diffEvs[3].ID, diffEvs[1].ID}, rpIdsOf(evs))
	})

	t.Run("IDsAndAuthorFiltersEachOnce", func(t *testing.T) {
		t.Parallel()
		a := eventtest.NewKey()
		ch := rpAddChannel(t, r, "", "open", a)
		wa := rpAuthed(t, r, "", a)
		x := a.Signed(t, 9, eventtest.Channel(ch), eventtest.At(now-10), eventtest.Content("older"))
		y := a.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("newer"))
		wa.MustPublish(x)
		wa.MustPublish(y)
		reader := rpAuthed(t, r, "", eventtest.NewKey())
		evs, closed, eose := reader.Req("s", map[string]any{"ids": []string{x.ID}},
			map[string]any{"authors": []string{a.PubKey}, "kinds": []int{9}, "limit": 1})
		require.True(t, eose, closed)
		require.Equal(t, []string{x.ID, y.ID}, rpIdsOf(evs))
		evs, closed, eose = reader.Req("s2", map[string]any{"ids": []string{x.ID}},
			map[string]any{"authors": []string{a.PubKey}, "kinds": []int{9}, "limit": 2})
		require.True(t, eose, closed)
		require.Equal(t, []string{x.ID, y.ID}, rpIdsOf(evs))
	})

	t.Run("MaxLimitClamps", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", eventtest.NewKey())
		evs, closed, eose := w.Req("clamp", map[string]any{"kinds": []int{1}, "authors": []string{bulk.PubKey}, "limit": 1001})
		require.True(t, eose, closed)
		require.Len(t, evs, 1000)
	})
}

// rpInjectedKind marks the filters whose history read fails.
const rpInjectedKind = 4242

func rpFailingReads() app.Hooks {
	return app.Hooks{QueryHookFunc: func(_ context.Context, f *event.Filter) error {
		if slices.Contains(f.Kinds, rpInjectedKind) {
			return errors.New("injected read failure")
		}
		return nil
	}}
}

func TestHistoryDatabaseError(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil, rpFailingReads())
	w := rpAuthed(t, r, "", eventtest.NewKey())

	w.Send("REQ", "bad", map[string]any{"kinds": []int{1, rpInjectedKind}})
	w.Send("REQ", "probe", map[string]any{"kinds": []int{1}, "limit": 1})
	frames := rpReadUntil(t, w, func(fs [][]any) bool {
		return rpHas(fs, "CLOSED", "bad") && rpHas(fs, "EOSE", "probe")
	})
	require.True(t, rpHas(frames, "CLOSED", "bad", wire.MsgDatabaseError), "%v", frames)
	require.Equal(t, "error: database error", wire.MsgDatabaseError)
	require.False(t, rpHas(frames, "EOSE", "bad"), "a failed history must not end in EOSE: %v", frames)

	// The failed subscription was removed: a live match is not delivered.
	me := eventtest.NewKey()
	w2 := rpAuthed(t, r, "", me)
	_, closed, eose := w2.Req("fails", map[string]any{"kinds": []int{1, rpInjectedKind}, "authors": []string{me.PubKey}})
	require.False(t, eose)
	require.Equal(t, "error: database error", closed)
	ev := me.Signed(t, 1)
	w2.Send("EVENT", ev)
	frames = rpReadUntil(t, w2, func(fs [][]any) bool { return rpHas(fs, "OK", ev.ID) })
	require.True(t, rpHas(frames, "OK", ev.ID, true), "%v", frames)
	w2.Send("REQ", "after", map[string]any{"ids": []string{ev.ID}})
	frames = append(frames, rpReadUntil(t, w2, func(fs [][]any) bool { return rpHas(fs, "EOSE", "after") })...)
	require.True(t, rpHas(frames, "EVENT", "after"), "%v", frames)
	require.False(t, rpHas(frames, "EVENT", "fails"), "%v", frames)
}

// TestIndependentClient speaks to the relay with go-nostr, an independent
// client library: its connection, envelopes, signer and NIP-11 fetcher.
// (Its Relay type is not used: Relay.Close races with its own writer
// goroutine under the race detector.)
func TestIndependentClient(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := "ws://" + r.Host

	info, err := nip11.Fetch(ctx, url)
	require.NoError(t, err)
	require.Equal(t, "Buzz Relay", info.Name)
	require.Contains(t, info.SupportedNIPs, any(float64(42)))

	conn, err := nostr.NewConnection(ctx, url, nil, nil)
	require.NoError(t, err)
	defer conn.Close()
	next := func() nostr.Envelope {
		t.Helper()
		var buf bytes.Buffer
		require.NoError(t, conn.ReadMessage(ctx, &buf))
		env, err := nostr.NewMessageParser().ParseMessage(buf.String())
		require.NoError(t, err, "unparsable frame %s", buf.String())
		return env
	}
	send := func(env nostr.Envelope) {
		t.Helper()
		b, err := env.MarshalJSON()
		require.NoError(t, err)
		require.NoError(t, conn.WriteMessage(ctx, b))
	}
	challenge, ok := next().(*nostr.AuthEnvelope)
	require.True(t, ok)
	require.NotNil(t, challenge.Challenge)

	sk := nostr.GeneratePrivateKey()
	pub, err := nostr.GetPublicKey(sk)
	require.NoError(t, err)
	note := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Tags: nostr.Tags{}, Content: "hello from go-nostr"}
	require.NoError(t, note.Sign(sk))

	send(&nostr.EventEnvelope{Event: note})
	okEnv, isOK := next().(*nostr.OKEnvelope)
	require.True(t, isOK)
	require.Equal(t, nostr.OKEnvelope{EventID: note.ID, OK: false, Reason: "auth-required: not authenticated"}, *okEnv)

	authEv := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"relay", url}, {"challenge", *challenge.Challenge}}}
	require.NoError(t, authEv.Sign(sk))
	send(&nostr.AuthEnvelope{Event: authEv})
	okEnv, isOK = next().(*nostr.OKEnvelope)
	require.True(t, isOK)
	require.Equal(t, nostr.OKEnvelope{EventID: authEv.ID, OK: true, Reason: ""}, *okEnv)

	send(&nostr.EventEnvelope{Event: note})
	okEnv, isOK = next().(*nostr.OKEnvelope)
	require.True(t, isOK)
	require.Equal(t, nostr.OKEnvelope{EventID: note.ID, OK: true, Reason: ""}, *okEnv)

	send(&nostr.ReqEnvelope{SubscriptionID: "q", Filters: nostr.Filters{{IDs: []string{note.ID}}}})
	evEnv, isEvent := next().(*nostr.EventEnvelope)
	require.True(t, isEvent)
	require.Equal(t, "q", *evEnv.SubscriptionID)
	require.Equal(t, note.ID, evEnv.ID)
	require.Equal(t, pub, evEnv.PubKey)
	require.Equal(t, "hello from go-nostr", evEnv.Content)
	valid, err := evEnv.CheckSignature()
	require.NoError(t, err)
	require.True(t, valid)
	eose, isEOSE := next().(*nostr.EOSEEnvelope)
	require.True(t, isEOSE)
	require.Equal(t, "q", string(*eose))

	send(&nostr.CountEnvelope{SubscriptionID: "c", Filter: nostr.Filter{Kinds: []int{1}, Authors: []string{pub}}})
	cnt, isCount := next().(*nostr.CountEnvelope)
	require.True(t, isCount)
	require.Equal(t, "c", cnt.SubscriptionID)
	require.NotNil(t, cnt.Count)
	require.EqualValues(t, 1, *cnt.Count)
}
