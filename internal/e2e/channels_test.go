package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// chEnv is one relay, its deployment community and the relay's pubkey.
type chEnv struct {
	r        *relaytest.Relay
	cid      string
	relayPub string
}

func chSetup(t *testing.T, env map[string]string, hooks ...app.Hooks) *chEnv {
	t.Helper()
	r := relaytest.Start(t, env, hooks...)
	return &chEnv{r: r, cid: communityID(t, r, r.Host), relayPub: event.PubKey(r.App.RelayKey())}
}

// dial returns a deployment-community connection authenticated as key.
func (e *chEnv) dial(t *testing.T, key eventtest.Key) *relaytest.WS {
	t.Helper()
	return rpAuthed(t, e.r, "", key)
}

// chCreateEv is a 9007 with a client-chosen id and a name; opts add tags.
func chCreateEv(t testing.TB, owner eventtest.Key, id string, opts ...eventtest.Option) event.Event {
	t.Helper()
	base := []eventtest.Option{chNonce(), eventtest.Channel(id), eventtest.Tag("name", "c-"+id[:8])}
	return owner.Signed(t, 9007, append(base, opts...)...)
}

// chCreate creates a channel through w (authenticated as owner) and returns its id.
func chCreate(t testing.TB, w *relaytest.WS, owner eventtest.Key, opts ...eventtest.Option) string {
	t.Helper()
	id := uuid.NewString()
	w.MustPublish(chCreateEv(t, owner, id, opts...))
	return id
}

// chNonce gives a command a random content, so that two identical commands
// signed in the same second are still two events.
func chNonce() eventtest.Option { return eventtest.Content("n-" + uuid.NewString()[:8]) }

// chPrivate is the option of a private 9007.
var chPrivate = eventtest.Tag("visibility", "private")

// chPutEv is a 9000 adding target to ch, with a role tag unless role is "".
func chPutEv(t testing.TB, actor eventtest.Key, ch, target, role string) event.Event {
	t.Helper()
	opts := []eventtest.Option{chNonce(), eventtest.Channel(ch), eventtest.Tag("p", target)}
	if role != "" {
		opts = append(opts, eventtest.Tag("role", role))
	}
	return actor.Signed(t, 9000, opts...)
}

// chRemoveEv is a 9001 removing target from ch.
func chRemoveEv(t testing.TB, actor eventtest.Key, ch, target string) event.Event {
	t.Helper()
	return actor.Signed(t, 9001, chNonce(), eventtest.Channel(ch), eventtest.Tag("p", target))
}

// chMetaEv is a 9002 on ch with the given tags.
func chMetaEv(t testing.TB, actor eventtest.Key, ch string, tags ...eventtest.Option) event.Event {
	t.Helper()
	return actor.Signed(t, 9002, append([]eventtest.Option{chNonce(), eventtest.Channel(ch)}, tags...)...)
}

// chMsg is a kind 9 in ch.
func chMsg(t testing.TB, author eventtest.Key, ch, content string, opts ...eventtest.Option) event.Event {
	t.Helper()
	return author.Signed(t, 9, append([]eventtest.Option{eventtest.Content(content), eventtest.Channel(ch)}, opts...)...)
}

// chRefused publishes ev and requires OK false with exactly msg.
func chRefused(t testing.TB, w *relaytest.WS, ev event.Event, msg string) {
	t.Helper()
	ok, got := w.Publish(ev)
	require.False(t, ok, "kind %d accepted, want %q", ev.Kind, msg)
	require.Equal(t, msg, got)
}

// chFrameEvent decodes the event of an ["EVENT",sub,ev] frame.
func chFrameEvent(t testing.TB, f []any) event.Event {
	t.Helper()
	require.Len(t, f, 3, "%v", f)
	b, err := json.Marshal(f[2])
	require.NoError(t, err)
	ev, err := event.Parse(b)
	require.NoError(t, err)
	return ev
}

// chEventsOf returns the events frames carry for sub, in order.
func chEventsOf(t testing.TB, frames [][]any, sub string) []event.Event {
	t.Helper()
	var out []event.Event
	for _, f := range frames {
		if rpEventFrame(f, sub) != "" {
			out = append(out, chFrameEvent(t, f))
		}
	}
	return out
}

// chKinds lists the kinds of evs.
func chKinds(evs []event.Event) []int {
	out := []int{}
	for _, ev := range evs {
		out = append(out, ev.Kind)
	}
	return out
}

// chSubscribe sends a REQ and reads until its EOSE, returning the history.
// Frames of other subscriptions read meanwhile are returned too.
func chSubscribe(t testing.TB, w *relaytest.WS, sub string, filters ...any) (history []event.Event, other [][]any) {
	t.Helper()
	w.Send(append([]any{"REQ", sub}, filters...)...)
	for {
		f := w.Next()
		switch {
		case len(f) >= 2 && f[1] == sub && f[0] == "EOSE":
			return history, other
		case len(f) >= 2 && f[1] == sub && f[0] == "CLOSED":
			require.Failf(t, "subscription closed", "%v", f)
		case rpEventFrame(f, sub) != "":
			history = append(history, chFrameEvent(t, f))
		default:
			other = append(other, f)
		}
	}
}

// chUntilEvent reads frames until sub delivers the event id, and returns
// every frame read, that one included.
func chUntilEvent(t testing.TB, w *relaytest.WS, sub, id string) [][]any {
	t.Helper()
	return rpReadUntil(t, w, func(frames [][]any) bool {
		return len(frames) > 0 && rpEventFrame(frames[len(frames)-1], sub) == id
	})
}

// chUntilFrame reads frames until one equals want, and returns them all.
func chUntilFrame(t testing.TB, w *relaytest.WS, want ...any) [][]any {
	t.Helper()
	return rpReadUntil(t, w, func(frames [][]any) bool {
		return len(frames) > 0 && slices.Equal(frames[len(frames)-1], want)
	})
}

// chStored is a stored row of the events table.
type chStored struct {
	ev   event.Event
	live bool
}

