package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// thRow is an event's thread_metadata row as the database holds it.
type thRow struct {
	depth, replies, descendants int
	broadcast                   bool
	parent, root                string // "" for a top-level row
}

// thRowOf returns the thread row of id; found is false when there is none.
func (e *chEnv) thRowOf(t *testing.T, id string) (r thRow, found bool) {
	t.Helper()
	err := e.r.App.Pool().QueryRow(context.Background(), `SELECT depth, reply_count, descendant_count, broadcast,
			COALESCE(encode(parent_event_id, 'hex'), ''), COALESCE(encode(root_event_id, 'hex'), '')
		FROM thread_metadata WHERE community_id = $1 AND event_id = $2`, e.cid, idBytes(t, id)).
		Scan(&r.depth, &r.replies, &r.descendants, &r.broadcast, &r.parent, &r.root)
	if errors.Is(err, pgx.ErrNoRows) {
		return thRow{}, false
	}
	require.NoError(t, err)
	return r, true
}

func (e *chEnv) thRow(t *testing.T, id string) thRow {
	t.Helper()
	r, found := e.thRowOf(t, id)
	require.True(t, found, "no thread row for %s", id)
	return r
}

// thReply is a kind 9 reply in ch with NIP-10 marked tags; root "" leaves
// the root marker out.
func thReply(t testing.TB, author eventtest.Key, ch, root, parent string, opts ...eventtest.Option) event.Event {
	t.Helper()
	base := []eventtest.Option{eventtest.Channel(ch), eventtest.Content("re: " + uuid.NewString()[:8])}
	if root != "" {
		base = append(base, eventtest.Tag("e", root, "", "root"))
	}
	base = append(base, eventtest.Tag("e", parent, "", "reply"))
	return author.Signed(t, 9, append(base, opts...)...)
}

// thSetup is a relay with an open channel owned by owner.
func thSetup(t *testing.T, e *chEnv) (owner eventtest.Key, w *relaytest.WS, ch string) {
	t.Helper()
	owner = eventtest.NewKey()
	w = e.dial(t, owner)
	return owner, w, chCreate(t, w, owner)
}

