package read_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
)

// TestHistoryOneStatementPerFilter: a REQ's history costs one statement
// per filter and nothing else once the reader's accessible channels are
// cached: the gates read no table, "#h" channels found in the cached set
// are not confirmed again, a "#p" read is one statement through
// event_mentions, and each row's JSON comes with it.
func TestHistoryOneStatementPerFilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	reader, other := eventtest.NewKey(), eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	open := fixture.Channel(t, pool, cid, other)
	fixture.Event(t, pool, cid, other, 1, eventtest.Tag("p", reader.PubKey), eventtest.Tag("t", "x"))
	fixture.Event(t, pool, cid, other, 9, eventtest.Channel(open), eventtest.Tag("e", strings.Repeat("ab", 32)))

	rec := &dbtest.SQLRecorder{}
	traced := dbtest.TracedPool(t, pool, rec, 4)
	engine := read.New(read.Config{Pool: traced})

	raw := []string{
		`{"kinds":[1],"limit":5}`,
		`{"kinds":[1],"authors":["` + other.PubKey + `"],"limit":5}`,
		`{"kinds":[1],"#p":["` + reader.PubKey + `"],"limit":5}`,
		`{"kinds":[1],"#t":["x"],"limit":5}`,
		`{"kinds":[9],"#h":["` + open + `"],"#e":["` + strings.Repeat("ab", 32) + `"],"limit":5}`,
	}
	filters := make([]event.Filter, len(raw))
	for i, r := range raw {
		var err error
		filters[i], err = event.ParseFilter([]byte(r))
		require.NoError(t, err)
	}
	req := func() (rows int) {
		rd, err := engine.Open(ctx, read.Request{Scope: read.Scope{CommunityID: cid, Reader: reader.PubKey},
			Surface: read.SurfaceREQ, Filters: filters})
		require.NoError(t, err)
		require.NoError(t, rd.Rows(ctx, func(read.Row) bool { rows++; return true }))
		return rows
	}
	require.Equal(t, 2, req(), "the kind-1 event for the first four filters, the kind 9 once")
	first := rec.Take()
	require.Len(t, first, 1+len(filters), "the accessible channels, then one statement per filter: %q", first)

	require.Equal(t, 2, req())
	again := rec.Take()
	require.Len(t, again, len(filters), "cached channels: one statement per filter: %q", again)
	for _, sql := range again {
		require.True(t, strings.HasPrefix(sql, "SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags"), sql)
	}
}