// chRows returns the rows of kind in channel ch (every version, deleted
// ones included), oldest first.
func (e *chEnv) chRows(t testing.TB, ch string, kind int) []chStored {
	t.Helper()
	rows, err := e.r.App.Pool().Query(context.Background(), `SELECT encode(id, 'hex'), encode(pubkey, 'hex'),
			extract(epoch FROM created_at)::bigint, kind, tags::text, content, encode(sig, 'hex'), deleted_at IS NULL
		FROM events WHERE community_id = $1 AND channel_id = $2 AND kind = $3 ORDER BY created_at, id`, e.cid, ch, kind)
	require.NoError(t, err)
	defer rows.Close()
	var out []chStored
	for rows.Next() {
		var s chStored
		var tags string
		require.NoError(t, rows.Scan(&s.ev.ID, &s.ev.PubKey, &s.ev.CreatedAt, &s.ev.Kind, &tags, &s.ev.Content, &s.ev.Sig, &s.live))
		require.NoError(t, json.Unmarshal([]byte(tags), &s.ev.Tags))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// chLive returns the single live version of a relay-signed state kind.
func (e *chEnv) chLive(t testing.TB, ch string, kind int) event.Event {
	t.Helper()
	var live []event.Event
	for _, s := range e.chRows(t, ch, kind) {
		if s.live {
			live = append(live, s.ev)
		}
	}
	require.Len(t, live, 1, "live versions of kind %d", kind)
	return live[0]
}

// chActive returns the active members of ch as pubkey → role.
func (e *chEnv) chActive(t testing.TB, ch string) map[string]string {
	t.Helper()
	rows, err := e.r.App.Pool().Query(context.Background(), `SELECT encode(pubkey, 'hex'), role::text FROM channel_members
		WHERE community_id = $1 AND channel_id = $2 AND removed_at IS NULL`, e.cid, ch)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var pub, role string
		require.NoError(t, rows.Scan(&pub, &role))
		out[pub] = role
	}
	require.NoError(t, rows.Err())
	return out
}

// chRoster reads the p tags of a 39002 as pubkey → role.
func chRoster(t testing.TB, ev event.Event) map[string]string {
	t.Helper()
	require.Equal(t, 39002, ev.Kind)
	out := map[string]string{}
	for _, tg := range ev.Tags[1:] {
		require.Len(t, tg, 4, "%v", tg)
		require.Equal(t, "p", tg[0])
		require.Equal(t, "", tg[2])
		out[tg[1]] = tg[3]
	}
	return out
}

// chRequireRelaySigned checks an event is the relay's, with a valid id and signature.
func (e *chEnv) chRequireRelaySigned(t testing.TB, ev event.Event) {
	t.Helper()
	require.Equal(t, e.relayPub, ev.PubKey, "kind %d not signed by the relay key", ev.Kind)
	computed, ok := ev.CheckID()
	require.True(t, ok, "id of kind %d: computed %s, got %s", ev.Kind, computed, ev.ID)
	require.True(t, ev.VerifySignature(), "signature of kind %d", ev.Kind)
}

// chNoticeContent is the exact content of a 44100/44101 (docs/PROTOCOL.md §5.4).
func chNoticeContent(typ, ch, actor string) string {
	return `{"type":"` + typ + `","channel_id":"` + ch + `","actor":"` + actor + `"}`
}

// chNoticeSub is the subscription an agent holds to learn of its memberships.
func chNoticeSub(key eventtest.Key) map[string]any {
	return map[string]any{"kinds": []int{44100, 44101}, "#p": []string{key.PubKey}}
}

// TestChannelFollowUpSignFault: when the relay cannot sign a
// follow-up of a 9000 the whole transaction rolls back.
func TestChannelFollowUpSignFault(t *testing.T) {
	t.Parallel()
	relayKey := event.GenerateKey()
	var victims sync.Map // pubkey → true: the relay cannot sign their 44100
	e := chSetup(t, map[string]string{"BUZZ_RELAY_PRIVATE_KEY": hex.EncodeToString(relayKey)}, app.Hooks{
		SignFunc: func(ev *event.Event) error {
			// The 44100 is signed last, after 39000–39002 were inserted.
			if _, ok := victims.Load(ev.Tags.First("p").Value()); ok && ev.Kind == 44100 {
				return errors.New("injected signing fault")
			}
			return ev.Sign(relayKey)
		},
	})
	// Each case gets its own owner, channel and victim.
	setup := func(t *testing.T) (owner, victim eventtest.Key, w *relaytest.WS, ch string) {
		t.Helper()
		owner, victim = eventtest.NewKey(), eventtest.NewKey()
		victims.Store(victim.PubKey, true)
		w = e.dial(t, owner)
		return owner, victim, w, chCreate(t, w, owner)
	}
	requireNothingLeft := func(t *testing.T, ch string, owner, victim eventtest.Key, ev event.Event) {
		t.Helper()
		require.False(t, eventRow(t, e.r, e.cid, ev.ID).found, "the triggering event must not be stored")
		require.Zero(t, countRows(t, e.r, `SELECT count(*) FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3`,
			e.cid, ch, pubBytes(t, victim)))
		for _, kind := range []int{39000, 39001, 39002} {
			require.Len(t, e.chRows(t, ch, kind), 1, "no version of kind %d may survive", kind)
		}
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, chRoster(t, e.chLive(t, ch, 39002)))
		require.Zero(t, countRows(t, e.r, `SELECT count(*) FROM events WHERE community_id = $1 AND kind = 44100
			AND tags @> jsonb_build_array(jsonb_build_array('p', $2::text))`, e.cid, victim.PubKey))
	}

	t.Run("WebSocket", func(t *testing.T) {
		t.Parallel()
		owner, victim, w, ch := setup(t)
		put := chPutEv(t, owner, ch, victim.PubKey, "")
		chRefused(t, w, put, "error: internal server error")
		requireNothingLeft(t, ch, owner, victim, put)
		// Nothing was left half-done: an unaffected target is still added.
		other := eventtest.NewKey()
		w.MustPublish(chPutEv(t, owner, ch, other.PubKey, ""))
		require.Equal(t, map[string]string{owner.PubKey: "owner", other.PubKey: "member"}, chRoster(t, e.chLive(t, ch, 39002)))
	})
	t.Run("HTTP", func(t *testing.T) {
		t.Parallel()
		owner, victim, _, ch := setup(t)
		put := chPutEv(t, owner, ch, victim.PubKey, "member")
		status, body := e.r.PostEvent(t, "", owner, put)
		require.Equal(t, http.StatusInternalServerError, status)
		require.Equal(t, `{"error":"internal server error"}`, strings.TrimSpace(body))
		requireNothingLeft(t, ch, owner, victim, put)
	})
	t.Run("SelfJoin", func(t *testing.T) {
		t.Parallel()
		owner, victim, _, ch := setup(t)
		join := chJoinEv(t, victim, ch)
		chRefused(t, e.dial(t, victim), join, "error: internal server error")
		requireNothingLeft(t, ch, owner, victim, join)
	})
}

