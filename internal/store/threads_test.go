package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// thread stores a root, a reply and a reply to the reply in channel ch and
// writes their thread rows the way the pipeline does.
type thread struct {
	root, reply, nested event.Event
}

func newThread(t *testing.T, s *store.Store, q pg.Querier, cid, ch string, key eventtest.Key, at int64) thread {
	t.Helper()
	ctx := context.Background()
	th := thread{
		root:  fixture.Event(t, q, cid, key, 9, eventtest.Channel(ch), eventtest.At(at)),
		reply: fixture.Event(t, q, cid, key, 9, eventtest.Channel(ch), eventtest.At(at+1), eventtest.Content("r1")),
	}
	th.nested = fixture.Event(t, q, cid, key, 9, eventtest.Channel(ch), eventtest.At(at+2), eventtest.Content("r2"))
	require.NoError(t, store.New(q).ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: cid, Channel: ch,
		EventID: th.reply.ID, CreatedAt: th.reply.CreatedAt, ParentID: th.root.ID, ParentCreatedAt: th.root.CreatedAt,
		RootID: th.root.ID, RootCreatedAt: th.root.CreatedAt, Depth: 1}))
	require.NoError(t, store.New(q).ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: cid, Channel: ch,
		EventID: th.nested.ID, CreatedAt: th.nested.CreatedAt, ParentID: th.reply.ID, ParentCreatedAt: th.reply.CreatedAt,
		RootID: th.root.ID, RootCreatedAt: th.root.CreatedAt, Depth: 2, Broadcast: true}))
	return th
}

func TestThreadRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	ch := fixture.Channel(t, b.tx, b.a, key)
	now := time.Now().Unix() - 100
	th := newThread(t, b.s, b.tx, b.a, ch, key, now)
	get := func(cid, id string) (store.ThreadRow, bool) {
		r, found, err := b.s.ThreadGet(ctx, cid, id)
		require.NoError(t, err)
		return r, found
	}

	root, found := get(b.a, th.root.ID)
	require.True(t, found, "the root got its depth-0 row")
	require.Equal(t, store.ThreadRow{EventID: th.root.ID, CreatedAt: now, Channel: ch, ReplyCount: 1, DescendantCount: 2}, root)
	reply, _ := get(b.a, th.reply.ID)
	require.Equal(t, store.ThreadRow{EventID: th.reply.ID, CreatedAt: now + 1, Channel: ch, ParentID: th.root.ID, ParentCreatedAt: now,
		RootID: th.root.ID, RootCreatedAt: now, Depth: 1, ReplyCount: 1}, reply)
	nested, _ := get(b.a, th.nested.ID)
	require.Equal(t, 2, nested.Depth)
	require.True(t, nested.Broadcast)
	_, found = get(b.b, th.root.ID)
	require.False(t, found, "no thread rows through community b")
	// last_reply_at is the newest direct reply's created_at, not the time
	// of the write: an import, which writes long after, keeps it.
	lastReply := func(id string) int64 {
		var at int64
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT extract(epoch FROM last_reply_at)::bigint FROM thread_metadata
			WHERE community_id = $1 AND event_id = decode($2, 'hex')`, b.a, id).Scan(&at))
		return at
	}
	require.Equal(t, []int64{now + 1, now + 2}, []int64{lastReply(th.root.ID), lastReply(th.reply.ID)})
	older := fixture.Event(t, b.tx, b.a, key, 9, eventtest.Channel(ch), eventtest.At(now), eventtest.Content("late"))
	require.NoError(t, b.s.ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: b.a, Channel: ch,
		EventID: older.ID, CreatedAt: older.CreatedAt, ParentID: th.root.ID, ParentCreatedAt: th.root.CreatedAt,
		RootID: th.root.ID, RootCreatedAt: th.root.CreatedAt, Depth: 1}))
	require.Equal(t, now+1, lastReply(th.root.ID), "an older reply written later does not move it back")
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.a, older.ID))

	// Adding the same reply again changes no counter.
	require.NoError(t, b.s.ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: b.a, Channel: ch,
		EventID: th.reply.ID, CreatedAt: th.reply.CreatedAt, ParentID: th.root.ID, ParentCreatedAt: th.root.CreatedAt,
		RootID: th.root.ID, RootCreatedAt: th.root.CreatedAt, Depth: 1}))
	root, _ = get(b.a, th.root.ID)
	require.Equal(t, 1, root.ReplyCount)
	require.Equal(t, 2, root.DescendantCount)

	// Removing decrements, never below zero, and does nothing for a root or another community.
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.b, th.nested.ID))
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.a, th.root.ID))
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.a, th.nested.ID))
	reply, _ = get(b.a, th.reply.ID)
	root, _ = get(b.a, th.root.ID)
	require.Equal(t, []int{0, 1, 1}, []int{reply.ReplyCount, root.ReplyCount, root.DescendantCount})
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.a, th.nested.ID))
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.a, th.reply.ID))
	require.NoError(t, b.s.ThreadReplyRemoved(ctx, b.a, th.reply.ID))
	reply, _ = get(b.a, th.reply.ID)
	root, _ = get(b.a, th.root.ID)
	require.Equal(t, []int{0, 0, 0}, []int{reply.ReplyCount, root.ReplyCount, root.DescendantCount})
}

func TestThreadReplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	q := b.pool
	cid, other := b.community(t), b.community(t)
	key := eventtest.NewKey()
	ch := fixture.Channel(t, q, cid, key)
	now := time.Now().Unix() - 100
	th := newThread(t, b.s, q, cid, ch, key, now)
	// A second reply in the nested one's second, and a deleted reply.
	tie := fixture.Event(t, q, cid, key, 9, eventtest.Channel(ch), eventtest.At(now+2), eventtest.Content("tie"))
	require.NoError(t, store.New(q).ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: cid, Channel: ch, EventID: tie.ID,
		CreatedAt: tie.CreatedAt, ParentID: th.root.ID, ParentCreatedAt: now, RootID: th.root.ID, RootCreatedAt: now, Depth: 1}))
	gone := fixture.Event(t, q, cid, key, 9, eventtest.Channel(ch), eventtest.At(now+3), eventtest.Content("gone"))
	require.NoError(t, store.New(q).ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: cid, Channel: ch, EventID: gone.ID,
		CreatedAt: gone.CreatedAt, ParentID: th.root.ID, ParentCreatedAt: now, RootID: th.root.ID, RootCreatedAt: now, Depth: 1}))
	_, err := store.New(q).EventSoftDelete(ctx, cid, gone.ID, gone.CreatedAt)
	require.NoError(t, err)
	// Another thread in another community, same channel UUID.
	fixture.Channel(t, q, other, key, fixture.ID(ch))
	otherThread := newThread(t, b.s, q, other, ch, eventtest.NewKey(), now)

	second := []string{th.nested.ID, tie.ID}
	if tie.ID < th.nested.ID {
		second = []string{tie.ID, th.nested.ID}
	}
	for _, tc := range []struct {
		name string
		p    store.ThreadRepliesParams
		want []string
	}{
		{"AllOldestFirst", store.ThreadRepliesParams{MaxDepth: 100}, append([]string{th.reply.ID}, second...)},
		{"DepthBound", store.ThreadRepliesParams{MaxDepth: 1}, []string{th.reply.ID, tie.ID}},
		{"Limit", store.ThreadRepliesParams{MaxDepth: 100, Limit: 2}, append([]string{th.reply.ID}, second[0])},
		{"AfterSecond", store.ThreadRepliesParams{MaxDepth: 100, HasAfter: true, AfterTime: now + 1}, second},
		{"AfterKeyset", store.ThreadRepliesParams{MaxDepth: 100, HasAfter: true, AfterTime: now + 2, AfterID: second[0]}, second[1:]},
		{"OutsideTheChannels", store.ThreadRepliesParams{MaxDepth: 100, Channels: []string{}}, []string{}},
		{"MaxBytesStopsAfterTheRowOverIt", store.ThreadRepliesParams{MaxDepth: 100, MaxBytes: 1}, []string{th.reply.ID}},
	} {
		p := tc.p
		p.CommunityID, p.Root = cid, th.root.ID
		if p.Channels == nil {
			p.Channels = []string{ch}
		}
		if p.Limit == 0 {
			p.Limit = 50
		}
		got, err := b.s.ThreadReplies(ctx, p)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, ids(got), tc.name)
	}

	got, err := b.s.ThreadReplies(ctx, store.ThreadRepliesParams{CommunityID: other, Root: th.root.ID, MaxDepth: 100, Channels: []string{ch}, Limit: 50})
	require.NoError(t, err)
	require.Empty(t, got, "the root id of community a names nothing in b")
	got, err = b.s.ThreadReplies(ctx, store.ThreadRepliesParams{CommunityID: other, Root: otherThread.root.ID, MaxDepth: 100, Channels: []string{ch}, Limit: 50})
	require.NoError(t, err)
	require.Equal(t, []string{otherThread.reply.ID, otherThread.nested.ID}, ids(got), "b reads its own thread only")
}
