package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// cgProbe sends a REQ that matches nothing and requires its EOSE to be the
// very next frame: nothing else was queued for the connection before it.
func cgProbe(t *testing.T, w *relaytest.WS) {
	t.Helper()
	w.Send("REQ", "probe", map[string]any{"ids": []string{hex64(0xee)}})
	require.Equal(t, []any{"EOSE", "probe"}, w.Next())
	w.Send("CLOSE", "probe")
	require.Equal(t, []any{"CLOSED", "probe", ""}, w.Next())
}

// cgQuery runs POST /query for reader and returns status and body.
func cgQuery(t *testing.T, e *chEnv, reader eventtest.Key, path string, filters ...any) (int, string) {
	t.Helper()
	b, err := json.Marshal(filters)
	require.NoError(t, err)
	status, body := e.r.HTTP(t, "", http.MethodPost, path, &reader, b)
	return status, string(body)
}

// TestChannelReadGates: a non-member gets nothing of a private channel on
// any read path, and membership notices reach only their p owner.
func TestChannelReadGates(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)
	owner, member, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	wo, wm := e.dial(t, owner), e.dial(t, member)
	private := chCreate(t, wo, owner, chPrivate)
	open := chCreate(t, wo, owner)
	wo.MustPublish(chPutEv(t, owner, private, member.PubKey, ""))

	msg := chMsg(t, member, private, "the secret plan")
	wm.MustPublish(msg)
	reply := thReply(t, member, private, msg.ID, msg.ID)
	wm.MustPublish(reply)
	reaction := member.Signed(t, 7, eventtest.Content("🔒"), eventtest.Tag("e", msg.ID))
	wm.MustPublish(reaction)
	edit := member.Signed(t, 40003, eventtest.Content("the secret plan, v2"), eventtest.Channel(private), eventtest.Tag("e", msg.ID))
	wm.MustPublish(edit)
	scrap := chMsg(t, member, private, "scrap this")
	wm.MustPublish(scrap)
	deletion := member.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", scrap.ID))
	wm.MustPublish(deletion)
	public := chMsg(t, owner, open, "hello all")
	wo.MustPublish(public)
	roster := e.chLive(t, private, 39002)
	secretIDs := []string{msg.ID, reply.ID, reaction.ID, edit.ID, deletion.ID, roster.ID,
		e.chLive(t, private, 39000).ID, e.chLive(t, private, 39001).ID}
	kinds := []int{5, 7, 9, 40003, 39000, 39001, 39002}

	// The member sees everything: the refusals below are not vacuous.
	evs, closed, eose := wm.Req("all", map[string]any{"ids": secretIDs})
	require.True(t, eose, closed)
	require.ElementsMatch(t, secretIDs, ids(evs))

	t.Run("NonMemberREQ", func(t *testing.T) {
		t.Parallel()
		w := e.dial(t, outsider)
		for _, f := range []map[string]any{
			{"ids": secretIDs},
			{"ids": secretIDs, "kinds": kinds},
			{"authors": []string{member.PubKey}, "kinds": []int{9}},
			{"authors": []string{member.PubKey}, "kinds": kinds},
			{"authors": []string{e.relayPub}, "kinds": []int{39000, 39001, 39002}},
			{"kinds": []int{39000, 39001, 39002}, "#d": []string{private}},
			{"kinds": []int{7, 9, 40003}, "#e": []string{msg.ID}},
			{"kinds": kinds, "since": msg.CreatedAt - 5},
		} {
			evs, closed, eose := w.Req("r", f)
			require.True(t, eose, "%v: %s", f, closed)
			for _, ev := range evs {
				require.NotContains(t, secretIDs, ev.ID, "%v leaked kind %d", f, ev.Kind)
			}
		}
		_, closed, eose := w.Req("r", map[string]any{"authors": []string{member.PubKey}})
		require.False(t, eose)
		require.Equal(t, "restricted: p-gated events require #p matching your pubkey", closed)
		for _, f := range []map[string]any{
			{"#h": []string{private}},
			{"#h": []string{private}, "kinds": []int{9}},
			{"#h": []string{private}, "ids": secretIDs},
		} {
			_, closed, eose := w.Req("h", f)
			require.False(t, eose, "%v", f)
			require.Equal(t, "restricted: not a channel member", closed, "%v", f)
		}
		// With an accessible channel beside it, the private one is silently left out.
		evs, closed, eose := w.Req("h", map[string]any{"#h": []string{private, open}, "kinds": []int{9}})
		require.True(t, eose, closed)
		require.Equal(t, []string{public.ID}, ids(evs))
	})

	t.Run("NonMemberCOUNT", func(t *testing.T) {
		t.Parallel()
		w := e.dial(t, outsider)
		for _, f := range []map[string]any{
			{"ids": secretIDs},
			{"authors": []string{member.PubKey}, "kinds": []int{9}},
			{"authors": []string{member.PubKey}, "kinds": kinds},
			{"#h": []string{private}, "kinds": kinds},
			{"#h": []string{private}, "kinds": []int{9}},
			{"kinds": []int{39002}, "#d": []string{private}},
			{"kinds": []int{7}, "#e": []string{msg.ID}},
		} {
			n, closed := rpCount(t, w, "c", f)
			require.Equal(t, "", closed, "%v", f)
			require.Zero(t, n, "%v", f)
		}
		// COUNT gates every filter, channel or not: a kind-less one can match p-gated kinds.
		_, closed := rpCount(t, w, "c", map[string]any{"#h": []string{private}})
		require.Equal(t, "restricted: p-gated kinds require #p tag matching your pubkey", closed)
		// A connection of its own: wm has sat unread while the parallel
		// subtests ran, and an unread socket misses the relay's pings.
		n, closed := rpCount(t, e.dial(t, member), "c", map[string]any{"authors": []string{member.PubKey}, "kinds": []int{9}, "#h": []string{private}})
		require.Equal(t, "", closed)
		require.EqualValues(t, 2, n, "the member counts them")
	})

	t.Run("NonMemberBridge", func(t *testing.T) {
		t.Parallel()
		for _, f := range []map[string]any{
			{"ids": secretIDs},
			{"authors": []string{member.PubKey}, "kinds": []int{9}},
			{"authors": []string{member.PubKey}, "kinds": kinds},
			{"#h": []string{private}, "kinds": kinds},
			{"#h": []string{private}, "kinds": []int{9}},
			{"kinds": []int{39000, 39001, 39002}, "#d": []string{private}},
			{"kinds": []int{7, 9, 40003}, "#e": []string{msg.ID}},
		} {
			status, body := cgQuery(t, e, outsider, "/query", f)
			require.Equal(t, http.StatusOK, status, body)
			require.JSONEq(t, `[]`, body, "%v", f)
			status, body = cgQuery(t, e, outsider, "/count", f)
			require.Equal(t, http.StatusOK, status, body)
			require.JSONEq(t, `{"count":0}`, body, "%v", f)
		}
		for _, path := range []string{"/query", "/count"} {
			status, body := cgQuery(t, e, outsider, path, map[string]any{"#h": []string{private}})
			require.Equal(t, http.StatusForbidden, status, body)
			require.JSONEq(t, `{"error":"restricted: p-gated kinds require #p tag matching your pubkey"}`, body)
		}
		require.ElementsMatch(t, secretIDs, query(t, e.r, "", member, `[{"ids":`+string(mustJSON(t, secretIDs))+`}]`))
	})

	t.Run("NonMemberLive", func(t *testing.T) {
		t.Parallel()
		w := e.dial(t, outsider)
		chSubscribe(t, w, "g", map[string]any{"kinds": kinds, "authors": []string{member.PubKey}})
		chSubscribe(t, w, "o", map[string]any{"#h": []string{open}})
		// A channel of its own, so the other subtests' data stay as they are.
		wo2, wm2 := e.dial(t, owner), e.dial(t, member)
		private := chCreate(t, wo2, owner, chPrivate)
		wo2.MustPublish(chPutEv(t, owner, private, member.PubKey, ""))
		more := chMsg(t, member, private, "more secrets")
		wm2.MustPublish(more)
		wm2.MustPublish(member.Signed(t, 7, eventtest.Content("👀"), eventtest.Tag("e", more.ID)))
		cgProbe(t, w)
	})

	t.Run("NoticesOnlyForTheirOwner", func(t *testing.T) {
		t.Parallel()
		newcomer := eventtest.NewKey()
		wn, wx := e.dial(t, newcomer), e.dial(t, outsider)
		chSubscribe(t, wn, "mine", chNoticeSub(newcomer))
		chSubscribe(t, wx, "mine", chNoticeSub(outsider))
		wo2 := e.dial(t, owner)
		private := chCreate(t, wo2, owner, chPrivate)
		wo2.MustPublish(chPutEv(t, owner, private, newcomer.PubKey, ""))
		wo2.MustPublish(chRemoveEv(t, owner, private, newcomer.PubKey))
		frames := rpReadUntil(t, wn, func(frames [][]any) bool { return len(frames) == 2 })
		got := chEventsOf(t, frames, "mine")
		require.Equal(t, []int{44100, 44101}, chKinds(got))
		cgProbe(t, wx)

		// Nobody else can ask for them: not the outsider, not the actor.
		for _, reader := range []eventtest.Key{outsider, owner} {
			w := e.dial(t, reader)
			for _, f := range []map[string]any{
				{"kinds": []int{44100, 44101}, "#p": []string{newcomer.PubKey}},
				{"kinds": []int{44100}},
				{"kinds": []int{44100}, "#p": []string{reader.PubKey, newcomer.PubKey}},
				{"kinds": []int{44101}, "#h": []string{private}},
			} {
				evs, closed, eose := w.Req("n", f)
				if f["#h"] != nil && reader.PubKey == owner.PubKey {
					// A channel subscription: notices are global (their h tag is
					// metadata), so none is in the channel's scope.
					require.True(t, eose, closed)
					require.Empty(t, evs)
					continue
				}
				require.False(t, eose, "%v", f)
				if f["#h"] != nil {
					require.Equal(t, "restricted: not a channel member", closed)
					continue
				}
				require.Equal(t, "restricted: p-gated events require #p matching your pubkey", closed, "%v", f)
				n, closed := rpCount(t, w, "c", f)
				require.Equal(t, int64(-1), n)
				require.Equal(t, "restricted: p-gated kinds require #p tag matching your pubkey", closed)
				for _, path := range []string{"/query", "/count"} {
					status, body := cgQuery(t, e, reader, path, f)
					require.Equal(t, http.StatusForbidden, status, "%s %v", path, f)
					require.JSONEq(t, `{"error":"restricted: p-gated kinds require #p tag matching your pubkey"}`, body)
				}
			}
			evs, closed, eose := w.Req("own", map[string]any{"kinds": []int{44100, 44101}, "#p": []string{reader.PubKey}})
			require.True(t, eose, closed)
			for _, ev := range evs {
				require.Equal(t, reader.PubKey, ev.Tags.First("p").Value())
			}
		}
		evs, closed, eose := wn.Req("hist", chNoticeSub(newcomer))
		require.True(t, eose, closed)
		require.ElementsMatch(t, ids(got), ids(evs))
	})
}