// TestChannels covers checks 40–48 and 50–56.
func TestChannels(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)

	t.Run("CreateLayout", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey()
		w := e.dial(t, owner)
		id := uuid.NewString()
		create := owner.Signed(t, 9007, chNonce(), eventtest.Channel(id), eventtest.Tag("name", "#general "))
		w.MustPublish(create)

		var name, visibility, typ string
		require.NoError(t, e.r.App.Pool().QueryRow(context.Background(), `SELECT name, visibility::text, channel_type::text
			FROM channels WHERE community_id = $1 AND id = $2`, e.cid, id).Scan(&name, &visibility, &typ))
		require.Equal(t, []string{"general", "open", "stream"}, []string{name, visibility, typ})
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, e.chActive(t, id))
		require.Equal(t, id, *eventRow(t, e.r, e.cid, create.ID).channel)

		state, closed, eose := w.Req("state", map[string]any{"kinds": []int{39000, 39001, 39002}, "#d": []string{id}})
		require.True(t, eose, closed)
		require.Len(t, state, 3)
		byKind := map[int]event.Event{}
		for _, ev := range state {
			e.chRequireRelaySigned(t, ev)
			require.Equal(t, "", ev.Content)
			byKind[ev.Kind] = ev
			require.Equal(t, id, *eventRow(t, e.r, e.cid, ev.ID).channel, "state events are channel-scoped")
			require.Equal(t, ev, e.chLive(t, id, ev.Kind))
		}
		require.Equal(t, event.Tags{{"d", id}, {"name", "general"}, {"public"}, {"closed"}, {"t", "stream"}}, byKind[39000].Tags)
		require.Equal(t, event.Tags{{"d", id}, {"p", owner.PubKey, "owner"}}, byKind[39001].Tags)
		require.Equal(t, event.Tags{{"d", id}, {"p", owner.PubKey, "", "owner"}}, byKind[39002].Tags)

		notices, closed, eose := w.Req("n", chNoticeSub(owner))
		require.True(t, eose, closed)
		require.Len(t, notices, 1)
		n := notices[0]
		e.chRequireRelaySigned(t, n)
		require.Equal(t, 44100, n.Kind)
		require.Equal(t, event.Tags{{"p", owner.PubKey}, {"h", id}}, n.Tags)
		require.Equal(t, chNoticeContent("member_added", id, owner.PubKey), n.Content)
		require.Nil(t, eventRow(t, e.r, e.cid, n.ID).channel, "44100 is global")

		t.Run("FullMetadataAndRemoval", func(t *testing.T) {
			t.Parallel()
			w := e.dial(t, owner)
			member := eventtest.NewKey()
			id := uuid.NewString()
			w.MustPublish(owner.Signed(t, 9007, chNonce(), eventtest.Channel(id), eventtest.Tag("name", "  #design"),
				chPrivate, eventtest.Tag("channel_type", "forum"), eventtest.Tag("about", "Design talk")))
			w.MustPublish(chPutEv(t, owner, id, member.PubKey, "admin"))
			w.MustPublish(chMetaEv(t, owner, id, eventtest.Tag("topic", "Q3"), eventtest.Tag("purpose", "ship it")))
			w.MustPublish(chMetaEv(t, owner, id, eventtest.Tag("archived", "true")))
			meta := e.chLive(t, id, 39000)
			e.chRequireRelaySigned(t, meta)
			require.Equal(t, event.Tags{{"d", id}, {"name", "design"}, {"about", "Design talk"}, {"private"}, {"closed"},
				{"t", "forum"}, {"topic", "Q3"}, {"purpose", "ship it"}, {"archived", "true"}}, meta.Tags)
			admins := e.chLive(t, id, 39001)
			require.ElementsMatch(t, event.Tags{{"p", owner.PubKey, "owner"}, {"p", member.PubKey, "admin"}}, admins.Tags[1:])
			require.Equal(t, event.Tag{"d", id}, admins.Tags[0])

			w.MustPublish(chMetaEv(t, owner, id, eventtest.Tag("archived", "false")))
			w.MustPublish(chRemoveEv(t, owner, id, member.PubKey))
			require.Equal(t, event.Tags{{"d", id}, {"p", owner.PubKey, "owner"}}, e.chLive(t, id, 39001).Tags)
			require.Equal(t, event.Tags{{"d", id}, {"p", owner.PubKey, "", "owner"}}, e.chLive(t, id, 39002).Tags)
			removed, closed, eose := e.dial(t, member).Req("n", map[string]any{"kinds": []int{44101}, "#p": []string{member.PubKey}})
			require.True(t, eose, closed)
			require.Len(t, removed, 1)
			e.chRequireRelaySigned(t, removed[0])
			require.Equal(t, event.Tags{{"p", member.PubKey}, {"h", id}}, removed[0].Tags)
			require.Equal(t, chNoticeContent("member_removed", id, owner.PubKey), removed[0].Content)
		})
	})

	t.Run("DuplicateID", func(t *testing.T) {
		t.Parallel()
		owner, other := eventtest.NewKey(), eventtest.NewKey()
		w := e.dial(t, owner)
		id := chCreate(t, w, owner)
		again := chCreateEv(t, other, id, eventtest.Tag("about", "mine now"))
		chRefused(t, e.dial(t, other), again, "duplicate: channel already exists")
		require.False(t, eventRow(t, e.r, e.cid, again.ID).found)
		w.MustPublish(owner.Signed(t, 9008, chNonce(), eventtest.Channel(id)))
		afterDelete := chCreateEv(t, owner, id, eventtest.Tag("about", "again"))
		chRefused(t, w, afterDelete, "duplicate: channel already exists")
		require.False(t, eventRow(t, e.r, e.cid, afterDelete.ID).found)
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, e.chActive(t, id))
	})

	t.Run("CreateRefusals", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey()
		w := e.dial(t, owner)
		chRefused(t, w, owner.Signed(t, 9007, chNonce(), eventtest.Channel(uuid.NewString())), "invalid: channel name is required")
		chRefused(t, w, owner.Signed(t, 9007, chNonce(), eventtest.Tag("name", " # ")), "invalid: channel name is required")
		chRefused(t, w, chCreateEv(t, owner, uuid.NewString(), eventtest.Tag("visibility", "secret")), "invalid visibility: secret")
		chRefused(t, w, chCreateEv(t, owner, uuid.NewString(), eventtest.Tag("channel_type", "dm")), "invalid channel_type: dm")
		chRefused(t, w, owner.Signed(t, 9007, chNonce(), eventtest.Tag("name", strings.Repeat("é", 256))),
			"invalid: channel name exceeds 255 characters")
		// Without h the relay picks the id; the creator learns it from the 44100.
		w.MustPublish(owner.Signed(t, 9007, chNonce(), eventtest.Tag("name", strings.Repeat("é", 255))))
		notices, closed, eose := w.Req("n", chNoticeSub(owner))
		require.True(t, eose, closed)
		require.Len(t, notices, 1)
		id := notices[0].Tags.First("h").Value()
		require.NoError(t, uuid.Validate(id))
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, e.chActive(t, id))
	})

	t.Run("PrivateNonMember", func(t *testing.T) {
		t.Parallel()
		owner, outsider := eventtest.NewKey(), eventtest.NewKey()
		ch := chCreate(t, e.dial(t, owner), owner, chPrivate)
		wo := e.dial(t, outsider)
		msg := chMsg(t, outsider, ch, "let me in")
		chRefused(t, wo, msg, "restricted: not a channel member")
		require.False(t, eventRow(t, e.r, e.cid, msg.ID).found)
		_, closed, eose := wo.Req("h", map[string]any{"#h": []string{ch}})
		require.False(t, eose)
		require.Equal(t, "restricted: not a channel member", closed)
	})

	t.Run("OpenNonMember", func(t *testing.T) {
		t.Parallel()
		owner, passer := eventtest.NewKey(), eventtest.NewKey()
		ch := chCreate(t, e.dial(t, owner), owner)
		wp := e.dial(t, passer)
		msg := chMsg(t, passer, ch, "just passing by")
		wp.MustPublish(msg)
		evs, closed, eose := wp.Req("h", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		require.True(t, eose, closed)
		require.Equal(t, []string{msg.ID}, ids(evs))
		require.NotContains(t, e.chActive(t, ch), passer.PubKey, "posting does not make a member")
	})

	t.Run("Join", func(t *testing.T) {
		t.Parallel()
		owner, joiner := eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		private := chCreate(t, wo, owner, chPrivate)
		open := chCreate(t, wo, owner)
		wj := e.dial(t, joiner)
		join := func(opts ...eventtest.Option) event.Event {
			return joiner.Signed(t, 9021, append([]eventtest.Option{chNonce()}, opts...)...)
		}
		chRefused(t, wj, join(eventtest.Channel(private)), "restricted: channel is private")
		chRefused(t, wj, join(eventtest.Channel(uuid.NewString())), "invalid: channel not found")
		chRefused(t, wj, join(), "invalid: join request must include an h tag")
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, e.chActive(t, private))

		first := join(eventtest.Channel(open))
		wj.MustPublish(first)
		require.Equal(t, map[string]string{owner.PubKey: "owner", joiner.PubKey: "member"}, e.chActive(t, open))
		require.Equal(t, e.chActive(t, open), chRoster(t, e.chLive(t, open, 39002)))
		again := join(eventtest.Channel(open), eventtest.At(first.CreatedAt+1))
		wj.MustPublish(again)
		require.True(t, eventRow(t, e.r, e.cid, again.ID).live, "a repeated join is stored")
		require.Len(t, e.chRows(t, open, 39002), 2, "a repeated join changes no state")
		notices, closed, eose := wj.Req("n", chNoticeSub(joiner))
		require.True(t, eose, closed)
		require.Len(t, notices, 1)
		require.Equal(t, chNoticeContent("member_added", open, joiner.PubKey), notices[0].Content)
	})

	t.Run("PrivateMemberAdds", func(t *testing.T) {
		t.Parallel()
		owner, member, guest, other := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner, chPrivate)
		wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, ""))
		wm := e.dial(t, member)
		wm.MustPublish(chPutEv(t, member, ch, guest.PubKey, "guest"))
		chRefused(t, wm, chPutEv(t, member, ch, other.PubKey, "admin"), "invalid: only owners/admins may grant elevated roles")
		chRefused(t, wm, chPutEv(t, member, ch, other.PubKey, "owner"), "invalid: only owners/admins may grant elevated roles")
		chRefused(t, wm, chPutEv(t, member, ch, guest.PubKey, "bot"), "invalid: only owners/admins may change an active member's role")
		chRefused(t, wm, chPutEv(t, member, ch, member.PubKey, "admin"), "invalid: only owners/admins may grant elevated roles")
		chRefused(t, wm, chPutEv(t, member, ch, other.PubKey, "king"), "invalid: invalid role: king")
		chRefused(t, wm, member.Signed(t, 9000, chNonce(), eventtest.Channel(ch)), "invalid: missing p tag")
		chRefused(t, wo, chPutEv(t, owner, ch, owner.PubKey, "admin"), "invalid: cannot demote the last owner — transfer ownership first")
		// Re-adding an active member without a role keeps the role.
		wm.MustPublish(chPutEv(t, member, ch, guest.PubKey, ""))
		want := map[string]string{owner.PubKey: "owner", member.PubKey: "member", guest.PubKey: "guest"}
		require.Equal(t, want, e.chActive(t, ch))
		require.Equal(t, want, chRoster(t, e.chLive(t, ch, 39002)))
		// The owner may change roles.
		wo.MustPublish(chPutEv(t, owner, ch, guest.PubKey, "bot"))
		wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, "owner"))
		wo.MustPublish(chPutEv(t, owner, ch, owner.PubKey, "admin"))
		want = map[string]string{owner.PubKey: "admin", member.PubKey: "owner", guest.PubKey: "bot"}
		require.Equal(t, want, e.chActive(t, ch))
		require.Equal(t, want, chRoster(t, e.chLive(t, ch, 39002)))
	})

	t.Run("AddPolicy", func(t *testing.T) {
		t.Parallel()
		owner, agent, agentOwner := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		wa := e.dial(t, agent)
		wa.MustPublish(agent.Signed(t, 10100, eventtest.Content(`{"channel_add_policy":"nobody"}`)))
		chRefused(t, wo, chPutEv(t, owner, ch, agent.PubKey, ""), "invalid: policy:nobody — this agent has disabled external channel additions")
		wa.MustPublish(chPutEv(t, agent, ch, agent.PubKey, ""))
		require.Equal(t, "member", e.chActive(t, ch)[agent.PubKey])

		ch2 := chCreate(t, wo, owner)
		// A newer version of the replaceable profile (same-second ties go to the lower id).
		wa.MustPublish(agent.Signed(t, 10100, eventtest.Content(`{"channel_add_policy":"owner_only"}`), eventtest.At(time.Now().Unix()+1)))
		chRefused(t, wo, chPutEv(t, owner, ch2, agent.PubKey, ""), "invalid: policy:owner_only — agent has no owner set")
		_, err := e.r.App.Pool().Exec(context.Background(), `UPDATE users SET agent_owner_pubkey = $3 WHERE community_id = $1 AND pubkey = $2`,
			e.cid, pubBytes(t, agent), pubBytes(t, agentOwner))
		require.NoError(t, err)
		chRefused(t, wo, chPutEv(t, owner, ch2, agent.PubKey, ""), "invalid: policy:owner_only — only the agent owner can add this agent")
		e.dial(t, agentOwner).MustPublish(chPutEv(t, agentOwner, ch2, agent.PubKey, ""))
		require.Equal(t, "member", e.chActive(t, ch2)[agent.PubKey])
	})

	t.Run("Remove", func(t *testing.T) {
		t.Parallel()
		owner, m1, m2, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		wo.MustPublish(chPutEv(t, owner, ch, m1.PubKey, ""))
		wo.MustPublish(chPutEv(t, owner, ch, m2.PubKey, ""))
		w1 := e.dial(t, m1)
		chRefused(t, w1, chRemoveEv(t, m1, ch, m2.PubKey), "invalid: actor not authorized")
		chRefused(t, wo, chRemoveEv(t, owner, ch, owner.PubKey), "invalid: cannot remove the last owner")
		chRefused(t, wo, owner.Signed(t, 9022, chNonce(), eventtest.Channel(ch)), "invalid: cannot remove the last owner")
		wx := e.dial(t, outsider)
		chRefused(t, wx, chRemoveEv(t, outsider, ch, outsider.PubKey), "invalid: actor is not an active member")
		chRefused(t, wx, outsider.Signed(t, 9022, chNonce(), eventtest.Channel(ch)), "invalid: actor is not an active member")
		// Self-removal and leave by members, removal by the owner.
		w1.MustPublish(chRemoveEv(t, m1, ch, m1.PubKey))
		wo.MustPublish(chRemoveEv(t, owner, ch, m2.PubKey))
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, e.chActive(t, ch))
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, chRoster(t, e.chLive(t, ch, 39002)))
		wo.MustPublish(chPutEv(t, owner, ch, m1.PubKey, ""))
		w1.MustPublish(m1.Signed(t, 9022, chNonce(), eventtest.Channel(ch)))
		require.Equal(t, map[string]string{owner.PubKey: "owner"}, e.chActive(t, ch))
		removed, closed, eose := w1.Req("n", map[string]any{"kinds": []int{44101}, "#p": []string{m1.PubKey}})
		require.True(t, eose, closed)
		require.Len(t, removed, 2)
		require.ElementsMatch(t, []string{chNoticeContent("member_removed", ch, m1.PubKey), chNoticeContent("member_removed", ch, m1.PubKey)},
			[]string{removed[0].Content, removed[1].Content})
	})

	t.Run("VisibilityFlip", func(t *testing.T) {
		t.Parallel()
		owner, member, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, ""))
		wm, wx := e.dial(t, member), e.dial(t, outsider)
		chSubscribe(t, wm, "m", map[string]any{"#h": []string{ch}})
		chSubscribe(t, wx, "x", map[string]any{"#h": []string{ch}})
		chSubscribe(t, wx, "x2", map[string]any{"#h": []string{ch}, "kinds": []int{9}})

		wo.MustPublish(chMetaEv(t, owner, ch, eventtest.Tag("visibility", "private")))
		frames := rpReadUntil(t, wx, func(frames [][]any) bool {
			return rpHas(frames, "CLOSED", "x", "restricted: channel access revoked") &&
				rpHas(frames, "CLOSED", "x2", "restricted: channel access revoked")
		})
		for _, f := range frames {
			require.NotEqual(t, "EVENT", f[0], "a non-member must not see the private state: %v", f)
		}
		meta := e.chLive(t, ch, 39000)
		require.Contains(t, meta.Tags, event.Tag{"private"})
		require.NotContains(t, meta.Tags, event.Tag{"public"})

		// The member's subscription stays and sees the new metadata, then new messages.
		msg := chMsg(t, owner, ch, "members only now")
		wo.MustPublish(msg)
		frames = chUntilEvent(t, wm, "m", msg.ID)
		require.False(t, rpHas(frames, "CLOSED"), "%v", frames)
		got := chEventsOf(t, frames, "m")
		require.Contains(t, chKinds(got), 39000)
		for _, ev := range got {
			if ev.Kind == 39000 {
				require.Equal(t, meta, ev)
			}
		}
		_, closed, _ := wx.Req("again", map[string]any{"#h": []string{ch}})
		require.Equal(t, "restricted: not a channel member", closed)
	})

	t.Run("Archive", func(t *testing.T) {
		t.Parallel()
		owner, member, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner, chPrivate)
		wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, ""))
		wm := e.dial(t, member)
		wo2, wx := e.dial(t, owner), e.dial(t, outsider)
		chSubscribe(t, wo2, "n", chNoticeSub(owner))
		chSubscribe(t, wm, "n", chNoticeSub(member))
		chSubscribe(t, wx, "n", chNoticeSub(outsider))

		wo.MustPublish(chMetaEv(t, owner, ch, eventtest.Tag("archived", "true")))
		chRefused(t, wm, chMsg(t, member, ch, "anyone?"), "invalid: channel is archived")
		chRefused(t, wm, chMetaEv(t, member, ch, eventtest.Tag("topic", "x")), "invalid: channel is archived")
		chRefused(t, wo, chMetaEv(t, owner, ch, eventtest.Tag("name", "renamed")), "invalid: channel is archived")
		chRefused(t, wo, chPutEv(t, owner, ch, outsider.PubKey, ""), "invalid: channel is archived")
		require.Contains(t, e.chLive(t, ch, 39000).Tags, event.Tag{"archived", "true"})
		// Archived channels stay readable.
		_, closed, eose := wm.Req("h", map[string]any{"#h": []string{ch}})
		require.True(t, eose, closed)

		unarchive := chMetaEv(t, owner, ch, eventtest.Tag("archived", "false"))
		wo.MustPublish(unarchive)
		for _, tc := range []struct {
			w   *relaytest.WS
			key eventtest.Key
		}{{wo2, owner}, {wm, member}} {
			frames := rpReadUntil(t, tc.w, func(frames [][]any) bool {
				return len(frames) > 0 && rpEventFrame(frames[len(frames)-1], "n") != ""
			})
			n := chFrameEvent(t, frames[len(frames)-1])
			e.chRequireRelaySigned(t, n)
			require.Equal(t, 44100, n.Kind)
			require.Equal(t, event.Tags{{"p", tc.key.PubKey}, {"h", ch}}, n.Tags)
			require.Equal(t, chNoticeContent("member_added", ch, owner.PubKey), n.Content)
		}
		require.NotContains(t, e.chLive(t, ch, 39000).Tags, event.Tag{"archived", "true"})
		wm.MustPublish(chMsg(t, member, ch, "back"))
		// The outsider got nothing: its next frame is the EOSE of a later REQ.
		wx.Send("REQ", "probe", map[string]any{"kinds": []int{1}, "authors": []string{outsider.PubKey}})
		require.Equal(t, []any{"EOSE", "probe"}, wx.Next())
	})

	t.Run("Metadata", func(t *testing.T) {
		t.Parallel()
		owner, member, outsider := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, ""))
		wm := e.dial(t, member)
		wm.MustPublish(chMetaEv(t, member, ch, eventtest.Tag("topic", "launch week")))
		var setBy []byte
		require.NoError(t, e.r.App.Pool().QueryRow(context.Background(), `SELECT topic_set_by FROM channels WHERE community_id = $1 AND id = $2`,
			e.cid, ch).Scan(&setBy))
		require.Equal(t, member.PubKey, hex.EncodeToString(setBy))
		require.Contains(t, e.chLive(t, ch, 39000).Tags, event.Tag{"topic", "launch week"})
		const notAuthorized = "invalid: actor not authorized for name/about/archived/visibility/ttl changes"
		for _, tag := range []eventtest.Option{eventtest.Tag("name", "mine"), eventtest.Tag("about", "x"),
			eventtest.Tag("archived", "true"), eventtest.Tag("visibility", "private"), eventtest.Tag("ttl", "60")} {
			chRefused(t, wm, chMetaEv(t, member, ch, eventtest.Tag("topic", "t"), tag), notAuthorized)
		}
		chRefused(t, wm, chMetaEv(t, member, ch, eventtest.Tag("colour", "blue")),
			"invalid: kind:9002 must include at least one metadata tag (name, about, archived, topic, purpose, visibility, ttl)")
		chRefused(t, e.dial(t, outsider), chMetaEv(t, outsider, ch, eventtest.Tag("purpose", "hijack")), "invalid: not a member")
		chRefused(t, wo, chMetaEv(t, owner, ch, eventtest.Tag("visibility", "hidden")), `invalid: invalid visibility value: hidden (must be "open" or "private")`)
		chRefused(t, wo, chMetaEv(t, owner, ch, eventtest.Tag("visibility")), "invalid: visibility tag must have a value")
		chRefused(t, wo, chMetaEv(t, owner, ch, eventtest.Tag("archived", "yes")), `invalid: invalid archived value: yes (must be "true" or "false")`)
		chRefused(t, wo, chMetaEv(t, owner, ch, eventtest.Tag("archived")), "invalid: archived tag must have a value")
		chRefused(t, wo, chMetaEv(t, owner, uuid.NewString(), eventtest.Tag("topic", "x")), "invalid: channel not found")
		wo.MustPublish(chMetaEv(t, owner, ch, eventtest.Tag("name", "#renamed"), eventtest.Tag("ttl", "60")))
		require.Equal(t, event.Tags{{"d", ch}, {"name", "renamed"}, {"public"}, {"closed"}, {"t", "stream"}, {"topic", "launch week"}},
			e.chLive(t, ch, 39000).Tags)
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		owner, admin, member, passer := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		other := chCreate(t, wo, owner)
		wo.MustPublish(chPutEv(t, owner, ch, admin.PubKey, "admin"))
		wo.MustPublish(chPutEv(t, owner, ch, member.PubKey, ""))
		wa, wm, wp := e.dial(t, admin), e.dial(t, member), e.dial(t, passer)
		chSubscribe(t, wm, "m", map[string]any{"#h": []string{ch}})
		chSubscribe(t, wp, "p", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		chSubscribe(t, wp, "both", map[string]any{"#h": []string{ch, other}, "kinds": []int{9}})

		del := func(k eventtest.Key) event.Event {
			return k.Signed(t, 9008, chNonce(), eventtest.Channel(ch))
		}
		chRefused(t, wa, del(admin), "invalid: only owner can delete group")
		chRefused(t, wm, del(member), "invalid: only owner can delete group")
		wo.MustPublish(del(owner))
		chUntilFrame(t, wm, "CLOSED", "m", "restricted: channel access revoked")
		chUntilFrame(t, wp, "CLOSED", "p", "restricted: channel access revoked")

		for _, w := range []*relaytest.WS{wo, wm, wp} {
			_, closed, eose := w.Req("h", map[string]any{"#h": []string{ch}})
			require.False(t, eose)
			require.Equal(t, "restricted: not a channel member", closed)
		}
		chRefused(t, wp, chJoinEv(t, passer, ch), "invalid: channel not found")
		chRefused(t, wm, chMsg(t, member, ch, "hello?"), "restricted: not a channel member")
		chRefused(t, wo, chMetaEv(t, owner, ch, eventtest.Tag("topic", "x")), "invalid: channel not found")
		chRefused(t, wo, del(owner), "invalid: channel not found")
		for _, kind := range []int{39000, 39001, 39002} {
			for _, s := range e.chRows(t, ch, kind) {
				require.False(t, s.live, "kind %d must be soft-deleted", kind)
			}
		}
		// The subscription on two channels lives on with the other one.
		msg := chMsg(t, owner, other, "still here")
		wo.MustPublish(msg)
		frames := chUntilEvent(t, wp, "both", msg.ID)
		require.False(t, rpHas(frames, "CLOSED", "both"), "%v", frames)
	})

	t.Run("NoticeDelivery", func(t *testing.T) {
		t.Parallel()
		owner, target := eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		wt, watcher := e.dial(t, target), e.dial(t, owner)
		chSubscribe(t, wt, "mine", chNoticeSub(target))
		chSubscribe(t, watcher, "ch", map[string]any{"#h": []string{ch}})
		wo.MustPublish(chPutEv(t, owner, ch, target.PubKey, ""))
		f, err := wt.NextErr(time.Second)
		require.NoError(t, err, "the 44100 must arrive within 1 s")
		n := chFrameEvent(t, f)
		require.Equal(t, "mine", f[1])
		require.Equal(t, 44100, n.Kind)
		require.Equal(t, event.Tags{{"p", target.PubKey}, {"h", ch}}, n.Tags)

		msg := chMsg(t, owner, ch, "welcome")
		wo.MustPublish(msg)
		got := chEventsOf(t, chUntilEvent(t, watcher, "ch", msg.ID), "ch")
		require.Equal(t, []int{9000, 39000, 39001, 39002, 9}, chKinds(got), "a channel subscription never sees 44100")
	})

	t.Run("GlobalHistory", func(t *testing.T) {
		t.Parallel()
		owner, reader := eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		p := chCreate(t, wo, owner, chPrivate)
		o1, o2 := chCreate(t, wo, owner), chCreate(t, wo, owner)
		q := chCreate(t, wo, owner, chPrivate)
		wo.MustPublish(chPutEv(t, owner, p, reader.PubKey, ""))
		var want []string
		for _, ch := range []string{p, o1, o2, q} {
			msg := chMsg(t, owner, ch, "in "+ch)
			wo.MustPublish(msg)
			if ch != q {
				want = append(want, msg.ID)
			}
		}
		evs, closed, eose := e.dial(t, reader).Req("g", map[string]any{"kinds": []int{9}, "authors": []string{owner.PubKey}})
		require.True(t, eose, closed)
		require.ElementsMatch(t, want, ids(evs))
	})

	t.Run("SameSecondMetadata", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey()
		wo := e.dial(t, owner)
		ch := chCreate(t, wo, owner)
		now := time.Now().Unix()
		wo.MustPublish(chMetaEv(t, owner, ch, eventtest.Tag("topic", "first"), eventtest.At(now)))
		wo.MustPublish(chMetaEv(t, owner, ch, eventtest.Tag("topic", "second"), eventtest.At(now)))
		rows := e.chRows(t, ch, 39000)
		require.Len(t, rows, 3)
		for i := 1; i < len(rows); i++ {
			require.Greater(t, rows[i].ev.CreatedAt, rows[i-1].ev.CreatedAt)
		}
		require.Equal(t, []bool{false, false, true}, []bool{rows[0].live, rows[1].live, rows[2].live})
		evs, closed, eose := wo.Req("m", map[string]any{"kinds": []int{39000}, "#d": []string{ch}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{rows[2].ev}, evs)
		require.Contains(t, evs[0].Tags, event.Tag{"topic", "second"})
	})
}

