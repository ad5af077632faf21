package read_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
)

// countHydrated is a pgx tracer that records how many ids each search
// hydration statement asked for.
type countHydrated struct {
	mu    sync.Mutex
	sizes []int
}

func (c *countHydrated) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "FROM search_hydrate(") || len(d.Args) != 3 {
		return ctx
	}
	if ids, ok := d.Args[2].([][]byte); ok {
		c.mu.Lock()
		c.sizes = append(c.sizes, len(ids))
		c.mu.Unlock()
	}
	return ctx
}

func (c *countHydrated) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *countHydrated) take() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.sizes
	c.sizes = nil
	return out
}

// TestSearchHydratesWhatItSends: a NIP-50 REQ hydrates, of its page of hits,
// the rows it needs in rank order (docs/PROTOCOL.md §12.6): a limit of 5
// whose first hits all pass reads 5 rows, not the page; a filter whose tag
// condition only the older hits meet reads further chunks, and answers what
// reading the whole page answered.
func TestSearchHydratesWhatItSends(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	trace := &countHydrated{}
	engine := read.New(read.Config{Pool: dbtest.TracedPoolWith(t, pool, trace, 10)})

	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	cid := fixture.Community(t, pool).ID
	ch := fixture.Channel(t, pool, cid, owner, fixture.Private(), fixture.Members(reader))
	base := time.Now().Add(-time.Hour).Unix()
	var tagged []string // newest first
	for i := range 40 {
		opts := []eventtest.Option{eventtest.Channel(ch), eventtest.At(base + int64(i)), eventtest.Content(fmt.Sprintf("needle %d", i))}
		if i < 4 {
			opts = append(opts, eventtest.Tag("t", "x"))
		}
		ev := fixture.Event(t, pool, cid, owner, 9, opts...)
		if i < 4 {
			tagged = append([]string{ev.ID}, tagged...)
		}
	}
	search := func(raw string) []string {
		return reqIDs(t, engine, read.Scope{CommunityID: cid, Reader: reader.PubKey}, raw)
	}

	got := search(`{"search":"needle","limit":5}`)
	require.Len(t, got, 5)
	require.Equal(t, []int{5}, trace.take(), "ids hydrated for a limit of 5 whose hits all pass")

	got = search(`{"search":"needle","#t":["x"],"limit":3}`)
	require.Equal(t, tagged[:3], got, "the newest tagged hits, in rank order")
	sizes := trace.take()
	require.Greater(t, len(sizes), 1, "the tagged hits lie past the first chunk")
	total := 0
	for _, n := range sizes {
		total += n
	}
	require.LessOrEqual(t, total, 40, "no hit is hydrated twice")

	got = search(`{"search":"needle","#t":["x"],"limit":10}`)
	require.Equal(t, tagged, got, "every tagged hit once the page is read to its end")
}
