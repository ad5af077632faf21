package ingest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
)

// member returns a fresh key that joined a fresh open channel, the channel,
// and a message of that key in it.
func member(t *testing.T, b *testBundle, kind int) (eventtest.Key, string, event.Event) {
	t.Helper()
	k := eventtest.NewKey()
	ch := b.channel(t, k)
	return k, ch, b.mustSubmit(t, k, k.Signed(t, kind, eventtest.Channel(ch), eventtest.Content("first")))
}

func reply(id string) eventtest.Option  { return eventtest.Tag("e", id, "", "reply") }
func rootOf(id string) eventtest.Option { return eventtest.Tag("e", id, "", "root") }

func TestThreadFamily(t *testing.T) {
	t.Parallel()
	runFamily(t, "thread", []familyCase{
		{name: "TopLevelIsOneStatement", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, _ := member(t, b, event.KindStreamMessage)
				ev := k.Signed(t, event.KindStreamMessage, eventtest.Channel(ch))
				require.True(t, oneStatementChange(t, b, k, ev))
				return k, ev
			}},
		{name: "ReplyWritesThreadRow", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, parent := member(t, b, event.KindStreamMessage)
				ev := k.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), reply(parent.ID), eventtest.Tag("broadcast", "1"))
				require.False(t, oneStatementChange(t, b, k, ev))
				return k, ev
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				ctx := context.Background()
				_, parent := markedRefs(ev.Tags)
				row, found, err := store.New(b.pool).ThreadGet(ctx, b.tenant.CommunityID, ev.ID)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, parent, row.ParentID)
				require.Equal(t, parent, row.RootID)
				require.Equal(t, 1, row.Depth)
				require.True(t, row.Broadcast)
				top, _, err := store.New(b.pool).ThreadGet(ctx, b.tenant.CommunityID, parent)
				require.NoError(t, err)
				require.Equal(t, 1, top.ReplyCount)
				require.Equal(t, 1, top.DescendantCount)
			}},
		{name: "ReplyToReplyNamesRoot", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, root := member(t, b, event.KindForumPost)
				mid := b.mustSubmit(t, k, k.Signed(t, event.KindForumComment, eventtest.Channel(ch), reply(root.ID)))
				return k, k.Signed(t, event.KindForumComment, eventtest.Channel(ch), rootOf(root.ID), reply(mid.ID))
			},
			check: func(t *testing.T, b *testBundle, ev event.Event) {
				row, _, err := store.New(b.pool).ThreadGet(context.Background(), b.tenant.CommunityID, ev.ID)
				require.NoError(t, err)
				require.Equal(t, 2, row.Depth)
			}},
		{name: "ParentMissing", want: refused("invalid: reply parent not found"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, _ := member(t, b, event.KindStreamMessage)
				return k, k.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), reply(strings.Repeat("ee", 32)))
			}},
		{name: "WrongRoot", want: refused("invalid: root tag does not match thread ancestry"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, parent := member(t, b, event.KindStreamMessage)
				other := b.mustSubmit(t, k, k.Signed(t, event.KindStreamMessage, eventtest.Channel(ch)))
				return k, k.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), rootOf(other.ID), reply(parent.ID))
			}},
		{name: "ParentInOtherChannel", want: refused("invalid: parent event belongs to a different channel"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, _, parent := member(t, b, event.KindStreamMessage)
				other := b.channel(t, k)
				return k, k.Signed(t, event.KindStreamMessage, eventtest.Channel(other), reply(parent.ID))
			}},
		{name: "WithoutH", want: refused("invalid: channel-scoped events must include an h tag"), build: by(event.KindStreamMessage)},
	})
}

func TestEditFamily(t *testing.T) {
	t.Parallel()
	runFamily(t, "edit", []familyCase{
		{name: "OwnMessage", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, msg := member(t, b, event.KindStreamMessage)
				ev := k.Signed(t, event.KindMessageEdit, eventtest.Channel(ch), eventtest.Tag("e", msg.ID))
				require.True(t, oneStatementChange(t, b, k, ev))
				return k, ev
			}},
		{name: "OtherAuthor", want: refused("invalid: must be event author to edit"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				_, ch, msg := member(t, b, event.KindStreamMessage)
				k := eventtest.NewKey()
				b.join(t, k, ch)
				return k, k.Signed(t, event.KindMessageEdit, eventtest.Channel(ch), eventtest.Tag("e", msg.ID))
			}},
		{name: "TargetMissing", want: refused("invalid: edit target event not found"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, _ := member(t, b, event.KindStreamMessage)
				return k, k.Signed(t, event.KindMessageEdit, eventtest.Channel(ch), eventtest.Tag("e", strings.Repeat("ef", 32)))
			}},
		{name: "NoTarget", want: refused("invalid: missing e tag for edit target"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, _ := member(t, b, event.KindStreamMessage)
				return k, k.Signed(t, event.KindMessageEdit, eventtest.Channel(ch))
			}},
	})
}

func TestVoteFamily(t *testing.T) {
	t.Parallel()
	runFamily(t, "vote", []familyCase{
		{name: "ForumPost", want: accepted(),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, post := member(t, b, event.KindForumPost)
				return k, k.Signed(t, event.KindForumVote, eventtest.Channel(ch), eventtest.Tag("e", post.ID), eventtest.Content("up"))
			}},
		{name: "NotAForumPost", want: refused("invalid: vote target must be a forum post or comment"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, msg := member(t, b, event.KindStreamMessage)
				return k, k.Signed(t, event.KindForumVote, eventtest.Channel(ch), eventtest.Tag("e", msg.ID))
			}},
		{name: "TargetMissing", want: refused("invalid: vote target event not found"),
			build: func(t *testing.T, b *testBundle) (eventtest.Key, event.Event) {
				k, ch, _ := member(t, b, event.KindForumPost)
				return k, k.Signed(t, event.KindForumVote, eventtest.Channel(ch), eventtest.Tag("e", strings.Repeat("fe", 32)))
			}},
	})
}
