package store_test

import (
	"context"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// expiryWorld is one channel's conversation where some events carry a
// NIP-40 expiration that has passed and one an expiration in the future.
type expiryWorld struct {
	cid, ch    string
	alice, bob eventtest.Key
	root       event.Event // kind 9, top level, no expiration
	topGone    event.Event // kind 9, top level, expired
	replyGone  event.Event // reply to root, expired, mentions bob
	replyLater event.Event // reply to root, expires in an hour
	globalGone event.Event // kind 1, global, expired, mentions bob
	reaction   event.Event // kind 7 on root, expired
	readState  event.Event // conforming 30078 of alice, expired
}

func expiresIn(d int64) eventtest.Option {
	return eventtest.Tag("expiration", strconv.FormatInt(time.Now().Unix()+d, 10))
}

func newExpiryWorld(t *testing.T, b *poolBundle) *expiryWorld {
	t.Helper()
	ctx := context.Background()
	q := b.pool
	w := &expiryWorld{cid: b.community(t), alice: eventtest.NewKey(), bob: eventtest.NewKey()}
	w.ch = fixture.Channel(t, q, w.cid, w.alice)
	now := time.Now().Unix() - 30
	at := func(d int64) eventtest.Option { return eventtest.At(now + d) }
	w.root = fixture.Event(t, q, w.cid, w.alice, 9, at(0), eventtest.Channel(w.ch))
	w.topGone = fixture.Event(t, q, w.cid, w.alice, 9, at(1), eventtest.Channel(w.ch), expiresIn(-5))
	w.replyGone = fixture.Event(t, q, w.cid, w.bob, 9, at(2), eventtest.Channel(w.ch), expiresIn(-5),
		eventtest.Tag("e", w.root.ID, "", "root"), eventtest.Tag("p", w.bob.PubKey))
	w.replyLater = fixture.Event(t, q, w.cid, w.bob, 9, at(3), eventtest.Channel(w.ch), expiresIn(3600),
		eventtest.Tag("e", w.root.ID, "", "root"))
	for _, r := range []event.Event{w.replyGone, w.replyLater} {
		require.NoError(t, b.s.ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: w.cid, Channel: w.ch,
			EventID: r.ID, CreatedAt: r.CreatedAt, ParentID: w.root.ID, ParentCreatedAt: w.root.CreatedAt,
			RootID: w.root.ID, RootCreatedAt: w.root.CreatedAt, Depth: 1}))
	}
	w.globalGone = fixture.Event(t, q, w.cid, w.alice, 1, at(4), expiresIn(-5), eventtest.Tag("p", w.bob.PubKey))
	w.reaction = fixture.Event(t, q, w.cid, w.bob, 7, at(5), eventtest.Channel(w.ch), expiresIn(-5),
		eventtest.Tag("e", w.root.ID), eventtest.Content("+"))
	fresh, err := b.s.ReactionAdd(ctx, store.ReactionAddParams{CommunityID: w.cid, Target: w.root.ID,
		TargetCreatedAt: w.root.CreatedAt, Pubkey: w.bob.PubKey, Emoji: "+", ReactionEventID: w.reaction.ID})
	require.NoError(t, err)
	require.True(t, fresh)
	w.readState = fixture.Event(t, q, w.cid, w.alice, 30078, at(6), expiresIn(-5),
		eventtest.Tag("d", "read-state:0123456789abcdef0123456789abcdef"), eventtest.Tag("t", "read-state"))
	return w
}

