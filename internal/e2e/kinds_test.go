package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// kindsBundle is one relay with an author and an open channel.
type kindsBundle struct {
	r       *relaytest.Relay
	cid     string
	channel string
}

func setupKinds(t *testing.T) *kindsBundle {
	t.Helper()
	r := relaytest.Start(t, nil)
	cid := communityID(t, r, r.Host)
	return &kindsBundle{r: r, cid: cid, channel: insertChannel(t, r, cid, eventtest.NewKey(), channelOpts{})}
}

// dial returns a connection authenticated as key.
func (b *kindsBundle) dial(t *testing.T, key eventtest.Key) *relaytest.WS {
	t.Helper()
	w := b.r.Dial(t, "")
	w.Auth(key)
	return w
}

// TestKindsAccepted is checks 30, 31, 35, 36 and 39: a valid example of
// every kind accepted today is stored with the channel of docs/PROTOCOL.md §4.3, and every
// ephemeral kind is accepted on the WebSocket and never stored.
func TestKindsAccepted(t *testing.T) {
	t.Parallel()
	b := setupKinds(t)
	now := time.Now().Unix()

	type acceptCase struct {
		name string
		// build returns the event; w is authenticated as author.
		build func(t *testing.T, author eventtest.Key, w *relaytest.WS) event.Event
		// inChannel: stored with the bundle's channel, otherwise NULL.
		inChannel bool
	}
	plain := func(kind int, opts ...eventtest.Option) func(*testing.T, eventtest.Key, *relaytest.WS) event.Event {
		return func(t *testing.T, author eventtest.Key, _ *relaytest.WS) event.Event {
			return author.Signed(t, kind, opts...)
		}
	}
	inChannel := func(kind int) func(*testing.T, eventtest.Key, *relaytest.WS) event.Event {
		return func(t *testing.T, author eventtest.Key, _ *relaytest.WS) event.Event {
			return author.Signed(t, kind, eventtest.Channel(b.channel))
		}
	}
	cases := []acceptCase{
		{name: "Kind0Profile", build: plain(0, eventtest.Content(`{"name":"alice"}`))},
		{name: "Kind1Note", build: plain(1)},
		{name: "Kind1WithHIsGlobal", build: plain(1, eventtest.Channel(b.channel))},
		{name: "Kind3Contacts", build: plain(3, eventtest.Content(""), eventtest.Tag("p", hex64(7)))},
		{name: "Kind5Deletion", build: func(t *testing.T, author eventtest.Key, w *relaytest.WS) event.Event {
			note := author.Signed(t, 1)
			w.MustPublish(note)
			return author.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", note.ID))
		}},
		{name: "Kind7Reaction", build: func(t *testing.T, author eventtest.Key, w *relaytest.WS) event.Event {
			note := author.Signed(t, 1)
			w.MustPublish(note)
			return author.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", note.ID))
		}},
		{name: "Kind7ReactionInChannel", inChannel: true, build: func(t *testing.T, author eventtest.Key, w *relaytest.WS) event.Event {
			msg := author.Signed(t, 9, eventtest.Channel(b.channel))
			w.MustPublish(msg)
			return author.Signed(t, 7, eventtest.Content("🔥"), eventtest.Tag("e", msg.ID))
		}},
		{name: "Kind9StreamMessage", inChannel: true, build: inChannel(9)},
		{name: "Kind40002StreamMessageV2", inChannel: true, build: inChannel(40002)},
		{name: "Kind45001ForumPost", inChannel: true, build: inChannel(45001)},
		{name: "Kind45003ForumComment", inChannel: true, build: inChannel(45003)},
		{name: "Kind1059GiftWrapForeignPubkey", build: func(t *testing.T, _ eventtest.Key, _ *relaytest.WS) event.Event {
			return eventtest.NewKey().Signed(t, 1059, eventtest.Content("sealed"), eventtest.Tag("p", hex64(9)), eventtest.Channel(b.channel))
		}},
		{name: "Kind10000MuteList", build: plain(10000, eventtest.Tag("p", hex64(3)))},
		{name: "Kind10001PinList", build: plain(10001, eventtest.Tag("e", hex64(4)))},
		{name: "Kind10002RelayList", build: plain(10002, eventtest.Tag("r", "wss://relay.example"))},
		{name: "Kind10003BookmarkList", build: plain(10003, eventtest.Tag("e", hex64(5)))},
		{name: "Kind10030EmojiList", build: plain(10030, eventtest.Tag("emoji", "smile", "https://x.test/smile.png"))},
		{name: "Kind10100AgentProfile", build: plain(10100, eventtest.Content(`{"channel_add_policy":"anyone"}`))},
		{name: "Kind30000FollowSet", build: plain(30000, eventtest.Tag("d", "friends"), eventtest.Tag("p", hex64(6)))},
		{name: "Kind30003BookmarkSet", build: plain(30003, eventtest.Tag("d", "reading"))},
		{name: "Kind30023Article", build: plain(30023, eventtest.Tag("d", "article"), eventtest.Content("# Title"))},
		{name: "Kind30030EmojiSet", build: plain(30030, eventtest.Tag("d", "faces"), eventtest.Tag("emoji", "wink", "https://x.test/w.png"))},
		{name: "Kind30078AppData", build: plain(30078, eventtest.Tag("d", "com.example.settings"), eventtest.Content(`{"theme":"dark"}`))},
		{name: "Kind30174Engram", build: plain(30174, eventtest.Tag("d", hex64(0x11)), eventtest.Tag("p", hex64(0x22)), eventtest.Content(engramContent(2)))},
		{name: "Kind30315UserStatus", build: plain(30315, eventtest.Tag("d", "general"), eventtest.Content("working"), eventtest.At(now))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			author := eventtest.NewKey()
			w := b.dial(t, author)
			ev := tc.build(t, author, w)
			w.MustPublish(ev)
			row := eventRow(t, b.r, b.cid, ev.ID)
			require.True(t, row.found)
			require.True(t, row.live)
			if tc.inChannel {
				require.NotNil(t, row.channel)
				require.Equal(t, b.channel, *row.channel)
			} else {
				require.Nil(t, row.channel)
			}
			evs, closed, eose := w.Req("q", map[string]any{"ids": []string{ev.ID}})
			require.True(t, eose, closed)
			require.Equal(t, []event.Event{ev}, evs)
		})
	}

	for _, kind := range []int{20001, 20002, 24200, 25000, 29999} {
		t.Run("Ephemeral"+itoa(kind), func(t *testing.T) {
			t.Parallel()
			author := eventtest.NewKey()
			w := b.dial(t, author)
			global := author.Signed(t, kind, eventtest.Content("online"))
			w.MustPublish(global)
			scoped := author.Signed(t, kind, eventtest.Content("typing"), eventtest.Channel(b.channel))
			w.MustPublish(scoped)
			require.Zero(t, countRows(t, b.r, `SELECT count(*) FROM events WHERE id = ANY($1)`,
				[][]byte{idBytes(t, global.ID), idBytes(t, scoped.ID)}))
		})
	}

	t.Run("MentionsIndex", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		a := hex64(0xa1)
		ev := author.Signed(t, 9, eventtest.Channel(b.channel), eventtest.Tag("p", a), eventtest.Tag("p", a),
			eventtest.Tag("p", strings.ToUpper(hex64(0xb2))), eventtest.Tag("p", "short"))
		w.MustPublish(ev)
		rows, err := b.r.App.Pool().Query(context.Background(), `SELECT pubkey_hex, channel_id::text, event_kind FROM event_mentions
			WHERE community_id = $1 AND event_id = $2`, b.cid, idBytes(t, ev.ID))
		require.NoError(t, err)
		type mention struct {
			pubkey, channel string
			kind            int
		}
		var got []mention
		for rows.Next() {
			var m mention
			require.NoError(t, rows.Scan(&m.pubkey, &m.channel, &m.kind))
			got = append(got, m)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []mention{{pubkey: a, channel: b.channel, kind: 9}}, got)
	})

	t.Run("AgentProfileSetsPolicy", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		w.MustPublish(author.Signed(t, 10100, eventtest.Content(`{"channel_add_policy":"nobody"}`)))
		var policy string
		require.NoError(t, b.r.App.Pool().QueryRow(context.Background(),
			`SELECT channel_add_policy::text FROM users WHERE community_id = $1 AND pubkey = $2`, b.cid, pubBytes(t, author)).Scan(&policy))
		require.Equal(t, "nobody", policy)
		ok, msg := w.Publish(author.Signed(t, 10100, eventtest.Content(`{"channel_add_policy":"sometimes"}`)))
		require.False(t, ok)
		require.Equal(t, "invalid: kind:10100 content must set channel_add_policy to anyone, owner_only or nobody", msg)
	})

	t.Run("ForeignPubkeyOnlyForGiftWrap", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		ok, msg := w.Publish(eventtest.NewKey().Signed(t, 1))
		require.False(t, ok)
		require.Equal(t, "invalid: event pubkey does not match authenticated identity", msg)
		ok, msg = w.Publish(eventtest.NewKey().Signed(t, 1059, eventtest.Tag("p", author.PubKey)))
		require.True(t, ok)
		require.Equal(t, "", msg)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestKindsRefused is checks 20, 32, 33 and 34: unknown, relay-only and
// WebSocket-only kinds.
func TestKindsRefused(t *testing.T) {
	t.Parallel()
	b := setupKinds(t)
	type refuseCase struct {
		kind int
		ws   string
		http string // "" = not sent over HTTP
	}
	const unknown = "restricted: unknown event kind"
	cases := []refuseCase{
		{kind: 9030, ws: unknown, http: unknown},
		{kind: 9031, ws: unknown, http: unknown},
		{kind: 9032, ws: unknown, http: unknown},
		{kind: 28936, ws: unknown, http: "invalid: kind 28936 is only accepted via WebSocket"},
		{kind: 41, ws: unknown, http: unknown},
		{kind: 1063, ws: unknown, http: unknown},
		{kind: 1984, ws: unknown, http: unknown},
		{kind: 9009, ws: unknown, http: unknown},
		{kind: 9040, ws: unknown, http: unknown},
		{kind: 30300, ws: unknown, http: unknown},
		{kind: 40099, ws: unknown, http: unknown},
		{kind: 41010, ws: unknown, http: unknown},
		{kind: 39000, ws: "restricted: relay-only kind", http: "restricted: relay-only kind"},
		// The NIP-CW overlays (docs/NIP-CW.md §2): thread summary,
		// channel-window bounds, thread-window bounds.
		{kind: 39005, ws: "restricted: relay-only kind", http: "restricted: relay-only kind"},
		{kind: 39006, ws: "restricted: relay-only kind", http: "restricted: relay-only kind"},
		{kind: 39007, ws: "restricted: relay-only kind", http: "restricted: relay-only kind"},
		{kind: 44100, ws: "invalid: membership notifications are relay-signed only", http: "invalid: membership notifications are relay-signed only"},
		{kind: 1059, http: "invalid: kind 1059 is only accepted via WebSocket"},
		{kind: 20002, http: "invalid: kind 20002 is only accepted via WebSocket"},
	}
	for _, tc := range cases {
		t.Run("Kind"+itoa(tc.kind), func(t *testing.T) {
			t.Parallel()
			author := eventtest.NewKey()
			if tc.ws != "" {
				w := b.dial(t, author)
				ev := author.Signed(t, tc.kind, eventtest.Channel(b.channel))
				ok, msg := w.Publish(ev)
				require.False(t, ok)
				require.Equal(t, tc.ws, msg)
				require.False(t, eventRow(t, b.r, b.cid, ev.ID).found)
			}
			ev := author.Signed(t, tc.kind, eventtest.Content("over http"))
			status, body := b.r.PostEvent(t, "", author, ev)
			require.Equal(t, http.StatusBadRequest, status, body)
			require.JSONEq(t, errorBody(t, tc.http), body)
			require.False(t, eventRow(t, b.r, b.cid, ev.ID).found)
		})
	}
}

// TestReactions is checks 62 and 63.
func TestReactions(t *testing.T) {
	t.Parallel()
	b := setupKinds(t)
	owner := eventtest.NewKey()
	target := owner.Signed(t, 9, eventtest.Channel(b.channel), eventtest.Content("react to me"))
	b.dial(t, owner).MustPublish(target)

	type reactionRow struct {
		emoji   string
		removed bool
		source  string
	}
	reactionRows := func(t *testing.T, reactor eventtest.Key) []reactionRow {
		t.Helper()
		rows, err := b.r.App.Pool().Query(context.Background(), `SELECT emoji, removed_at IS NOT NULL, encode(reaction_event_id, 'hex')
			FROM reactions WHERE community_id = $1 AND event_id = $2 AND pubkey = $3 ORDER BY emoji`,
			b.cid, idBytes(t, target.ID), pubBytes(t, reactor))
		require.NoError(t, err)
		var out []reactionRow
		for rows.Next() {
			var rr reactionRow
			require.NoError(t, rows.Scan(&rr.emoji, &rr.removed, &rr.source))
			out = append(out, rr)
		}
		require.NoError(t, rows.Err())
		return out
	}

	t.Run("DuplicateThenReactivate", func(t *testing.T) {
		t.Parallel()
		reactor := eventtest.NewKey()
		w := b.dial(t, reactor)
		now := time.Now().Unix()
		first := reactor.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.At(now-5))
		w.MustPublish(first)
		row := eventRow(t, b.r, b.cid, first.ID)
		require.NotNil(t, row.channel, "a reaction takes its target's channel")
		require.Equal(t, b.channel, *row.channel)
		require.Equal(t, []reactionRow{{emoji: "+", source: first.ID}}, reactionRows(t, reactor))

		second := reactor.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.At(now-4))
		ok, msg := w.Publish(second)
		require.False(t, ok)
		require.Equal(t, "duplicate: reaction already exists", msg)
		require.False(t, eventRow(t, b.r, b.cid, second.ID).found)

		ok, msg = w.Publish(first)
		require.False(t, ok)
		require.Equal(t, "duplicate: reaction already exists", msg)

		del := reactor.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", first.ID), eventtest.At(now-3))
		w.MustPublish(del)
		require.Equal(t, []reactionRow{{emoji: "+", removed: true, source: first.ID}}, reactionRows(t, reactor))
		delRow := eventRow(t, b.r, b.cid, del.ID)
		require.NotNil(t, delRow.channel, "a deletion takes its target's channel")
		require.Equal(t, b.channel, *delRow.channel)

		third := reactor.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.At(now-2))
		w.MustPublish(third)
		require.Equal(t, []reactionRow{{emoji: "+", source: third.ID}}, reactionRows(t, reactor))
	})
	t.Run("EmptyContentIsPlus", func(t *testing.T) {
		t.Parallel()
		reactor := eventtest.NewKey()
		w := b.dial(t, reactor)
		ev := reactor.Signed(t, 7, eventtest.Content(""), eventtest.Tag("e", target.ID))
		w.MustPublish(ev)
		require.Equal(t, []reactionRow{{emoji: "+", source: ev.ID}}, reactionRows(t, reactor))
		ok, msg := w.Publish(reactor.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", target.ID), eventtest.At(ev.CreatedAt+1)))
		require.False(t, ok)
		require.Equal(t, "duplicate: reaction already exists", msg)
	})
	t.Run("LastETagIsTarget", func(t *testing.T) {
		t.Parallel()
		reactor := eventtest.NewKey()
		w := b.dial(t, reactor)
		ev := reactor.Signed(t, 7, eventtest.Content("👍"), eventtest.Tag("e", hex64(0x99)), eventtest.Tag("e", target.ID))
		w.MustPublish(ev)
		require.Equal(t, []reactionRow{{emoji: "👍", source: ev.ID}}, reactionRows(t, reactor))
	})
	t.Run("WithoutE", func(t *testing.T) {
		t.Parallel()
		reactor := eventtest.NewKey()
		ok, msg := b.dial(t, reactor).Publish(reactor.Signed(t, 7, eventtest.Content("+")))
		require.False(t, ok)
		require.Equal(t, "invalid: reaction must reference a target event via e tag", msg)
	})
	t.Run("EmojiLength", func(t *testing.T) {
		t.Parallel()
		reactor := eventtest.NewKey()
		w := b.dial(t, reactor)
		ok, msg := w.Publish(reactor.Signed(t, 7, eventtest.Content(strings.Repeat("a", 65)), eventtest.Tag("e", target.ID)))
		require.False(t, ok)
		require.Equal(t, "invalid: reaction emoji exceeds 64 characters (got 65)", msg)
		max := strings.Repeat("😀", 64)
		ev := reactor.Signed(t, 7, eventtest.Content(max), eventtest.Tag("e", target.ID))
		w.MustPublish(ev)
		require.Equal(t, []reactionRow{{emoji: max, source: ev.ID}}, reactionRows(t, reactor))
	})
	t.Run("DeletedTarget", func(t *testing.T) {
		t.Parallel()
		reactor := eventtest.NewKey()
		w := b.dial(t, reactor)
		note := reactor.Signed(t, 1)
		w.MustPublish(note)
		w.MustPublish(reactor.Signed(t, 5, eventtest.Tag("e", note.ID)))
		ok, msg := w.Publish(reactor.Signed(t, 7, eventtest.Content("+"), eventtest.Tag("e", note.ID)))
		require.False(t, ok)
		require.Equal(t, "invalid: reaction target event not found", msg)
	})
}

