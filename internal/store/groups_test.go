package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestChannelCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	owner := eventtest.NewKey()
	id := uuid.NewString()
	p := store.ChannelCreateParams{CommunityID: b.a, ID: id, Name: "general", Type: "forum", Visibility: "private",
		Description: "about", CreatedBy: owner.PubKey}
	require.NoError(t, b.s.ChannelCreate(ctx, p))

	c, found, err := b.s.ChannelLock(ctx, b.a, id)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, store.Channel{ID: id, Name: "general", Type: "forum", Visibility: "private", Description: "about"}, c)
	members, err := b.s.ChannelMembers(ctx, b.a, id)
	require.NoError(t, err)
	require.Equal(t, []store.Member{{Pubkey: owner.PubKey, Role: "owner"}}, members)

	// The same id again in the same community is a duplicate; in another it is a new channel.
	// A savepoint keeps the failed insert from aborting the rest of the test's transaction.
	sp, err := b.tx.Begin(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, store.New(sp).ChannelCreate(ctx, p), pg.ErrDuplicate)
	require.NoError(t, sp.Rollback(ctx))
	p.CommunityID = b.b
	require.NoError(t, b.s.ChannelCreate(ctx, p))

	for _, tc := range []struct {
		name, community, channel string
		want                     bool
	}{
		{"Live", b.a, id, true}, {"OtherCommunityOwnCopy", b.b, id, true},
		{"Unknown", b.a, uuid.NewString(), false}, {"Deleted", b.a, fixture.Channel(t, b.tx, b.a, owner, fixture.Deleted()), true},
	} {
		ok, err := b.s.ChannelExists(ctx, tc.community, tc.channel)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, ok, tc.name)
	}
}

func TestChannelLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	owner := eventtest.NewKey()
	id := fixture.Channel(t, b.tx, b.a, owner, fixture.Deleted())

	c, found, err := b.s.ChannelLock(ctx, b.a, id)
	require.NoError(t, err)
	require.True(t, found, "deleted channels are returned")
	require.True(t, c.Deleted)
	for name, ch := range map[string]string{"NotAUUID": "general", "Uppercase": "AAAAAAAA-AAAA-AAAA-AAAA-AAAAAAAAAAAA", "Unknown": uuid.NewString()} {
		_, found, err := b.s.ChannelLock(ctx, b.a, ch)
		require.NoError(t, err, name)
		require.False(t, found, name)
	}
	_, found, err = b.s.ChannelLock(ctx, b.b, id)
	require.NoError(t, err)
	require.False(t, found, "not visible from community b")

}

