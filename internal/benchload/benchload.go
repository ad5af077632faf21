// Package benchload loads the generated datasets of buzz-bench (the REQ
// fixture, the thread-window fixture) into a relay's database through the
// store's batch insert, store.EventInsertBatch: the statement the ingest
// group commit uses, so every loaded event gets the rows ingest would write
// with it (event_mentions, and whatever the schema's triggers add).
//
// It owns the pipeline: signing on every core, then a few writers, each
// storing one batch per statement, with a progress callback. It does NOT
// generate events, create communities or channels, write rows other than
// the events' own (thread rows, audit entries) or run VACUUM ANALYZE: the
// dataset's package does.
package benchload

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

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// DefaultWriters is the batches stored at once when Config.Writers is 0:
// one can wait for its commit while the next is sent.
const DefaultWriters = 2

// DefaultProgressEvery is how often ProgressFunc is called when
// Config.ProgressEvery is 0.
const DefaultProgressEvery = 15 * time.Second

// Event is one event to load: its insert parameters, the event's id and
// pubkey set and its signature left to Config.SignFunc.
type Event struct {
	store.EventInsertParams
	// Deleted soft-deletes the event in its batch's transaction right after
	// the insert, as a NIP-09 deletion leaves it.
	Deleted bool
}

// Config is one load.
type Config struct {
	// Pool is the relay's database, migrated.
	Pool *pgxpool.Pool
	// Store writes the events.
	Store *store.Store
	// SignFunc sets ev.Sig from ev.ID. It is called concurrently from
	// Signers goroutines, each event once.
	SignFunc func(ev *event.Event) error
	// Signers is the signing goroutines. Defaults to runtime.NumCPU().
	Signers int
	// Writers is the batches stored at once. Defaults to DefaultWriters.
	Writers int
	// ProgressFunc, when set, is called every ProgressEvery with the events
	// stored so far, from a goroutine of its own, never after Load returns.
	ProgressFunc func(stored int64)
	// ProgressEvery defaults to DefaultProgressEvery.
	ProgressEvery time.Duration
}

// Result is what one load wrote.
type Result struct {
	// Events is the event rows inserted; an event already stored is not
	// counted.
	Events int64
	// Mentions is the event_mentions rows written with them: one per
	// distinct p tag of each inserted event (store.Mentions).
	Mentions int64
	// Deleted is the inserted events soft-deleted.
	Deleted int64
}

// Load signs and stores every batch read from in until in is closed, each
// batch with one store.EventInsertBatch statement (in one transaction with
// its soft deletes, when it has any). At the first error it stops storing,
// drains in, and returns the error with what was stored until then; a
// generator writing to in therefore always finishes. It must be called
// once per in.
func Load(ctx context.Context, cfg Config, in <-chan []Event) (Result, error) {
	signers := cfg.Signers
	if signers <= 0 {
		signers = runtime.NumCPU()
	}
	writers := cmpOr(cfg.Writers, DefaultWriters)
	g, gctx := errgroup.WithContext(ctx)
	signed := make(chan []Event, writers)
	var signing sync.WaitGroup
	for range signers {
		signing.Add(1)
		g.Go(func() error {
			defer signing.Done()
			for batch := range in {
				if err := gctx.Err(); err != nil {
					return err
				}
				for i := range batch {
					if err := cfg.SignFunc(batch[i].Event); err != nil {
						return fmt.Errorf("sign event %s: %w", batch[i].Event.ID, err)
					}
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
		signing.Wait()
		close(signed)
	}()
	var events, mentions, deleted atomic.Int64
	for range writers {
		g.Go(func() error {
			for batch := range signed {
				r, err := store1(gctx, cfg, batch)
				if err != nil {
					return err
				}
				events.Add(r.Events)
				mentions.Add(r.Mentions)
				deleted.Add(r.Deleted)
			}
			return nil
		})
	}
	stop := progress(cfg, &events)
	err := g.Wait()
	stop()
	for range in { // after an error: let the generator finish
	}
	return Result{Events: events.Load(), Mentions: mentions.Load(), Deleted: deleted.Load()}, err
}

// store1 stores one batch: one statement, or one transaction when it
// soft-deletes some of its events.
func store1(ctx context.Context, cfg Config, batch []Event) (Result, error) {
	ps := make([]store.EventInsertParams, len(batch))
	anyDeleted := false
	for i := range batch {
		ps[i] = batch[i].EventInsertParams
		anyDeleted = anyDeleted || batch[i].Deleted
	}
	var r Result
	write := func(q pg.Querier) error {
		r = Result{}
		res, err := store.New(q).EventInsertBatch(ctx, ps)
		if err != nil {
			return fmt.Errorf("store %d events: %w", len(ps), err)
		}
		for i, x := range res {
			if !x.Inserted {
				continue
			}
			r.Events++
			r.Mentions += int64(len(store.Mentions(ps[i].Event)))
			if !batch[i].Deleted {
				continue
			}
			ev := ps[i].Event
			if _, err := store.New(q).EventSoftDelete(ctx, ps[i].CommunityID, ev.ID, ev.CreatedAt); err != nil {
				return err
			}
			r.Deleted++
		}
		return nil
	}
	if !anyDeleted {
		return r, write(cfg.Pool)
	}
	return r, pg.InTx(ctx, cfg.Pool, func(tx pgx.Tx) error { return write(tx) })
}

// progress calls cfg.ProgressFunc every cfg.ProgressEvery until the
// returned stop is called; stop returns once no call is running.
func progress(cfg Config, stored *atomic.Int64) (stop func()) {
	if cfg.ProgressFunc == nil {
		return func() {}
	}
	every := cfg.ProgressEvery
	if every <= 0 {
		every = DefaultProgressEvery
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				cfg.ProgressFunc(stored.Load())
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
