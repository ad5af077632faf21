package window

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
)

// TestAuxPage pins the size of one aux page (docs/NIP-CW.md §3.3: 1,000
// events, and one more that only says another page follows) and its
// continuation from the last position of the page, to the microsecond.
func TestAuxPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	author := eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	ch := fixture.Channel(t, pool, cid, author)
	target := fixture.Event(t, pool, cid, author, event.KindStreamMessage, eventtest.Channel(ch))
	pub, err := hex.DecodeString(author.PubKey)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
		SELECT $1, sha256(convert_to('page' || i, 'UTF8')), $2, now() - i * interval '1 millisecond', 7,
		       jsonb_build_array(jsonb_build_array('e', $3::text)), '+', sha512(convert_to('sig' || i, 'UTF8')), $4::uuid
		FROM generate_series(1, 1500) AS i`, cid, pub, target.ID, ch)
	require.NoError(t, err)
	sc := Scope{CommunityID: cid, Reader: author.PubKey, Accessible: func(string) bool { return true }}
	run := func(maxBytes int) *closure {
		return &closure{q: pool, communityID: cid, rules: channelAux(sc), spend: channelBudget(maxBytes), seen: map[string]struct{}{}}
	}
	targets := []string{target.ID}

	scanned, err := run(0).scan(ctx, hop1Kinds, targets, nil)
	require.NoError(t, err)
	require.Len(t, scanned, auxPageRows+1)
	require.Equal(t, 1000, auxPageRows)
	first, more, err := run(0).read(ctx, hop1Kinds, targets, nil)
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, first, auxPageRows)
	pos := first[auxPageRows-1].pos
	rest, more, err := run(0).read(ctx, hop1Kinds, targets, &pos)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, rest, 500)
	require.Equal(t, scanned[auxPageRows].pos, rest[0].pos, "the next page starts at the probe")
	seen := map[string]struct{}{}
	for _, r := range append(first, rest...) {
		seen[hex.EncodeToString(r.pos.id)] = struct{}{}
	}
	require.Len(t, seen, 1500)

	// A byte cap stops the page after the row that crosses it.
	row := int(first[0].payload)
	for _, tc := range []struct{ maxBytes, rows int }{{3 * row, 4}, {3*row + 1, 4}, {3*row - 1, 3}} {
		capped, more, err := run(tc.maxBytes).read(ctx, hop1Kinds, targets, nil)
		require.NoError(t, err)
		require.True(t, more)
		require.Len(t, capped, tc.rows, "max bytes %d", tc.maxBytes)
	}
}

// TestTargetGuard: stored events whose tags are not an array (an
// imported row, or one written before validation) match nothing and fail
// nothing in the aux closure (store.TestWindowTargetGuard checks the
// positional test alone).
func TestTargetGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	author := eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	ch := fixture.Channel(t, pool, cid, author)
	target := fixture.Event(t, pool, cid, author, event.KindStreamMessage, eventtest.Channel(ch))
	reaction := fixture.Event(t, pool, cid, author, event.KindReaction, eventtest.Channel(ch), eventtest.Tag("e", target.ID))
	pub, err := hex.DecodeString(author.PubKey)
	require.NoError(t, err)
	for i, tags := range []string{`{"e": "` + target.ID + `"}`, `"e"`, `null`, `7`} {
		_, err = pool.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id)
			VALUES ($1, sha256(convert_to('odd' || $5::int::text, 'UTF8')), $2, now(), 7, $3::jsonb, '+', sha512(convert_to('sig', 'UTF8')), $4::uuid)`,
			cid, pub, tags, ch, i)
		require.NoError(t, err, tags)
	}

	sc := Scope{CommunityID: cid, Reader: author.PubKey, Accessible: func(string) bool { return true }}
	items, cut, err := closeOver(ctx, pool, cid, channelAux(sc), channelBudget(0), []string{target.ID})
	require.NoError(t, err)
	require.False(t, cut)
	require.Len(t, items, 1)
	require.Equal(t, reaction.ID, items[0].Event.ID)
}
