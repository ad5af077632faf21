package window_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// Thread half: 120 replies within 3 seconds paged with limit 7
// while a second client edits and deletes replies and posts new ones:
// every reply that stays live is served exactly once, no row twice, and
// the order holds across pages and same-second boundaries.
func TestPagingUnderWrites(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	ch := w.channel(t)
	base := now()
	root := w.root(t, ch, base)
	replies := make([]event.Event, 120)
	for i := range replies {
		replies[i] = w.reply(t, ch, root, root, base+1+int64(i/40), fmt.Sprintf("reply %d", i))
	}

	// The second client: edits of every third reply, deletions of every
	// seventh, and new replies, until the reader is done.
	writer := w.r.Dial(t, "")
	writer.Auth(w.owner)
	deleted := map[string]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			target := replies[(i*13)%len(replies)]
			switch i % 3 {
			case 0:
				writer.MustPublish(w.owner.Signed(t, event.KindMessageEdit, eventtest.Channel(ch), eventtest.Content(fmt.Sprintf("edit %d", i)),
					eventtest.Tag("e", target.ID)))
			case 1:
				// Marked before it is sent: a reply the reader misses may
				// have been deleted before the mark otherwise.
				mu.Lock()
				gone := deleted[target.ID]
				deleted[target.ID] = true
				mu.Unlock()
				if !gone {
					writer.MustPublish(w.owner.Signed(t, event.KindDeletion, eventtest.Channel(ch), eventtest.Tag("e", target.ID)))
				}
			default:
				writer.MustPublish(w.owner.Signed(t, event.KindStreamMessage, replyOpts(ch, root, root, time.Now().Unix(), fmt.Sprintf("new %d", i))...))
			}
		}
	}()

	r := req(ch, root)
	r.Limit = 7
	seen := map[string]int{}
	var served []event.Event
	for pageNo := 0; ; pageNo++ {
		require.Less(t, pageNo, 40, "paging does not end")
		pages := w.windows(t, w.query(t, reader, filter(r)), reader, r)
		for _, ev := range pages[0].rows {
			seen[ev.ID]++
			served = append(served, ev)
		}
		if !pages[0].hasMore {
			break
		}
		r.Cursor = pages[0].next
	}
	close(done)
	wg.Wait()

	for i := 1; i < len(served); i++ {
		require.True(t, before(served[i-1], served[i]), "newest first with ties by id, across pages")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range replies {
		if !deleted[ev.ID] {
			require.Equal(t, 1, seen[ev.ID], "a live reply is served exactly once")
		}
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "row %s served twice", id)
	}
	original := map[string]bool{}
	for _, ev := range replies {
		original[ev.ID] = true
	}
	for _, ev := range served {
		if !original[ev.ID] {
			require.Greater(t, ev.CreatedAt, replies[119].CreatedAt, "only a new reply, newer than every original, is not one of them")
		}
	}
	require.NotEmpty(t, deleted)
}