// An event whose expiration has passed is absent from every read the store
// serves (docs/PROTOCOL.md §6.6): REQ rows, COUNT, the #p walk, thread
// replies, channel windows and the read-state snapshot, before any purge.
func TestExpiredEventsAreNotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	w := newExpiryWorld(t, b)

	require.Equal(t, 6, count(t, b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND expires_at IS NOT NULL`, w.cid),
		"the insert fills expires_at from the tag")

	chans := store.EventQueryParams{CommunityID: w.cid, Reader: w.alice.PubKey, Filter: &event.Filter{Kinds: []int{9}},
		Channels: []string{w.ch}, ChannelOnly: true, Limit: 100}
	got, err := b.s.EventQuery(ctx, chans)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{w.root.ID, w.replyLater.ID}, ids(got))
	rows, err := b.s.EventRows(ctx, chans)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	n, err := b.s.EventCount(ctx, chans)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "COUNT agrees with REQ")
	cands, err := b.s.EventCountCandidates(ctx, chans)
	require.NoError(t, err)
	require.Len(t, cands, 2)

	mention := store.EventQueryParams{CommunityID: w.cid, Reader: w.bob.PubKey,
		Filter: &event.Filter{Tags: map[string][]string{"p": {w.bob.PubKey}}}, Channels: []string{w.ch}, Limit: 100}
	got, err = b.s.EventQuery(ctx, mention)
	require.NoError(t, err)
	require.Empty(t, got, "the #p walk skips expired events")

	replies, err := b.s.ThreadReplies(ctx, store.ThreadRepliesParams{CommunityID: w.cid, Root: w.root.ID, MaxDepth: 100,
		Channels: []string{w.ch}, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, []string{w.replyLater.ID}, ids(replies))

	top, _, err := b.s.WindowChannelRows(ctx, store.WindowChannelRowsParams{CommunityID: w.cid, Channel: w.ch, Limit: 100})
	require.NoError(t, err)
	var topIDs []string
	for _, r := range top {
		topIDs = append(topIDs, hex.EncodeToString(r.ID))
	}
	require.ElementsMatch(t, []string{w.root.ID}, topIDs)
	loaded, err := b.s.WindowLoad(ctx, w.cid, []store.WindowKey{
		{At: time.Unix(w.topGone.CreatedAt, 0), ID: unhex(t, w.topGone.ID)},
		{At: time.Unix(w.root.CreatedAt, 0), ID: unhex(t, w.root.ID)}})
	require.NoError(t, err)
	require.Len(t, loaded, 1)
	exists, err := b.s.WindowThreadRootExists(ctx, w.cid, w.ch, unhex(t, w.topGone.ID))
	require.NoError(t, err)
	require.False(t, exists, "an expired root is absent, not a tombstone")
	roots, err := b.s.WindowThreadRoots(ctx, w.cid, w.ch, [][]byte{unhex(t, w.replyGone.ID), unhex(t, w.replyLater.ID)})
	require.NoError(t, err)
	require.Len(t, roots, 1, "summary recovery skips an expired target")
	require.Equal(t, w.replyLater.ID, hex.EncodeToString(roots[0].Target))

	_, err = b.s.EventLookup(ctx, w.cid, w.topGone.ID)
	require.ErrorIs(t, err, pg.ErrNotFound, "a write that names an expired event does not find it")
	_, err = b.s.EventLookup(ctx, w.cid, w.replyLater.ID)
	require.NoError(t, err)

	var snap int
	require.NoError(t, b.s.ReadStateSnapshotRows(ctx, w.cid, unhex(t, w.alice.PubKey), 1<<20, 100,
		func(store.ReadStateSnapshotRow) bool { snap++; return true }))
	require.Zero(t, snap)
}

// EventInsertBatch, the group commit's statement, fills expires_at too.
func TestEventInsertBatchExpiration(t *testing.T) {
	t.Parallel()
	b := setupPool(t)
	cid := b.community(t)
	k := eventtest.NewKey()
	with, without := k.Signed(t, 1, expiresIn(600)), k.Signed(t, 1)
	_, err := b.s.EventInsertBatch(context.Background(), []store.EventInsertParams{
		{CommunityID: cid, Event: &with}, {CommunityID: cid, Event: &without}})
	require.NoError(t, err)
	at, _, _ := with.Expiration()
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2 AND expires_at = to_timestamp($3)`,
		cid, unhex(t, with.ID), at))
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2 AND expires_at IS NULL`,
		cid, unhex(t, without.ID)))
}

func purge(t *testing.T, b *poolBundle, limit int) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pg.InTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		var err error
		n, err = store.New(tx).ExpiredPurge(context.Background(), limit)
		return err
	}))
	return n
}

// ExpiredPurge deletes the expired rows with their mention and thread rows,
// takes a live expired reply off its root's counters and removes an
// expired reaction, in bounded batches; it deletes a read-state row too
// (its own hard-delete opt-in) and leaves everything else.
func TestExpiredPurge(t *testing.T) {
	t.Parallel()
	b := setupPool(t)
	w := newExpiryWorld(t, b)
	other := fixture.Event(t, b.pool, b.community(t), w.alice, 1, expiresIn(3600))

	require.Equal(t, int64(2), purge(t, b, 2), "a batch is bounded")
	require.Equal(t, int64(3), purge(t, b, 500))
	require.Zero(t, purge(t, b, 500))

	for _, ev := range []event.Event{w.topGone, w.replyGone, w.globalGone, w.reaction, w.readState} {
		require.Zero(t, count(t, b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, w.cid, unhex(t, ev.ID)), ev.Kind)
		require.Zero(t, count(t, b.pool, `SELECT count(*) FROM thread_metadata WHERE community_id = $1 AND event_id = $2`, w.cid, unhex(t, ev.ID)))
	}
	for _, ev := range []event.Event{w.root, w.replyLater} {
		require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2`, w.cid, unhex(t, ev.ID)))
	}
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM events WHERE id = $1`, unhex(t, other.ID)))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM event_mentions WHERE community_id = $1`, w.cid))
	root, found, err := b.s.ThreadGet(context.Background(), w.cid, w.root.ID)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, 1, root.ReplyCount)
	require.Equal(t, 1, root.DescendantCount)
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM reactions WHERE community_id = $1 AND removed_at IS NOT NULL`, w.cid))
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM parameterized_event_watermarks WHERE community_id = $1`, w.cid),
		"the read-state watermark outlives the row")
}

// The one-event statement with an expiration and operator-listener targets
// binds both (expires_at $17, targets $18).
func TestEventInsertExpirationWithListeners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPool(t)
	cid := b.community(t)
	target := pubkey()
	require.NoError(t, b.s.ListenerRegister(ctx, pubkey(), []string{target}))
	ev := eventtest.NewKey().Signed(t, 9, eventtest.Tag("p", target), expiresIn(600))
	res, err := b.s.EventInsertCounted(ctx, store.EventInsertParams{CommunityID: cid, Event: &ev,
		ListenerTargets: store.MentionTargets(&ev)})
	require.NoError(t, err)
	require.True(t, res.Inserted)
	require.Equal(t, int64(1), res.ListenerRows)
	at, _, _ := ev.Expiration()
	require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM events WHERE community_id = $1 AND id = $2 AND expires_at = to_timestamp($3)`,
		cid, unhex(t, ev.ID), at))
}