// chJoinEv is a 9021 by key for ch.
func chJoinEv(t testing.TB, key eventtest.Key, ch string) event.Event {
	t.Helper()
	return key.Signed(t, 9021, chNonce(), eventtest.Channel(ch))
}

// TestChannelEviction: removing P from C closes P's
// subscriptions on C alone and narrows those that also cover D.
func TestChannelEviction(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)
	for _, visibility := range []string{"open", "private"} {
		t.Run(strings.ToUpper(visibility[:1])+visibility[1:], func(t *testing.T) {
			t.Parallel()
			owner, p := eventtest.NewKey(), eventtest.NewKey()
			wo := e.dial(t, owner)
			c := chCreate(t, wo, owner, eventtest.Tag("visibility", visibility))
			d := chCreate(t, wo, owner, eventtest.Tag("visibility", visibility))
			wo.MustPublish(chPutEv(t, owner, c, p.PubKey, ""))
			wo.MustPublish(chPutEv(t, owner, d, p.PubKey, ""))
			wp := e.dial(t, p)
			chSubscribe(t, wp, "S1", map[string]any{"#h": []string{c}})
			chSubscribe(t, wp, "S2", map[string]any{"#h": []string{c, d}})

			before := chMsg(t, owner, c, "before")
			wo.MustPublish(before)
			frames := rpReadUntil(t, wp, func(frames [][]any) bool {
				return rpHas(frames, "EVENT", "S1") && rpHas(frames, "EVENT", "S2")
			})
			require.Equal(t, []string{before.ID}, ids(chEventsOf(t, frames, "S1")))
			require.Equal(t, []string{before.ID}, ids(chEventsOf(t, frames, "S2")))

			wo.MustPublish(chRemoveEv(t, owner, c, p.PubKey))
			frames = chUntilFrame(t, wp, "CLOSED", "S1", "restricted: channel access revoked")
			require.False(t, rpHas(frames, "CLOSED", "S2"), "%v", frames)

			inC, inD := chMsg(t, owner, c, "after in C"), chMsg(t, owner, d, "after in D")
			wo.MustPublish(inC)
			wo.MustPublish(inD)
			// Fan-out precedes each OK, so anything for C would be queued before D's event.
			frames = chUntilEvent(t, wp, "S2", inD.ID)
			for _, f := range frames[:len(frames)-1] {
				require.NotEqual(t, "EVENT", f[0], "nothing of C after the removal: %v", f)
				require.NotEqual(t, "CLOSED", f[0], "%v", f)
			}
			if visibility == "open" {
				// A non-member may still read an open channel, through a new subscription.
				evs, closed, eose := wp.Req("S3", map[string]any{"#h": []string{c}, "kinds": []int{9}})
				require.True(t, eose, closed)
				require.ElementsMatch(t, []string{before.ID, inC.ID}, ids(evs))
			} else {
				_, closed, _ := wp.Req("S3", map[string]any{"#h": []string{c}})
				require.Equal(t, "restricted: not a channel member", closed)
			}
		})
	}
	t.Run("Leave", func(t *testing.T) {
		t.Parallel()
		owner, p := eventtest.NewKey(), eventtest.NewKey()
		wo := e.dial(t, owner)
		c := chCreate(t, wo, owner, chPrivate)
		wo.MustPublish(chPutEv(t, owner, c, p.PubKey, ""))
		wp, wl := e.dial(t, p), e.dial(t, p)
		chSubscribe(t, wp, "S1", map[string]any{"#h": []string{c}, "kinds": []int{9}})
		wl.MustPublish(p.Signed(t, 9022, chNonce(), eventtest.Channel(c)))
		chUntilFrame(t, wp, "CLOSED", "S1", "restricted: channel access revoked")
	})
}

