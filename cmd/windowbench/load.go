package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// copiers is the number of concurrent COPY statements into events.
const copiers = 2

var eventColumns = []string{"community_id", "id", "pubkey", "created_at", "kind", "tags", "content", "sig",
	"received_at", "channel_id", "deleted_at"}

var threadColumns = []string{"community_id", "event_created_at", "event_id", "channel_id", "parent_event_id",
	"parent_event_created_at", "root_event_id", "root_event_created_at", "depth", "reply_count",
	"descendant_count", "last_reply_at", "broadcast"}

// copyEvents signs the batches of in on every core and loads them with
// COPY over copiers connections. It returns at the first error; the
// caller then drains in.
func copyEvents(ctx context.Context, pool *pgxpool.Pool, as []author, in <-chan []row, total int, p *progress) error {
	g, gctx := errgroup.WithContext(ctx)
	signed := make(chan []row, 4)
	var signers sync.WaitGroup
	for range runtime.NumCPU() {
		signers.Add(1)
		g.Go(func() error {
			defer signers.Done()
			for batch := range in {
				if err := gctx.Err(); err != nil {
					return err
				}
				for i := range batch {
					sig, err := as[batch[i].author].sign(batch[i].id)
					if err != nil {
						return fmt.Errorf("sign fixture event: %w", err)
					}
					batch[i].sig = sig
				}
				select {
				case signed <- batch:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	go func() {
		signers.Wait()
		close(signed)
	}()
	var loaded atomic.Int64
	for range copiers {
		g.Go(func() error {
			for batch := range signed {
				n, err := pool.CopyFrom(gctx, pgx.Identifier{"events"}, eventColumns, pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
					return eventValues(as, &batch[i]), nil
				}))
				if err != nil {
					return fmt.Errorf("copy events: %w", err)
				}
				loaded.Add(n)
			}
			return nil
		})
	}
	stop := p.every(15*time.Second, func() string {
		return fmt.Sprintf("events: %d of %d loaded", loaded.Load(), total)
	})
	err := g.Wait()
	stop()
	return err
}

func eventValues(as []author, r *row) []any {
	at := time.Unix(r.at, 0).UTC()
	var deleted any
	if r.deleted {
		deleted = at.Add(time.Minute)
	}
	return []any{r.community, r.id[:], as[r.author].pub, at, int32(r.kind), r.tags, r.content, r.sig[:],
		at, r.channel, deleted}
}

// copyThreads loads the thread_metadata rows of nodes with one COPY and
// returns how many it wrote.
func copyThreads(ctx context.Context, pool *pgxpool.Pool, communityID, channel string, nodes []tnode) (int, error) {
	i := 0
	next := func() ([]any, error) {
		for ; i < len(nodes); i++ {
			n := &nodes[i]
			if n.depth == 0 && n.last == 0 {
				continue // a root without replies has no row
			}
			i++
			at := time.Unix(n.at, 0).UTC()
			var last any
			if n.last != 0 {
				last = time.Unix(n.last, 0).UTC()
			}
			if n.depth == 0 {
				return []any{communityID, at, n.id[:], channel, nil, nil, nil, nil, int32(0), n.replies, n.desc, last, false}, nil
			}
			p, r := &nodes[n.parent], &nodes[n.root]
			return []any{communityID, at, n.id[:], channel, p.id[:], time.Unix(p.at, 0).UTC(), r.id[:],
				time.Unix(r.at, 0).UTC(), int32(n.depth), n.replies, n.desc, last, false}, nil
		}
		return nil, nil
	}
	src := &funcSource{next: next}
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"thread_metadata"}, threadColumns, src)
	if err != nil {
		return 0, fmt.Errorf("copy thread_metadata: %w", err)
	}
	return int(n), nil
}

// funcSource is a pgx.CopyFromSource over a function that returns nil at
// the end.
type funcSource struct {
	next func() ([]any, error)
	row  []any
	err  error
}

func (s *funcSource) Next() bool {
	s.row, s.err = s.next()
	return s.row != nil && s.err == nil
}

func (s *funcSource) Values() ([]any, error) { return s.row, s.err }
func (s *funcSource) Err() error             { return s.err }