// TestDeletions is checks 65 and 66.
func TestDeletions(t *testing.T) {
	t.Parallel()
	b := setupKinds(t)

	t.Run("ByAuthor", func(t *testing.T) {
		t.Parallel()
		author, other := eventtest.NewKey(), eventtest.NewKey()
		w := b.dial(t, author)
		note := author.Signed(t, 1, eventtest.Content("to be deleted"))
		w.MustPublish(note)

		ok, msg := b.dial(t, other).Publish(other.Signed(t, 5, eventtest.Tag("e", note.ID)))
		require.False(t, ok)
		require.Equal(t, "invalid: must be event author", msg)
		ok, msg = w.Publish(author.Signed(t, 5, eventtest.Tag("e", note.ID), eventtest.Tag("e", hex64(1))))
		require.False(t, ok)
		require.Equal(t, "invalid: deletion events must reference exactly one target via e or a tag (got e=2, a=0)", msg)
		evs, _, _ := w.Req("before", map[string]any{"ids": []string{note.ID}})
		require.Equal(t, []string{note.ID}, ids(evs))

		del := author.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", note.ID))
		w.MustPublish(del)
		evs, closed, eose := w.Req("after", map[string]any{"ids": []string{note.ID}})
		require.True(t, eose, closed)
		require.Empty(t, evs)
		require.Empty(t, query(t, b.r, "", author, `[{"ids":["`+note.ID+`"]}]`))
		evs, closed, eose = w.Req("dels", map[string]any{"authors": []string{author.PubKey}, "kinds": []int{5}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{del}, evs)
		require.Equal(t, []string{del.ID}, query(t, b.r, "", author, `[{"authors":["`+author.PubKey+`"],"kinds":[5]}]`))
		row := eventRow(t, b.r, b.cid, note.ID)
		require.True(t, row.found, "deletion is soft")
		require.False(t, row.live)

		// Deleting again stores the new deletion.
		again := author.Signed(t, 5, eventtest.Content("again"), eventtest.Tag("e", note.ID))
		w.MustPublish(again)
		require.True(t, eventRow(t, b.r, b.cid, again.ID).live)
	})
	t.Run("AddressableCoordinate", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		now := time.Now().Unix()
		coord := "30023:" + author.PubKey + ":article"
		filter := map[string]any{"kinds": []int{30023}, "authors": []string{author.PubKey}, "#d": []string{"article"}}
		v1 := author.Signed(t, 30023, eventtest.Tag("d", "article"), eventtest.Content("v1"), eventtest.At(now-20))
		w.MustPublish(v1)
		w.MustPublish(author.Signed(t, 5, eventtest.Tag("a", coord), eventtest.At(now-15)))
		evs, closed, eose := w.Req("gone", filter)
		require.True(t, eose, closed)
		require.Empty(t, evs)
		require.False(t, eventRow(t, b.r, b.cid, v1.ID).live)

		v2 := author.Signed(t, 30023, eventtest.Tag("d", "article"), eventtest.Content("v2"), eventtest.At(now-10))
		w.MustPublish(v2)
		evs, closed, eose = w.Req("newer", filter)
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{v2}, evs)

		// A deletion older than the live head leaves it.
		w.MustPublish(author.Signed(t, 5, eventtest.Tag("a", coord), eventtest.At(now-12)))
		evs, closed, eose = w.Req("kept", filter)
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{v2}, evs)
		require.Equal(t, []string{v2.ID}, query(t, b.r, "", author, `[{"kinds":[30023],"authors":["`+author.PubKey+`"]}]`))
	})
}