// TestChannelRosterConcurrency: 20 concurrent 9000/9001 by an owner over
// several connections leave a consistent roster and state history.
func TestChannelRosterConcurrency(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)
	owner := eventtest.NewKey()
	wo := e.dial(t, owner)
	ch := chCreate(t, wo, owner, chPrivate)
	leaving := make([]eventtest.Key, 10)
	for i := range leaving {
		leaving[i] = eventtest.NewKey()
		wo.MustPublish(chPutEv(t, owner, ch, leaving[i].PubKey, ""))
	}
	joining := make([]eventtest.Key, 10)
	for i := range joining {
		joining[i] = eventtest.NewKey()
	}

	const conns = 4
	ws := make([]*relaytest.WS, conns)
	for i := range ws {
		ws[i] = e.dial(t, owner)
	}
	pending := make([]map[string]bool, conns)
	for i := range pending {
		pending[i] = map[string]bool{}
	}
	for i := 0; i < 10; i++ {
		for j, ev := range []event.Event{
			chPutEv(t, owner, ch, joining[i].PubKey, []string{"", "member", "guest", "bot", "admin"}[i%5]),
			chRemoveEv(t, owner, ch, leaving[i].PubKey),
		} {
			c := (2*i + j) % conns
			pending[c][ev.ID] = true
			ws[c].Send("EVENT", ev)
		}
	}
	// The changes serialise on the channel row, so an answer may wait for
	// all the others: allow more than the 5 s of Next under a loaded -race run.
	for i, w := range ws {
		for len(pending[i]) > 0 {
			f, err := w.NextErr(30 * time.Second)
			require.NoError(t, err)
			if f[0] != "OK" {
				continue // state events of the channel never reach these connections, but be lenient
			}
			require.True(t, pending[i][f[1].(string)], "%v", f)
			delete(pending[i], f[1].(string))
			require.Equal(t, true, f[2], "%v", f)
			require.Equal(t, "", f[3], "%v", f)
		}
	}

	want := map[string]string{owner.PubKey: "owner"}
	for i, k := range joining {
		role := []string{"member", "member", "guest", "bot", "admin"}[i%5]
		want[k.PubKey] = role
	}
	require.Equal(t, want, e.chActive(t, ch))
	require.Equal(t, want, chRoster(t, e.chLive(t, ch, 39002)))
	admins := e.chLive(t, ch, 39001)
	var wantAdmins event.Tags
	for pub, role := range want {
		if role == "owner" || role == "admin" {
			wantAdmins = append(wantAdmins, event.Tag{"p", pub, role})
		}
	}
	require.ElementsMatch(t, wantAdmins, admins.Tags[1:])
	e.chLive(t, ch, 39000)
	for _, kind := range []int{39000, 39001, 39002} {
		rows := e.chRows(t, ch, kind)
		require.Len(t, rows, 1+10+20, "one version per change of kind %d", kind)
		for i := 1; i < len(rows); i++ {
			require.Greater(t, rows[i].ev.CreatedAt, rows[i-1].ev.CreatedAt, "kind %d versions", kind)
		}
		require.True(t, rows[len(rows)-1].live, "the newest version of kind %d is the live one", kind)
		e.chRequireRelaySigned(t, rows[len(rows)-1].ev)
	}
	// Every roster version lists the owner, and each notice went out once.
	for _, s := range e.chRows(t, ch, 39002) {
		require.Equal(t, "owner", chRoster(t, s.ev)[owner.PubKey])
	}
	notices := func(kind int, k eventtest.Key) int {
		return countRows(t, e.r, `SELECT count(*) FROM events WHERE community_id = $1 AND kind = $2
			AND tags @> jsonb_build_array(jsonb_build_array('p', $3::text)) AND tags @> jsonb_build_array(jsonb_build_array('h', $4::text))`,
			e.cid, kind, k.PubKey, ch)
	}
	for i := range joining {
		require.Equal(t, 1, notices(44100, joining[i]))
		require.Equal(t, 1, notices(44101, leaving[i]))
	}
	// A member's view of the roster equals the table.
	evs, closed, eose := e.dial(t, joining[0]).Req("r", map[string]any{"kinds": []int{39002}, "#d": []string{ch}})
	require.True(t, eose, closed)
	require.Len(t, evs, 1)
	require.Equal(t, want, chRoster(t, evs[0]))
}
