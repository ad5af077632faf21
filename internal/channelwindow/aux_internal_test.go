package channelwindow

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

// TestAuxPage pins the size of one aux page (§4.3: 1,000 events, and one
// more that only says another page follows) and its continuation from
// the last position of the page, to the microsecond.
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

	first, stopped, err := queryAux(ctx, pool, cid, hop1Kinds, []string{target.ID}, nil, 0)
	require.NoError(t, err)
	require.False(t, stopped)
	require.Len(t, first, auxPageSize+1)
	require.Equal(t, 1000, auxPageSize)
	pos := first[auxPageSize-1].position()
	rest, _, err := queryAux(ctx, pool, cid, hop1Kinds, []string{target.ID}, &pos, 0)
	require.NoError(t, err)
	require.Len(t, rest, 500)
	require.Equal(t, first[auxPageSize].id, rest[0].id, "the next page starts at the probe")
	seen := map[string]struct{}{}
	for _, s := range append(first[:auxPageSize], rest...) {
		seen[hex.EncodeToString(s.id)] = struct{}{}
	}
	require.Len(t, seen, 1500)

	// A byte cap stops the page after the row that crosses it.
	row := len(first[0].content) + len(first[0].tags)
	capped, stopped, err := queryAux(ctx, pool, cid, hop1Kinds, []string{target.ID}, nil, 3*row)
	require.NoError(t, err)
	require.True(t, stopped)
	require.Len(t, capped, 4)
	capped, stopped, err = queryAux(ctx, pool, cid, hop1Kinds, []string{target.ID}, nil, 3*row+1)
	require.NoError(t, err)
	require.True(t, stopped)
	require.Len(t, capped, 4)
	capped, stopped, err = queryAux(ctx, pool, cid, hop1Kinds, []string{target.ID}, nil, 3*row-1)
	require.NoError(t, err)
	require.True(t, stopped)
	require.Len(t, capped, 3)
}
