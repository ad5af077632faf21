package e2e

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
)

const (
	msgPGateREQ   = "restricted: p-gated events require #p matching your pubkey"
	msgPGateCount = "restricted: p-gated kinds require #p tag matching your pubkey"
	msgEngram     = "restricted: agent-engram reads require authors=[self] or #p=[self]"
	msgAuthorOnly = "restricted: author-only kinds require authors=[self]"
)

func TestReadGates(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	a, b, c := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	now := time.Now().Unix()

	// Gated kinds clients cannot submit, inserted directly.
	aDraft := a.Signed(t, 30300, eventtest.Tag("d", "a-draft"), eventtest.At(now-5))
	bDraft := b.Signed(t, 30300, eventtest.Tag("d", "b-draft"), eventtest.At(now-5))
	rpInsertEvents(t, r, "", "", []event.Event{aDraft, bDraft})
	result := c.Signed(t, 30622, eventtest.Tag("d", "job"), eventtest.Tag("p", b.PubKey), eventtest.At(now-5))
	rpInsertEvents(t, r, "", "", []event.Event{result})
	note := c.Signed(t, 1, eventtest.Content("a plain note"))
	rpAuthed(t, r, "", c).MustPublish(note)

	t.Run("PGate", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", a)
		for _, tc := range []struct {
			filter map[string]any
			closed string
		}{
			{map[string]any{"kinds": []int{1059}}, msgPGateREQ},
			{map[string]any{"kinds": []int{1059}, "#p": []string{a.PubKey}}, ""},
			{map[string]any{"kinds": []int{1059}, "#p": []string{a.PubKey, b.PubKey}}, msgPGateREQ},
			{map[string]any{"authors": []string{a.PubKey}}, msgPGateREQ},
			{map[string]any{"ids": []string{note.ID}}, ""},
			{map[string]any{"ids": []string{note.ID}, "kinds": []int{30622}}, msgPGateREQ},
			{map[string]any{"ids": []string{note.ID}, "kinds": []int{1, 44200}}, msgPGateREQ},
		} {
			evs, closed, eose := w.Req("p", tc.filter)
			require.Equal(t, tc.closed, closed, "%v", tc.filter)
			require.Equal(t, tc.closed == "", eose, "%v", tc.filter)
			if ids, ok := tc.filter["ids"]; ok && eose {
				require.Equal(t, ids, rpIdsOf(evs))
			}
		}
	})

	t.Run("PGateSkipsChannelSubscriptions", func(t *testing.T) {
		t.Parallel()
		ch := rpAddChannel(t, r, "", "open", a)
		w := rpAuthed(t, r, "", b)
		_, closed, eose := w.Req("ch", map[string]any{"#h": []string{ch}})
		require.True(t, eose, closed)
	})

	t.Run("EngramGate", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", a)
		_, closed, eose := w.Req("e", map[string]any{"kinds": []int{30174}})
		require.False(t, eose)
		require.Equal(t, msgEngram, closed)
		_, closed, eose = w.Req("e", map[string]any{"kinds": []int{30174}, "authors": []string{b.PubKey}})
		require.False(t, eose)
		require.Equal(t, msgEngram, closed)
		_, closed, eose = w.Req("e", map[string]any{"kinds": []int{30174}, "authors": []string{strings.ToUpper(a.PubKey)}})
		require.True(t, eose, closed)
		_, closed, eose = w.Req("e", map[string]any{"kinds": []int{30174}, "#p": []string{a.PubKey}})
		require.True(t, eose, closed)
	})

	t.Run("AuthorOnlyGate", func(t *testing.T) {
		t.Parallel()
		w := rpAuthed(t, r, "", a)
		_, closed, eose := w.Req("d", map[string]any{"kinds": []int{30300}})
		require.False(t, eose)
		require.Equal(t, msgAuthorOnly, closed)
		_, closed, eose = w.Req("d", map[string]any{"kinds": []int{30300}, "authors": []string{b.PubKey}})
		require.False(t, eose)
		require.Equal(t, msgAuthorOnly, closed)
		evs, closed, eose := w.Req("d", map[string]any{"kinds": []int{30300}, "authors": []string{a.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, []string{aDraft.ID}, rpIdsOf(evs))
		evs, closed, eose = w.Req("d", map[string]any{"kinds": []int{30300, 9}})
		require.True(t, eose, closed)
		require.Contains(t, rpIdsOf(evs), aDraft.ID)
		require.NotContains(t, rpIdsOf(evs), bDraft.ID)
		// B's draft by id: served, and still hidden from A.
		evs, closed, eose = w.Req("d", map[string]any{"ids": []string{bDraft.ID}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
	})

	t.Run("ResultGated", func(t *testing.T) {
		t.Parallel()
		evs, closed, eose := rpAuthed(t, r, "", a).Req("r", map[string]any{"ids": []string{result.ID}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		evs, closed, eose = rpAuthed(t, r, "", b).Req("r", map[string]any{"ids": []string{result.ID}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{result}, evs)
		evs, closed, eose = rpAuthed(t, r, "", b).Req("r", map[string]any{"kinds": []int{30622}, "#p": []string{b.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, []string{result.ID}, rpIdsOf(evs))
	})

	t.Run("Count", func(t *testing.T) {
		t.Parallel()
		x, y := eventtest.NewKey(), eventtest.NewKey()
		wx, wy := rpAuthed(t, r, "", x), rpAuthed(t, r, "", y)
		for i := range 3 {
			wx.MustPublish(x.Signed(t, 1, eventtest.Content(strconv.Itoa(i))))
		}
		for i := range 4 {
			wy.MustPublish(y.Signed(t, 1, eventtest.Content(strconv.Itoa(i))))
		}
		w := rpAuthed(t, r, "", a)
		n, closed := rpCount(t, w, "c", map[string]any{"kinds": []int{1}, "authors": []string{x.PubKey}},
			map[string]any{"kinds": []int{1}, "authors": []string{y.PubKey}})
		require.Empty(t, closed)
		require.EqualValues(t, 7, n)
		// limit is ignored by COUNT.
		n, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{1}, "authors": []string{y.PubKey}, "limit": 1})
		require.Empty(t, closed)
		require.EqualValues(t, 4, n)

		_, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{1059}})
		require.Equal(t, msgPGateCount, closed)
		_, closed = rpCount(t, w, "c", map[string]any{"ids": []string{result.ID}, "kinds": []int{30622}})
		require.Equal(t, msgPGateCount, closed)
		_, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{30174}})
		require.Equal(t, msgEngram, closed)
		_, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{30300}})
		require.Equal(t, msgAuthorOnly, closed)
		_, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{9}, "search": "hello"})
		require.Equal(t, "error: search is not supported in COUNT", closed)
		// Per-event visibility on the fallback path: A does not count B's draft.
		n, closed = rpCount(t, w, "c", map[string]any{"ids": []string{aDraft.ID, bDraft.ID}})
		require.Empty(t, closed)
		require.EqualValues(t, 1, n)

		// A private channel with two messages: 0 for a non-member, 2 for a member.
		owner := eventtest.NewKey()
		priv := rpAddChannel(t, r, "", "private", owner)
		rpAddChannelMember(t, r, "", priv, owner)
		rpInsertEvents(t, r, "", priv, []event.Event{
			owner.Signed(t, 9, eventtest.Channel(priv), eventtest.Content("one")),
			owner.Signed(t, 9, eventtest.Channel(priv), eventtest.Content("two")),
		})
		n, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{9}, "#h": []string{priv}})
		require.Empty(t, closed)
		require.EqualValues(t, 0, n)
		n, closed = rpCount(t, rpAuthed(t, r, "", owner), "c", map[string]any{"kinds": []int{9}, "#h": []string{priv}})
		require.Empty(t, closed)
		require.EqualValues(t, 2, n)
	})

	t.Run("CountFallbackTooBroad", func(t *testing.T) {
		t.Parallel()
		bulk := eventtest.NewKey()
		tag := "bulk-" + bulk.PubKey[:8]
		rpInsertEvents(t, r, "", "", rpSignMany(t, bulk, 1, 5001, func(i int) []eventtest.Option {
			return []eventtest.Option{eventtest.Tag("t", tag), eventtest.At(now - int64(i%600)), eventtest.Content(strconv.Itoa(i))}
		}))
		w := rpAuthed(t, r, "", a)
		_, closed := rpCount(t, w, "c", map[string]any{"kinds": []int{1}, "#t": []string{tag}})
		require.Equal(t, "restricted: count filter requires narrower constraints", closed)
		// A #p with two values is a fallback filter too.
		n, closed := rpCount(t, w, "c", map[string]any{"kinds": []int{1}, "#p": []string{a.PubKey, b.PubKey}})
		require.Empty(t, closed)
		require.EqualValues(t, 0, n)
		// The fast path has no such bound.
		n, closed = rpCount(t, w, "c", map[string]any{"kinds": []int{1}, "authors": []string{bulk.PubKey}})
		require.Empty(t, closed)
		require.EqualValues(t, 5001, n)

		status, body := brHTTP(t, r, "/count", a, []byte(`[{"kinds":[1],"#t":["`+tag+`"]}]`))
		require.Equal(t, http.StatusBadRequest, status)
		require.JSONEq(t, `{"error":"restricted: count filter requires narrower constraints"}`, string(body))
	})
}

