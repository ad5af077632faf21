package windowbench

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/benchload"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

var threadColumns = []string{"community_id", "event_created_at", "event_id", "channel_id", "parent_event_id",
	"parent_event_created_at", "root_event_id", "root_event_created_at", "depth", "reply_count",
	"descendant_count", "last_reply_at", "broadcast"}

// loadEvents signs the batches of in on every core and stores them
// through the store's batch insert (internal/benchload), soft-deleting the
// deleted replies in the same transaction. It returns once in is closed.
func loadEvents(ctx context.Context, pool *pgxpool.Pool, st *store.Store, as []author, in <-chan []benchload.Event, total int, p *progress) error {
	keys := make(map[string]*author, len(as))
	for i := range as {
		keys[as[i].pubkey] = &as[i]
	}
	_, err := benchload.Load(ctx, benchload.Config{Pool: pool, Store: st,
		SignFunc: func(ev *event.Event) error {
			a, ok := keys[ev.PubKey]
			if !ok {
				return fmt.Errorf("no key for author %s", ev.PubKey)
			}
			var id [32]byte
			if _, err := hex.Decode(id[:], []byte(ev.ID)); err != nil {
				return fmt.Errorf("event id: %w", err)
			}
			sig, err := a.sign(id)
			if err != nil {
				return fmt.Errorf("sign fixture event: %w", err)
			}
			ev.Sig = hex.EncodeToString(sig[:])
			return nil
		},
		ProgressFunc: func(n int64) { p.logf("events: %d of %d loaded", n, total) },
	}, in)
	return err
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
