package read_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
)

// Rows stored above the created-at ceiling before the engine started (an
// import made before the importer refused events from the future, or a
// clock that has moved back since) are still answered by plain reads once
// LoadCeiling has run, as the app does at start (docs/ARCHITECTURE.md
// "Created-at ceiling"). The row dated in a year is read; so is one of
// today, and COUNT counts both.
func TestLoadCeilingKeepsFutureRowsReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	cid := fixture.Community(t, pool).ID
	author, reader := eventtest.NewKey(), eventtest.NewKey()
	future := fixture.Event(t, pool, cid, author, 1, eventtest.At(time.Now().AddDate(1, 0, 0).Unix()))
	today := fixture.Event(t, pool, cid, author, 1)
	sc := read.Scope{CommunityID: cid, Reader: reader.PubKey}

	engine := read.New(read.Config{Pool: pool})
	require.NoError(t, engine.LoadCeiling(ctx))
	require.Equal(t, []string{future.ID, today.ID}, reqIDs(t, engine, sc, `{"kinds":[1]}`))
	require.Equal(t, []string{future.ID, today.ID}, reqIDs(t, engine, sc, `{"authors":["`+author.PubKey+`"],"kinds":[1],"limit":5}`))
	f, err := event.ParseFilter([]byte(`{"kinds":[1]}`))
	require.NoError(t, err)
	rd, err := engine.Open(ctx, read.Request{Scope: sc, Surface: read.SurfaceCOUNT, Filters: []event.Filter{f}})
	require.NoError(t, err)
	defer rd.Close()
	n, err := rd.Count(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
}