func TestRelayMembership(t *testing.T) {
	t.Parallel()
	owner := eventtest.NewKey()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true",
		"RELAY_OWNER_PUBKEY":            owner.PubKey,
		"TEST_MEMBERSHIP_RECHECK":       "200ms",
	})
	cid := rpCommunityID(t, r, "")

	t.Run("OwnerBootstrapped", func(t *testing.T) {
		t.Parallel()
		members, err := r.App.Store().RelayMemberList(context.Background(), cid)
		require.NoError(t, err)
		i := slices.IndexFunc(members, func(m store.RelayMember) bool { return m.Pubkey == owner.PubKey })
		require.GreaterOrEqual(t, i, 0, "%v", members)
		require.Equal(t, "owner", members[i].Role)
		rpAuthed(t, r, "", owner)
	})

	t.Run("GateWithoutOwnerStopsStartup", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true", "DATABASE_URL": r.DBURL}
		_, _, err := config.Load(func(k string) string { return env[k] }, nil)
		require.Error(t, err)
		require.Contains(t, err.Error(), "invalid RELAY_OWNER_PUBKEY: required when BUZZ_REQUIRE_RELAY_MEMBERSHIP=true")
	})

	t.Run("NonMemberAuthRefused", func(t *testing.T) {
		t.Parallel()
		stranger := eventtest.NewKey()
		w := r.Dial(t, "")
		ev := stranger.Signed(t, event.KindAuth, eventtest.Content(""),
			eventtest.Tag("challenge", w.Challenge), eventtest.Tag("relay", "ws://"+w.Host))
		w.Send("AUTH", ev)
		require.Equal(t, []any{"OK", ev.ID, false, "restricted: not a relay member"}, w.Next())
		w.Send("REQ", "s", map[string]any{"kinds": []int{1}})
		require.Equal(t, []any{"NOTICE", "auth-required: authenticate before subscribing"}, w.Next())
		require.Equal(t, []any{"CLOSED", "s", "auth-required: not authenticated"}, w.Next())
	})

	t.Run("NonMemberBridgeRefused", func(t *testing.T) {
		t.Parallel()
		stranger := eventtest.NewKey()
		status, body := brHTTP(t, r, "/query", stranger, []byte(`[{"kinds":[1]}]`))
		require.Equal(t, http.StatusForbidden, status)
		require.JSONEq(t, `{"error":"relay_membership_required","message":"You must be a relay member to access this relay"}`, string(body))
		status, body = brHTTP(t, r, "/query", owner, []byte(`[{"kinds":[1]}]`))
		require.Equal(t, http.StatusOK, status, string(body))
	})

	t.Run("MemberAddedThenRemoved", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		m := eventtest.NewKey()
		_, err := r.App.Store().RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{
			CommunityID: cid, Pubkey: m.PubKey, Role: "member", AddedBy: owner.PubKey})
		require.NoError(t, err)
		w := rpAuthed(t, r, "", m)
		_, closed, eose := w.Req("s", map[string]any{"kinds": []int{1}, "limit": 1})
		require.True(t, eose, closed)

		removed, err := r.App.Store().RelayMemberRemove(ctx, cid, m.PubKey)
		require.NoError(t, err)
		require.True(t, removed)
		msg, err := w.NextErr(10 * time.Second)
		require.NoError(t, err)
		require.Equal(t, []any{"NOTICE", "restricted: not a relay member"}, msg)
		_, err = w.NextErr(10 * time.Second)
		require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%v", err)
	})
}