// TestThreads covers docs/PROTOCOL.md §6.1 and the 9005 rules of docs/PROTOCOL.md §5.3.
func TestThreads(t *testing.T) {
	t.Parallel()
	e := chSetup(t, nil)

	t.Run("Counters", func(t *testing.T) {
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		root := chMsg(t, owner, ch, "root")
		w.MustPublish(root)
		_, found := e.thRowOf(t, root.ID)
		require.False(t, found, "a top-level message has no thread row")
		a := thReply(t, owner, ch, "", root.ID)
		w.MustPublish(a)
		b := thReply(t, owner, ch, root.ID, a.ID)
		w.MustPublish(b)
		require.Equal(t, thRow{depth: 1, parent: root.ID, root: root.ID, replies: 1}, e.thRow(t, a.ID))
		require.Equal(t, thRow{depth: 2, parent: a.ID, root: root.ID}, e.thRow(t, b.ID))
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 2}, e.thRow(t, root.ID))
		// A top-level message that only names its root writes no row.
		onlyRoot := owner.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("e", root.ID, "", "root"))
		w.MustPublish(onlyRoot)
		_, found = e.thRowOf(t, onlyRoot.ID)
		require.False(t, found)
		// Unmarked e tags do not make a reply.
		unmarked := owner.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("e", a.ID))
		w.MustPublish(unmarked)
		_, found = e.thRowOf(t, unmarked.ID)
		require.False(t, found)
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 2}, e.thRow(t, root.ID))
		// Other thread kinds thread the same way; resubmission changes no counter.
		c := owner.Signed(t, 40002, eventtest.Channel(ch), eventtest.Content("v2"), eventtest.Tag("e", root.ID, "", "root"), eventtest.Tag("e", a.ID, "", "reply"))
		w.MustPublish(c)
		ok, msg := w.Publish(c)
		require.True(t, ok)
		require.Equal(t, "duplicate:", msg)
		require.Equal(t, thRow{depth: 2, parent: a.ID, root: root.ID}, e.thRow(t, c.ID))
		require.Equal(t, thRow{depth: 1, parent: root.ID, root: root.ID, replies: 2}, e.thRow(t, a.ID))
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 3}, e.thRow(t, root.ID))
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		other := chCreate(t, w, owner)
		root := chMsg(t, owner, ch, "root")
		w.MustPublish(root)
		elsewhere := chMsg(t, owner, other, "elsewhere")
		w.MustPublish(elsewhere)
		note := owner.Signed(t, 1, eventtest.Content("global"))
		w.MustPublish(note)
		a := thReply(t, owner, ch, root.ID, root.ID)
		w.MustPublish(a)
		second := chMsg(t, owner, ch, "another root")
		w.MustPublish(second)

		chRefused(t, w, thReply(t, owner, ch, "", hex64(0x42)), "invalid: reply parent not found")
		chRefused(t, w, thReply(t, owner, ch, "", elsewhere.ID), "invalid: parent event belongs to a different channel")
		chRefused(t, w, thReply(t, owner, ch, "", note.ID), "invalid: parent event has no channel association")
		chRefused(t, w, thReply(t, owner, ch, second.ID, a.ID), "invalid: root tag does not match thread ancestry")
		chRefused(t, w, thReply(t, owner, ch, a.ID, a.ID), "invalid: root tag does not match thread ancestry")
		// A deleted parent is gone.
		gone := chMsg(t, owner, ch, "soon gone")
		w.MustPublish(gone)
		w.MustPublish(owner.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", gone.ID)))
		chRefused(t, w, thReply(t, owner, ch, "", gone.ID), "invalid: reply parent not found")
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 1}, e.thRow(t, root.ID))
	})

	t.Run("DepthLimit", func(t *testing.T) {
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		root := chMsg(t, owner, ch, "deep")
		w.MustPublish(root)
		parent := root.ID
		for depth := 1; depth <= 100; depth++ {
			reply := thReply(t, owner, ch, root.ID, parent)
			w.MustPublish(reply)
			parent = reply.ID
		}
		require.Equal(t, 100, e.thRow(t, parent).depth)
		chRefused(t, w, thReply(t, owner, ch, root.ID, parent), "invalid: thread depth limit exceeded")
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 100}, e.thRow(t, root.ID))
	})

	t.Run("Broadcast", func(t *testing.T) {
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		root := chMsg(t, owner, ch, "root")
		w.MustPublish(root)
		loud := thReply(t, owner, ch, root.ID, root.ID, eventtest.Tag("broadcast", "1"))
		w.MustPublish(loud)
		quiet := thReply(t, owner, ch, root.ID, root.ID, eventtest.Tag("broadcast", "0"))
		w.MustPublish(quiet)
		require.True(t, e.thRow(t, loud.ID).broadcast)
		require.False(t, e.thRow(t, quiet.ID).broadcast)
	})

	t.Run("DeletionCounters", func(t *testing.T) {
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		root := chMsg(t, owner, ch, "root")
		w.MustPublish(root)
		a := thReply(t, owner, ch, root.ID, root.ID)
		w.MustPublish(a)
		b := thReply(t, owner, ch, root.ID, a.ID)
		w.MustPublish(b)
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 2}, e.thRow(t, root.ID))

		del := owner.Signed(t, 5, eventtest.Content("first"), eventtest.Tag("e", b.ID))
		w.MustPublish(del)
		require.Equal(t, 0, e.thRow(t, a.ID).replies)
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 1}, e.thRow(t, root.ID))
		require.Equal(t, ch, *eventRow(t, e.r, e.cid, del.ID).channel, "a deletion is stored in its target's channel")

		again := owner.Signed(t, 5, eventtest.Content("second"), eventtest.Tag("e", b.ID))
		w.MustPublish(again)
		require.True(t, eventRow(t, e.r, e.cid, again.ID).live, "the second deletion is stored")
		require.Equal(t, 0, e.thRow(t, a.ID).replies)
		require.Equal(t, thRow{depth: 0, replies: 1, descendants: 1}, e.thRow(t, root.ID))

		// Counters never go below 0.
		_, err := e.r.App.Pool().Exec(context.Background(), `UPDATE thread_metadata SET reply_count = 0, descendant_count = 0
			WHERE community_id = $1 AND event_id = $2`, e.cid, idBytes(t, root.ID))
		require.NoError(t, err)
		w.MustPublish(owner.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", a.ID)))
		require.Equal(t, thRow{depth: 0}, e.thRow(t, root.ID))

		evs, closed, eose := w.Req("h", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
		require.True(t, eose, closed)
		require.Equal(t, []string{root.ID}, ids(evs))
	})

	t.Run("AdminDelete", func(t *testing.T) { // docs/PROTOCOL.md §5.3 kind 9005
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		member, outsider := eventtest.NewKey(), eventtest.NewKey()
		private := chCreate(t, w, owner, chPrivate)
		w.MustPublish(chPutEv(t, owner, private, member.PubKey, ""))
		wm, wx := e.dial(t, member), e.dial(t, outsider)
		root := chMsg(t, member, private, "root")
		wm.MustPublish(root)
		reply := thReply(t, member, private, root.ID, root.ID)
		wm.MustPublish(reply)
		ownerMsg := chMsg(t, owner, private, "owner's")
		w.MustPublish(ownerMsg)
		elsewhere := chMsg(t, owner, ch, "open channel")
		w.MustPublish(elsewhere)
		note := owner.Signed(t, 1)
		w.MustPublish(note)

		del := func(k eventtest.Key, channel string, opts ...eventtest.Option) event.Event {
			return k.Signed(t, 9005, append([]eventtest.Option{chNonce(), eventtest.Channel(channel)}, opts...)...)
		}
		chRefused(t, wm, del(member, private, eventtest.Tag("a", "30023:"+member.PubKey+":x")), "invalid: missing e tag for target event")
		chRefused(t, wm, del(member, private), "invalid: deletion events must reference exactly one target via e or a tag (got e=0, a=0)")
		chRefused(t, wm, del(member, private, eventtest.Tag("e", hex64(0x77))), "invalid: target event not found")
		chRefused(t, wm, del(member, private, eventtest.Tag("e", elsewhere.ID)), "invalid: target event belongs to a different channel")
		chRefused(t, wm, del(member, private, eventtest.Tag("e", note.ID)), "invalid: target event has no channel")
		chRefused(t, wm, del(member, private, eventtest.Tag("e", ownerMsg.ID)), "invalid: must be event author or channel owner/admin")
		chRefused(t, wx, del(outsider, private, eventtest.Tag("e", root.ID)), "invalid: must be event author or channel owner/admin")
		chRefused(t, wm, del(member, uuid.NewString(), eventtest.Tag("e", root.ID)), "invalid: channel not found")

		wm.MustPublish(del(member, private, eventtest.Tag("e", reply.ID)))
		require.Equal(t, thRow{depth: 0, descendants: 0}, e.thRow(t, root.ID))
		chRefused(t, wm, del(member, private, eventtest.Tag("e", reply.ID)), "invalid: target event not found")
		// Removed from the private channel, the author may no longer delete; the owner may.
		w.MustPublish(chRemoveEv(t, owner, private, member.PubKey))
		chRefused(t, wm, del(member, private, eventtest.Tag("e", root.ID)), "invalid: must be event author or channel owner/admin")
		w.MustPublish(del(owner, private, eventtest.Tag("e", root.ID)))
		require.False(t, eventRow(t, e.r, e.cid, root.ID).live)
	})

	t.Run("EditsAndVotes", func(t *testing.T) {
		t.Parallel()
		owner, w, ch := thSetup(t, e)
		author, other := eventtest.NewKey(), eventtest.NewKey()
		wa, wo := e.dial(t, author), e.dial(t, other)
		private := chCreate(t, w, owner, chPrivate)
		w.MustPublish(chPutEv(t, owner, private, author.PubKey, ""))
		forum := chCreate(t, w, owner, eventtest.Tag("channel_type", "forum"))
		msg := chMsg(t, author, ch, "tpyo")
		wa.MustPublish(msg)
		secret := chMsg(t, author, private, "secret tpyo")
		wa.MustPublish(secret)
		elsewhere := chMsg(t, author, forum, "elsewhere")
		wa.MustPublish(elsewhere)
		note := author.Signed(t, 1)
		wa.MustPublish(note)

		edit := func(k eventtest.Key, channel string, opts ...eventtest.Option) event.Event {
			return k.Signed(t, 40003, append([]eventtest.Option{eventtest.Content("typo fixed " + uuid.NewString()[:4]), eventtest.Channel(channel)}, opts...)...)
		}
		chRefused(t, wo, edit(other, ch, eventtest.Tag("e", msg.ID)), "invalid: must be event author to edit")
		chRefused(t, wa, edit(author, ch), "invalid: missing e tag for edit target")
		chRefused(t, wa, edit(author, ch, eventtest.Tag("e", hex64(0x31))), "invalid: edit target event not found")
		chRefused(t, wa, edit(author, ch, eventtest.Tag("e", elsewhere.ID)), "invalid: target event belongs to a different channel")
		chRefused(t, wa, edit(author, ch, eventtest.Tag("e", note.ID)), "invalid: target event has no channel")
		fixed := edit(author, ch, eventtest.Tag("e", msg.ID))
		wa.MustPublish(fixed)
		evs, closed, eose := wa.Req("h", map[string]any{"#h": []string{ch}, "kinds": []int{9, 40003}})
		require.True(t, eose, closed)
		require.ElementsMatch(t, []event.Event{msg, fixed}, evs, "the edit is stored and the original left as it was")
		// An author removed from a private channel can no longer edit there.
		w.MustPublish(chRemoveEv(t, owner, private, author.PubKey))
		chRefused(t, wa, edit(author, private, eventtest.Tag("e", secret.ID)), "restricted: not a channel member")

		post := author.Signed(t, 45001, eventtest.Channel(forum), eventtest.Content("proposal"))
		wa.MustPublish(post)
		comment := other.Signed(t, 45003, eventtest.Channel(forum), eventtest.Content("+1"), eventtest.Tag("e", post.ID, "", "reply"))
		wo.MustPublish(comment)
		vote := func(k eventtest.Key, channel string, opts ...eventtest.Option) event.Event {
			return k.Signed(t, 45002, append([]eventtest.Option{eventtest.Content("+"), eventtest.Channel(channel)}, opts...)...)
		}
		chRefused(t, wo, vote(other, forum, eventtest.Tag("e", elsewhere.ID)), "invalid: vote target must be a forum post or comment")
		chRefused(t, wo, vote(other, forum), "invalid: missing e tag for vote target")
		chRefused(t, wo, vote(other, forum, eventtest.Tag("e", hex64(0x32))), "invalid: vote target event not found")
		ok, refusal := wo.Publish(vote(other, ch, eventtest.Tag("e", post.ID)))
		require.False(t, ok, "a vote from another channel")
		require.True(t, strings.HasPrefix(refusal, "invalid: "), refusal)
		wo.MustPublish(vote(other, forum, eventtest.Tag("e", post.ID)))
		wa.MustPublish(vote(author, forum, eventtest.Tag("e", comment.ID)))
	})
}