// TestReplaceable is checks 67, 68 and 69.
func TestReplaceable(t *testing.T) {
	t.Parallel()
	b := setupKinds(t)
	liveIDs := func(t *testing.T, author eventtest.Key, kind int) []string {
		t.Helper()
		rows, err := b.r.App.Pool().Query(context.Background(), `SELECT encode(id, 'hex') FROM events
			WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND deleted_at IS NULL ORDER BY d_tag, id`,
			b.cid, kind, pubBytes(t, author))
		require.NoError(t, err)
		out := []string{}
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			out = append(out, id)
		}
		require.NoError(t, rows.Err())
		return out
	}

	t.Run("OlderProfileIsDuplicate", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		now := time.Now().Unix()
		newer := author.Signed(t, 0, eventtest.Content(`{"name":"new"}`), eventtest.At(now))
		older := author.Signed(t, 0, eventtest.Content(`{"name":"old"}`), eventtest.At(now-10))
		w.MustPublish(newer)
		ok, msg := w.Publish(older)
		require.True(t, ok)
		require.Equal(t, "duplicate:", msg)
		require.False(t, eventRow(t, b.r, b.cid, older.ID).found)
		evs, closed, eose := w.Req("p", map[string]any{"kinds": []int{0}, "authors": []string{author.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, []event.Event{newer}, evs)
	})
	for _, lowFirst := range []bool{true, false} {
		name := "TieKeepsLowerIDHighFirst"
		if lowFirst {
			name = "TieKeepsLowerIDLowFirst"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			author := eventtest.NewKey()
			w := b.dial(t, author)
			ts := time.Now().Unix() - 5
			low := author.Signed(t, 0, eventtest.Content(`{"name":"a"}`), eventtest.At(ts))
			high := author.Signed(t, 0, eventtest.Content(`{"name":"b"}`), eventtest.At(ts))
			if high.ID < low.ID {
				low, high = high, low
			}
			if lowFirst {
				w.MustPublish(low)
				ok, msg := w.Publish(high)
				require.True(t, ok)
				require.Equal(t, "duplicate:", msg)
			} else {
				w.MustPublish(high)
				w.MustPublish(low)
			}
			require.Equal(t, []string{low.ID}, liveIDs(t, author, 0))
			evs, closed, eose := w.Req("p", map[string]any{"kinds": []int{0}, "authors": []string{author.PubKey}})
			require.True(t, eose, closed)
			require.Equal(t, []event.Event{low}, evs)
		})
	}
	t.Run("AddressableIgnoresStrayH", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		other := insertChannel(t, b.r, b.cid, author, channelOpts{})
		now := time.Now().Unix()
		first := author.Signed(t, 30023, eventtest.Tag("d", "post"), eventtest.Channel(b.channel), eventtest.At(now-5))
		second := author.Signed(t, 30023, eventtest.Tag("d", "post"), eventtest.Channel(other), eventtest.At(now-4))
		elsewhere := author.Signed(t, 30023, eventtest.Tag("d", "other"), eventtest.Channel(other), eventtest.At(now-3))
		w.MustPublish(first)
		w.MustPublish(second)
		w.MustPublish(elsewhere)
		require.ElementsMatch(t, []string{second.ID, elsewhere.ID}, liveIDs(t, author, 30023))
		require.False(t, eventRow(t, b.r, b.cid, first.ID).live)
		require.Nil(t, eventRow(t, b.r, b.cid, second.ID).channel)
	})
	t.Run("DTagLength", func(t *testing.T) {
		t.Parallel()
		author := eventtest.NewKey()
		w := b.dial(t, author)
		ok, msg := w.Publish(author.Signed(t, 30023, eventtest.Tag("d", strings.Repeat("é", 512)+"x")))
		require.False(t, ok)
		require.Equal(t, "invalid: d tag too long (1025 bytes, max 1024)", msg)
		w.MustPublish(author.Signed(t, 30023, eventtest.Tag("d", strings.Repeat("d", 1024))))
	})
}
