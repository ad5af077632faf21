package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

// queryWorld is one community's events for the EventQuery table, plus a
// copy of everything in a second community that no read may return.
type queryWorld struct {
	cid, other      string
	alice, bob      eventtest.Key
	open, priv      string // channels
	now             int64
	global, mention event.Event // kind 1 global; kind 1 global mentioning bob
	tagged          event.Event // kind 1 global with ["t","go"]
	inOpen, inPriv  event.Event // kind 9 in each channel
	mentionInOpen   event.Event // kind 9 in open mentioning bob
	article         event.Event // kind 30023 d=slug
	authorOnly      event.Event // kind 30300 by alice
	gatedToBob      event.Event // kind 30622 p-tagged bob
	deleted         event.Event // kind 1 global, soft-deleted
	sameSecondA     event.Event // kind 5000 pair at the same second
	sameSecondB     event.Event
	older           event.Event   // kind 1 global, an hour ago
	copies          []event.Event // what community other holds
}

func newQueryWorld(t *testing.T, b *poolBundle) *queryWorld {
	t.Helper()
	q := b.pool
	w := &queryWorld{cid: b.community(t), other: b.community(t), alice: eventtest.NewKey(), bob: eventtest.NewKey(),
		now: time.Now().Unix() - 60}
	w.open = fixture.Channel(t, q, w.cid, w.alice)
	w.priv = fixture.Channel(t, q, w.cid, w.alice, fixture.Private())
	at := func(d int64) eventtest.Option { return eventtest.At(w.now - d) }
	w.global = fixture.Event(t, q, w.cid, w.alice, 1, at(1))
	w.mention = fixture.Event(t, q, w.cid, w.alice, 1, at(2), eventtest.Tag("p", w.bob.PubKey))
	w.tagged = fixture.Event(t, q, w.cid, w.bob, 1, at(3), eventtest.Tag("t", "go"))
	w.inOpen = fixture.Event(t, q, w.cid, w.alice, 9, at(4), eventtest.Channel(w.open))
	w.inPriv = fixture.Event(t, q, w.cid, w.alice, 9, at(5), eventtest.Channel(w.priv))
	w.mentionInOpen = fixture.Event(t, q, w.cid, w.alice, 9, at(6), eventtest.Channel(w.open), eventtest.Tag("p", w.bob.PubKey))
	w.article = fixture.Event(t, q, w.cid, w.alice, 30023, at(7), eventtest.Tag("d", "slug"))
	w.authorOnly = fixture.Event(t, q, w.cid, w.alice, 30300, at(8), eventtest.Tag("d", "x"))
	w.gatedToBob = fixture.Event(t, q, w.cid, w.alice, 30622, at(9), eventtest.Tag("p", w.bob.PubKey), eventtest.Tag("d", "y"))
	w.deleted = fixture.Event(t, q, w.cid, w.alice, 1, at(10))
	_, err := store.New(q).EventSoftDelete(context.Background(), w.cid, w.deleted.ID, w.deleted.CreatedAt)
	require.NoError(t, err)
	w.sameSecondA = fixture.Event(t, q, w.cid, w.bob, 5000, at(20), eventtest.Content("a"))
	w.sameSecondB = fixture.Event(t, q, w.cid, w.bob, 5000, at(20), eventtest.Content("b"))
	if w.sameSecondB.ID < w.sameSecondA.ID {
		w.sameSecondA, w.sameSecondB = w.sameSecondB, w.sameSecondA
	}
	w.older = fixture.Event(t, q, w.cid, w.alice, 1, at(3600))
	// Community isolation: every event again, byte for byte, in the other community.
	w.copies = []event.Event{w.global, w.mention, w.tagged, w.article, w.authorOnly, w.gatedToBob, w.sameSecondA, w.sameSecondB, w.older}
	fixture.Store(t, q, w.other, "", w.copies...)
	return w
}

func ids(evs []store.StoredEvent) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Event.ID)
	}
	return out
}

func TestEventQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	w := newQueryWorld(t, b)
	since, until := w.now-9, w.now-2

	for _, tc := range []struct {
		name        string
		filter      event.Filter
		reader      string
		channels    []string
		channelOnly bool
		limit       int
		beforeID    string
		want        []event.Event // newest first
	}{
		{name: "GlobalOnlyWithoutChannels", filter: event.Filter{Kinds: []int{1, 9}},
			want: []event.Event{w.global, w.mention, w.tagged, w.older}},
		{name: "ChannelsPlusGlobal", filter: event.Filter{Kinds: []int{1, 9}}, channels: []string{w.open},
			want: []event.Event{w.global, w.mention, w.tagged, w.inOpen, w.mentionInOpen, w.older}},
		{name: "ChannelOnly", filter: event.Filter{Kinds: []int{1, 9}}, channels: []string{w.open, w.priv}, channelOnly: true,
			want: []event.Event{w.inOpen, w.inPriv, w.mentionInOpen}},
		{name: "IDs", filter: event.Filter{IDs: []string{w.tagged.ID, w.inPriv.ID, w.deleted.ID}},
			want: []event.Event{w.tagged}},
		{name: "OneAuthor", filter: event.Filter{Authors: []string{w.bob.PubKey}},
			want: []event.Event{w.tagged, w.sameSecondA, w.sameSecondB}},
		{name: "Authors", filter: event.Filter{Authors: []string{w.bob.PubKey, w.alice.PubKey}, Kinds: []int{1}},
			want: []event.Event{w.global, w.mention, w.tagged, w.older}},
		{name: "SinceUntilInclusive", filter: event.Filter{Kinds: []int{1, 30023}, Since: &since, Until: &until},
			want: []event.Event{w.mention, w.tagged, w.article}},
		{name: "KeysetCursor", filter: event.Filter{Kinds: []int{5000}, Until: ptr(w.now - 20)}, beforeID: w.sameSecondA.ID,
			want: []event.Event{w.sameSecondB}},
		{name: "TiesByAscendingID", filter: event.Filter{Kinds: []int{5000}},
			want: []event.Event{w.sameSecondA, w.sameSecondB}},
		{name: "Limit", filter: event.Filter{Kinds: []int{1}}, limit: 2,
			want: []event.Event{w.global, w.mention}},
		{name: "MentionJoin", filter: event.Filter{Tags: map[string][]string{"p": {w.bob.PubKey}}}, channels: []string{w.open},
			reader: w.bob.PubKey, want: []event.Event{w.mention, w.mentionInOpen, w.gatedToBob}},
		{name: "MentionJoinKindsAndScope", filter: event.Filter{Kinds: []int{9}, Tags: map[string][]string{"p": {w.bob.PubKey}}},
			want: []event.Event{}},
		{name: "TagContainment", filter: event.Filter{Tags: map[string][]string{"t": {"go", "rust"}}},
			want: []event.Event{w.tagged}},
		{name: "AddressableD", filter: event.Filter{Kinds: []int{30023}, Tags: map[string][]string{"d": {"slug"}}},
			want: []event.Event{w.article}},
		{name: "DAsATagForOtherKinds", filter: event.Filter{Kinds: []int{1, 30023}, Tags: map[string][]string{"d": {"slug"}}},
			want: []event.Event{w.article}},
		{name: "AuthorOnlyForTheAuthor", filter: event.Filter{Kinds: []int{30300}}, reader: w.alice.PubKey,
			want: []event.Event{w.authorOnly}},
		{name: "AuthorOnlyHiddenFromOthers", filter: event.Filter{Kinds: []int{30300}}, reader: w.bob.PubKey,
			want: []event.Event{}},
		{name: "ResultGatedForTheRecipient", filter: event.Filter{Kinds: []int{30622}}, reader: w.bob.PubKey,
			want: []event.Event{w.gatedToBob}},
		{name: "ResultGatedHiddenFromOthers", filter: event.Filter{Kinds: []int{30622}}, reader: w.alice.PubKey,
			want: []event.Event{}},
		{name: "LimitCountsVisibleRowsOnly", filter: event.Filter{Kinds: []int{30300, 30622}}, reader: w.bob.PubKey, limit: 1,
			want: []event.Event{w.gatedToBob}},
		{name: "DeletedNeverReturned", filter: event.Filter{IDs: []string{w.deleted.ID}},
			want: []event.Event{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := store.EventQueryParams{CommunityID: w.cid, Reader: tc.reader, Filter: &tc.filter,
				Channels: tc.channels, ChannelOnly: tc.channelOnly, Limit: tc.limit, BeforeID: tc.beforeID}
			if p.Limit == 0 {
				p.Limit = 100
			}
			if tc.reader == "" {
				p.Reader = w.alice.PubKey
			}
			got, err := b.s.EventQuery(ctx, p)
			require.NoError(t, err)
			want := make([]string, 0, len(tc.want))
			for _, ev := range tc.want {
				want = append(want, ev.ID)
			}
			require.Equal(t, want, ids(got))
			for _, se := range got {
				_, idOK := se.Event.CheckID()
				require.True(t, idOK && se.Event.VerifySignature(), "read back byte for byte")
			}

			n, err := b.s.EventCount(ctx, p)
			require.NoError(t, err)
			if p.Limit >= 100 {
				require.EqualValues(t, len(tc.want), n, "count agrees with the rows")
			}

			// The same read in the other community returns exactly its own
			// copies (global, never deleted there): nothing of a's channels or deletions.
			copied := map[string]bool{}
			for _, ev := range w.copies {
				copied[ev.ID] = true
			}
			wantOther := []string{}
			for _, id := range want {
				if copied[id] {
					wantOther = append(wantOther, id)
				}
			}
			p.CommunityID = w.other
			got, err = b.s.EventQuery(ctx, p)
			require.NoError(t, err)
			require.Equal(t, wantOther, ids(got))
		})
	}

	t.Run("StoredChannelReturned", func(t *testing.T) {
		t.Parallel()
		got, err := b.s.EventQuery(ctx, store.EventQueryParams{CommunityID: w.cid, Reader: w.alice.PubKey,
			Filter: &event.Filter{IDs: []string{w.inOpen.ID}}, Channels: []string{w.open}, ChannelOnly: true, Limit: 10})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, w.open, got[0].Channel)
		require.Equal(t, w.inOpen, got[0].Event)
	})

	t.Run("OtherCommunitySeesOnlyItsOwn", func(t *testing.T) {
		t.Parallel()
		fresh := b.community(t)
		got, err := b.s.EventQuery(ctx, store.EventQueryParams{CommunityID: fresh, Reader: w.alice.PubKey,
			Filter: &event.Filter{}, Limit: 100})
		require.NoError(t, err)
		require.Empty(t, got)
		n, err := b.s.EventCount(ctx, store.EventQueryParams{CommunityID: fresh, Reader: w.alice.PubKey, Filter: &event.Filter{}})
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func ptr[T any](v T) *T { return &v }
