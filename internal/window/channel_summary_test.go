package window_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
)

// replyIn stores a kind 9 by author in channel ch created at ts and its
// thread row under parent (depth 1, root parent) in rowChannel, as ingest
// would write them, or, with rowChannel ≠ ch, as no client could.
func (w *channelWorld) replyIn(t *testing.T, author eventtest.Key, ch, rowChannel string, parent event.Event, ts int64) event.Event {
	t.Helper()
	ev := fixture.Event(t, w.pool, w.cid, author, event.KindStreamMessage, eventtest.Channel(ch), eventtest.At(ts),
		eventtest.Tag("e", parent.ID, "", "root"), eventtest.Tag("e", parent.ID, "", "reply"))
	require.NoError(t, store.New(w.pool).ThreadReplyAdd(context.Background(), store.ThreadReplyParams{
		CommunityID: w.cid, Channel: rowChannel, EventID: ev.ID, CreatedAt: ev.CreatedAt,
		ParentID: parent.ID, ParentCreatedAt: parent.CreatedAt, RootID: parent.ID, RootCreatedAt: parent.CreatedAt, Depth: 1}))
	return ev
}

// TestSummaryParticipants covers docs/NIP-CW.md §3.4's participant list: at
// most ten distinct reply authors, the latest replier first.
func TestSummaryParticipants(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	ts := unixNow() - 500
	root := w.at(t, ts)
	var authors []eventtest.Key
	for i := range 12 {
		k := eventtest.NewKey()
		authors = append(authors, k)
		w.replyIn(t, k, w.ch, w.ch, root, ts+1+int64(i))
	}
	// The first author replies again, last of all.
	w.replyIn(t, authors[0], w.ch, w.ch, root, ts+100)

	evs, _ := split(t, w.window(t, w.scope(), window.ChannelRequest{Channel: w.ch, Limit: 5, Kinds: []int{9}, IncludeSummaries: true}))
	require.Len(t, evs, 2, "the root and its summary")
	require.Equal(t, 39005, evs[1].Kind)
	require.Equal(t, w.self, evs[1].PubKey)
	var c struct {
		ReplyCount   int      `json:"reply_count"`
		Participants []string `json:"participants"`
	}
	require.NoError(t, json.Unmarshal([]byte(evs[1].Content), &c))
	require.Equal(t, 13, c.ReplyCount)
	want := []string{authors[0].PubKey}
	for i := 11; len(want) < 10; i-- {
		want = append(want, authors[i].PubKey)
	}
	require.Equal(t, want, c.Participants)
}

// TestResolveScope covers docs/NIP-CW.md §4's channel rule on thread rows no
// client could write: the target's row and the root must both be in the
// requested channel.
func TestResolveScope(t *testing.T) {
	t.Parallel()
	w := newChannelWorld(t)
	other := fixture.Channel(t, w.pool, w.cid, w.author)
	ts := unixNow() - 500
	root := w.at(t, ts)
	inside := w.replyIn(t, w.author, w.ch, w.ch, root, ts+1)
	// A reply whose thread row sits in the other channel, under a root of
	// this one.
	astray := w.replyIn(t, w.author, other, other, root, ts+2)
	both := w.scope(w.ch, other)
	resolve := func(ch string, targets ...string) []string {
		t.Helper()
		items, err := w.engine.Resolve(context.Background(), both, window.ResolveRequest{Channel: ch, Targets: targets})
		require.NoError(t, err)
		var roots []string
		for _, it := range items {
			require.Equal(t, 39005, it.Event.Kind)
			require.Equal(t, event.Tags{{"e", root.ID}, {"d", root.ID}, {"h", ch}}, it.Event.Tags)
			roots = append(roots, it.Event.Tags[0][1])
		}
		return roots
	}
	require.Equal(t, []string{root.ID}, resolve(w.ch, inside.ID))
	require.Empty(t, resolve(w.ch, astray.ID), "the target is outside the channel")
	require.Empty(t, resolve(other, astray.ID), "the root is outside the channel")
	require.Equal(t, []string{root.ID}, resolve(w.ch, astray.ID, inside.ID))
	items, err := w.engine.Resolve(context.Background(), w.scope(other), window.ResolveRequest{Channel: w.ch, Targets: []string{inside.ID}})
	require.NoError(t, err)
	require.Empty(t, items, "an inaccessible channel yields nothing")
}
