package read_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/store"
)

// BenchmarkReqHistory is the REQ history read of target P3 in docs/PERFORMANCE.md (kinds,
// authors, #e, #p, limit 50) end to end below the socket: the door, the
// statement, the scan, the post-filter and each row's wire JSON. The
// community holds benchEvents global kind-1 events by benchAuthors
// authors, each replying to one of benchRoots roots and mentioning one of
// the authors, with a content that needs escaping.
func BenchmarkReqHistory(b *testing.B) {
	const (
		benchEvents  = 3000
		benchAuthors = 10
		benchRoots   = 20
	)
	ctx := context.Background()
	pool, _ := dbtest.NewDB(b)
	engine := read.New(read.Config{Pool: pool})
	cid := fixture.Community(b, pool).ID
	keys := make([]eventtest.Key, benchAuthors)
	for i := range keys {
		keys[i] = eventtest.NewKey()
	}
	roots := make([]string, benchRoots)
	for i := range roots {
		roots[i] = fixture.Event(b, pool, cid, keys[i%benchAuthors], 1, eventtest.Content(fmt.Sprintf("root %d", i))).ID
	}
	now := time.Now().Unix() - benchEvents
	batch := make([]store.EventInsertParams, 0, 500)
	flush := func() {
		_, err := store.New(pool).EventInsertBatch(ctx, batch)
		require.NoError(b, err)
		batch = batch[:0]
	}
	for i := range benchEvents {
		ev := keys[i%benchAuthors].Signed(b, 1, eventtest.At(now+int64(i)),
			eventtest.Tag("e", roots[i%benchRoots], "", "root"),
			eventtest.Tag("p", keys[(i+1)%benchAuthors].PubKey),
			eventtest.Tag("t", "bench"),
			eventtest.Content(fmt.Sprintf("reply %d: \"quoted\"\nsecond line — ünïcødé <b>&</b>", i)))
		batch = append(batch, store.EventInsertParams{CommunityID: cid, Event: &ev})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
	_, err := pool.Exec(ctx, "ANALYZE events; ANALYZE event_mentions")
	require.NoError(b, err)

	reader := keys[0].PubKey
	shapes := []struct{ name, filter string }{
		{"Kinds", `{"kinds":[1],"limit":50}`},
		{"Authors", `{"kinds":[1],"authors":["` + keys[3].PubKey + `"],"limit":50}`},
		{"E", `{"kinds":[1],"#e":["` + roots[5] + `"],"limit":50}`},
		{"P", `{"kinds":[1],"#p":["` + keys[4].PubKey + `"],"limit":50}`},
	}
	for _, sh := range shapes {
		f, err := event.ParseFilter([]byte(sh.filter))
		require.NoError(b, err)
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				rd, err := engine.Open(ctx, read.Request{Scope: read.Scope{CommunityID: cid, Reader: reader},
					Surface: read.SurfaceREQ, Filters: []event.Filter{f}})
				if err != nil {
					b.Fatal(err)
				}
				n = 0
				if err := rd.Rows(ctx, func(r read.Row) bool {
					n += len(r.JSON)
					return true
				}); err != nil {
					b.Fatal(err)
				}
			}
			if n == 0 {
				b.Fatal("no rows")
			}
		})
	}
}