// TestChannelLiveSplit is checks 86 and 87: channel events reach channel
// subscriptions only, and before the EOSE of any REQ sent after their OK.
func TestChannelLiveSplit(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)

	t.Run("GlobalHistoryChannelLive", func(t *testing.T) {
		t.Parallel()
		author, reader := eventtest.NewKey(), eventtest.NewKey()
		wa := e.dial(t, author)
		ch := chCreate(t, wa, author)
		wk := e.dial(t, reader)
		chSubscribe(t, wk, "global", map[string]any{"kinds": []int{9}, "authors": []string{author.PubKey}})
		chSubscribe(t, wk, "channel", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		x := chMsg(t, author, ch, "x")
		wa.MustPublish(x)
		wk.Send("REQ", "fresh", map[string]any{"kinds": []int{9}, "authors": []string{author.PubKey}})
		frames := chUntilFrame(t, wk, "EOSE", "fresh")
		require.Equal(t, []string{x.ID}, ids(chEventsOf(t, frames, "channel")), "%v", frames)
		require.Equal(t, []string{x.ID}, ids(chEventsOf(t, frames, "fresh")), "%v", frames)
		require.Empty(t, chEventsOf(t, frames, "global"), "%v", frames)
		// And later: nothing more for the global subscription.
		y := chMsg(t, author, ch, "y")
		wa.MustPublish(y)
		frames = chUntilEvent(t, wk, "channel", y.ID)
		require.Len(t, frames, 1, "%v", frames)
		cgProbe(t, wk)
	})

	t.Run("DeliveryBarrierOwnPublish", func(t *testing.T) {
		t.Parallel()
		k := eventtest.NewKey()
		wk := e.dial(t, k)
		ch := chCreate(t, wk, k)
		chSubscribe(t, wk, "live", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		for i := 0; i < 20; i++ {
			x := chMsg(t, k, ch, "x"+itoa(i))
			wk.Send("EVENT", x)
			frames := chUntilFrame(t, wk, "OK", x.ID, true, "")
			wk.Send("REQ", "after", map[string]any{"kinds": []int{1}, "authors": []string{k.PubKey}, "limit": 1})
			frames = append(frames, chUntilFrame(t, wk, "EOSE", "after")...)
			at := slices.IndexFunc(frames, func(f []any) bool { return rpEventFrame(f, "live") == x.ID })
			require.GreaterOrEqual(t, at, 0, "%v", frames)
			require.Less(t, at, len(frames)-1)
		}
	})

	t.Run("DeliveryBarrierOtherConnection", func(t *testing.T) {
		t.Parallel()
		k, l := eventtest.NewKey(), eventtest.NewKey()
		wl := e.dial(t, l)
		ch := chCreate(t, wl, l, chPrivate)
		wl.MustPublish(chPutEv(t, l, ch, k.PubKey, ""))
		wk := e.dial(t, k)
		chSubscribe(t, wk, "live", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		for i := 0; i < 20; i++ {
			x := chMsg(t, l, ch, "x"+itoa(i))
			wl.MustPublish(x)
			wk.Send("REQ", "after", map[string]any{"kinds": []int{1}, "authors": []string{k.PubKey}, "limit": 1})
			frames := chUntilFrame(t, wk, "EOSE", "after")
			require.Equal(t, []string{x.ID}, ids(chEventsOf(t, frames, "live")), "%v", frames)
		}
	})
}
