package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// readStateFamily is kind 30078. A conforming NIP-RS read-state event
// (event.IsReadState, docs/PROTOCOL.md §14.1) keeps one physical row per coordinate and
// a durable watermark (docs/PROTOCOL.md §14.2); every other 30078 is NIP-78 application
// data and takes the replaceable family's soft-delete replacement
// unchanged. Either way the coordinate is (community, kind, pubkey, d): 30078
// is global-only, so a channel never enters it.
type readStateFamily struct{ byTag }

func (readStateFamily) authorize(ctx context.Context, p *Pipeline, req *Request, rt route) (change, error) {
	c, err := replaceableFamily{}.authorize(ctx, p, req, rt)
	if err != nil || !event.IsReadState(&req.Event) {
		return c, err
	}
	return readStateChange{c.(replaceChange)}, nil
}

// readStateChange writes a conforming read-state event (docs/PROTOCOL.md §14.2): under
// the coordinate's advisory lock it compares the event with the live head
// and the watermark, hard-deletes the head and its mention rows, inserts the
// event and advances the watermark, all in one transaction.
type readStateChange struct{ replaceChange }

// Read-state write outcomes: the values of buzz_read_state_writes_total.
const (
	rsInserted  = "inserted"
	rsDominated = "dominated"
	rsDuplicate = "duplicate"
	rsStaleDB   = "stale_db"
)

// notStored ends a read-state write that stored nothing; it is errDuplicate
// for the pipeline (the answer is "duplicate:", docs/PROTOCOL.md §14.2) and carries
// the outcome for the metric.
type notStored struct{ outcome string }

func (e notStored) Error() string        { return "read state not stored: " + e.outcome }
func (e notStored) Is(target error) bool { return target == errDuplicate }

func (c readStateChange) apply(ctx context.Context, w writer) (outcome, error) {
	s, ev := w.store(), w.ev()
	if err := s.AdvisoryXactLock(ctx, lockKey(c.key)); err != nil { // 1
		return outcome{}, fmt.Errorf("lock coordinate: %w", err)
	}
	head, found, err := s.ReplaceableHead(ctx, c.key) // 3
	if err != nil {
		return outcome{}, fmt.Errorf("read head: %w", err)
	}
	if found && !newer(ev, head) { // 4
		return outcome{}, notStored{lostTo(ev, head)}
	}
	mark, marked, err := s.ReadStateWatermark(ctx, c.key)
	if err != nil {
		return outcome{}, err
	}
	if marked && !newer(ev, mark) {
		return outcome{}, notStored{lostTo(ev, mark)}
	}
	deleted, err := s.ReadStateRemoveHead(ctx, c.key) // 5
	if err != nil {
		return outcome{}, err
	}
	switch err := w.insertEvent(ctx, c.channel, c.dTag); { // 6, 8: mentions are in the same statement
	case errors.Is(err, errDuplicate):
		return outcome{}, notStored{rsDuplicate}
	case pg.IsStaleWatermark(err): // unreachable under the lock and step 4; kept defensive
		return outcome{}, notStored{rsStaleDB}
	case err != nil:
		return outcome{}, err
	}
	if err := s.ReadStateAdvance(ctx, c.key, ev.ID, ev.CreatedAt); err != nil { // 7
		return outcome{}, err
	}
	return outcome{channel: c.channel, readState: true, readStateDeleted: deleted}, nil
}

// lostTo names why ev did not outrank v: the exact tuple is a duplicate,
// anything else was dominated.
func lostTo(ev *event.Event, v store.Head) string {
	if ev.ID == v.ID && ev.CreatedAt == v.CreatedAt {
		return rsDuplicate
	}
	return rsDominated
}

// countReadState moves the read-state metrics for a commit's result: out
// and err are what commit returned for a conforming read-state event.
func (p *Pipeline) countReadState(req *Request, out outcome, err error) {
	m := p.cfg.Metrics.ReadState
	var ns notStored
	switch {
	case errors.As(err, &ns):
		m.Writes.WithLabelValues(ns.outcome).Inc()
	case pg.IsHardDeleteFence(err):
		m.FenceErrors.Inc()
		p.log.Error("NIP-RS hard-delete fence refused the relay's own delete", slog.String("community_id", req.Tenant.CommunityID),
			slog.Int("kind", req.Event.Kind), slog.String("event_id", req.Event.ID))
	case err == nil && out.readState:
		m.Writes.WithLabelValues(rsInserted).Inc()
		m.PayloadsDeleted.Add(float64(out.readStateDeleted))
	}
}