func TestChannelLockSerialises(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	cid := b.community(t)
	id := fixture.Channel(t, b.pool, cid, eventtest.NewKey())

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // the test ends here
	_, found, err := store.New(holder).ChannelLock(ctx, cid, id)
	require.NoError(t, err)
	require.True(t, found)

	other, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(ctx) //nolint:errcheck // the test ends here
	_, err = other.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`)
	require.NoError(t, err)
	_, _, err = store.New(other).ChannelLock(ctx, cid, id)
	require.ErrorContains(t, err, "55P03", "the row is locked until the holder ends")
}

func TestChannelUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	owner, editor := eventtest.NewKey(), eventtest.NewKey()
	id := fixture.Channel(t, b.tx, b.a, owner, fixture.Named("old"), fixture.About("desc"))
	lock := func() store.Channel {
		c, found, err := b.s.ChannelLock(ctx, b.a, id)
		require.NoError(t, err)
		require.True(t, found)
		return c
	}
	name, topic, purpose, private, empty := "new", "topic", "purpose", "private", ""
	yes, no := true, false

	require.NoError(t, b.s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: b.a, ID: id, Actor: editor.PubKey,
		Name: &name, Topic: &topic, Purpose: &purpose, Visibility: &private, Archived: &yes}))
	require.Equal(t, store.Channel{ID: id, Name: "new", Type: "stream", Visibility: "private", Description: "desc",
		Topic: "topic", Purpose: "purpose", Archived: true}, lock())
	var setBy []byte
	require.NoError(t, b.tx.QueryRow(ctx, `SELECT topic_set_by FROM channels WHERE community_id = $1 AND id = $2`, b.a, id).Scan(&setBy))
	require.Equal(t, unhex(t, editor.PubKey), setBy)

	// Nil fields stay; an empty description clears it; unarchive; delete.
	require.NoError(t, b.s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: b.a, ID: id, Actor: owner.PubKey,
		Description: &empty, Archived: &no}))
	require.Equal(t, store.Channel{ID: id, Name: "new", Type: "stream", Visibility: "private",
		Topic: "topic", Purpose: "purpose"}, lock())
	require.NoError(t, b.s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: b.b, ID: id, Actor: owner.PubKey, Deleted: true}))
	require.False(t, lock().Deleted, "an update through community b changes nothing in a")
	require.NoError(t, b.s.ChannelUpdate(ctx, store.ChannelUpdateParams{CommunityID: b.a, ID: id, Actor: owner.PubKey, Deleted: true}))
	require.True(t, lock().Deleted)
}

func TestChannelMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	owner, alice, bob := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	id := fixture.Channel(t, b.tx, b.a, owner)
	role := func(k eventtest.Key) (string, bool) {
		r, active, err := b.s.ChannelMemberRole(ctx, b.a, id, k.PubKey)
		require.NoError(t, err)
		return r, active
	}

	require.NoError(t, b.s.ChannelMemberUpsert(ctx, b.a, id, alice.PubKey, "member", owner.PubKey))
	require.NoError(t, b.s.ChannelMemberUpsert(ctx, b.a, id, bob.PubKey, "bot", owner.PubKey))
	r, active := role(alice)
	require.True(t, active)
	require.Equal(t, "member", r)

	require.NoError(t, b.s.ChannelMemberUpsert(ctx, b.a, id, alice.PubKey, "admin", bob.PubKey))
	r, _ = role(alice)
	require.Equal(t, "admin", r, "a role change")
	var invitedBy []byte
	require.NoError(t, b.tx.QueryRow(ctx, `SELECT invited_by FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3`,
		b.a, id, unhex(t, alice.PubKey)).Scan(&invitedBy))
	require.Equal(t, unhex(t, owner.PubKey), invitedBy, "an active member keeps its inviter")

	require.NoError(t, b.s.ChannelMemberRemove(ctx, b.a, id, alice.PubKey, owner.PubKey))
	_, active = role(alice)
	require.False(t, active)
	members, err := b.s.ChannelMembers(ctx, b.a, id)
	require.NoError(t, err)
	// One transaction: every joined_at is the same now(), so the tie order by pubkey decides.
	want := []store.Member{{Pubkey: owner.PubKey, Role: "owner"}, {Pubkey: bob.PubKey, Role: "bot"}}
	slices.SortFunc(want, func(x, y store.Member) int { return strings.Compare(x.Pubkey, y.Pubkey) })
	require.Equal(t, want, members)

	// Re-adding clears the removal and takes the new inviter.
	require.NoError(t, b.s.ChannelMemberUpsert(ctx, b.a, id, alice.PubKey, "member", bob.PubKey))
	var removedAt *time.Time
	require.NoError(t, b.tx.QueryRow(ctx, `SELECT invited_by, removed_at FROM channel_members WHERE community_id = $1 AND channel_id = $2 AND pubkey = $3`,
		b.a, id, unhex(t, alice.PubKey)).Scan(&invitedBy, &removedAt))
	require.Equal(t, unhex(t, bob.PubKey), invitedBy)
	require.Nil(t, removedAt)

	_, active, err = b.s.ChannelMemberRole(ctx, b.b, id, owner.PubKey)
	require.NoError(t, err)
	require.False(t, active, "no membership through community b")
	members, err = b.s.ChannelMembers(ctx, b.b, id)
	require.NoError(t, err)
	require.Empty(t, members)
}

func TestLatestSignedAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	relayKey, other := eventtest.NewKey(), eventtest.NewKey()
	ch := fixture.Channel(t, b.tx, b.a, other)
	now := time.Now().Unix()
	fixture.Event(t, b.tx, b.a, relayKey, 39000, eventtest.Channel(ch), eventtest.Tag("d", ch), eventtest.At(now-10))
	fixture.Event(t, b.tx, b.a, relayKey, 39000, eventtest.Channel(ch), eventtest.Tag("d", ch+"x"), eventtest.At(now-5))
	fixture.Event(t, b.tx, b.a, other, 39000, eventtest.Channel(ch), eventtest.Tag("d", ch+"y"), eventtest.At(now))
	// 44100 is global-only: it names the channel in its h tag, with no channel_id.
	fixture.Event(t, b.tx, b.a, relayKey, 44100, eventtest.Tag("h", ch), eventtest.At(now-3))
	fixture.Event(t, b.tx, b.b, relayKey, 44100, eventtest.Tag("h", ch), eventtest.At(now))

	for _, tc := range []struct {
		name      string
		community string
		kind      int
		global    bool
		want      int64
	}{
		{"ChannelKind", b.a, 39000, false, now - 5},
		{"GlobalNoticeByHTag", b.a, 44100, true, now - 3},
		{"NoneYet", b.a, 39001, false, 0},
		{"OtherCommunityOwn", b.b, 39000, false, 0},
	} {
		got, err := b.s.LatestSignedAt(ctx, tc.community, tc.kind, relayKey.PubKey, ch, tc.global)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

func TestChannelStateEventsDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	relayKey, owner := eventtest.NewKey(), eventtest.NewKey()
	ch := fixture.Channel(t, b.tx, b.a, owner)
	var state []string
	for _, k := range []int{39000, 39001, 39002} {
		state = append(state, fixture.Event(t, b.tx, b.a, relayKey, k, eventtest.Channel(ch), eventtest.Tag("d", ch)).ID)
	}
	msg := fixture.Event(t, b.tx, b.a, owner, 9, eventtest.Channel(ch))
	fixture.Channel(t, b.tx, b.b, owner, fixture.ID(ch)) // the same UUID in community b
	copyInB := fixture.Event(t, b.tx, b.b, relayKey, 39000, eventtest.Channel(ch), eventtest.Tag("d", ch))

	require.NoError(t, b.s.ChannelStateEventsDelete(ctx, b.a, ch))
	for _, id := range state {
		ref, err := b.s.EventLookup(ctx, b.a, id)
		require.NoError(t, err)
		require.True(t, ref.Deleted, id)
	}
	ref, err := b.s.EventLookup(ctx, b.a, msg.ID)
	require.NoError(t, err)
	require.False(t, ref.Deleted, "other kinds of the channel stay")
	ref, err = b.s.EventLookup(ctx, b.b, copyInB.ID)
	require.NoError(t, err)
	require.False(t, ref.Deleted)
}
