package ingest

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// Group commit (target P1 of docs/PERFORMANCE.md). The one-statement changes of every connection
// (plain kinds, top-level channel messages, edits, votes: whatever a family
// answers with a plainChange) are not committed one by one: a submitter
// queues its event's insert and waits; a flusher takes everything queued,
// up to DefaultGroupCommitMax events, and stores it with
// store.EventInsertBatch, one round trip and one commit for all of them.
// Each event keeps its own outcome (inserted or duplicate: from ON CONFLICT,
// its own listener rows) and its own answer, given only after the commit.
//
// A batch is whatever queued while the previous batch was on its way, so
// an idle relay commits a lone event at once (no flusher busy: one starts)
// and a busy one commits in groups as large as its load. One batch is in
// flight at a time: its flusher is a goroutine that exists only while the
// queue is not empty and, back from a commit, takes everything queued
// meanwhile. A second batch in flight took only the events queued while
// the first was on its way, smaller batches for the same events; one
// flusher spends less CPU per event, in PostgreSQL and in the relay
// (docs/PERFORMANCE.md "Group commit: one batch in flight").
//
// Under load no event commits alone: a flusher about to commit a single
// event waits up to the group delay (Config.GroupDelay) for a second one
// when a batch of several events committed less than twice the delay ago
// (its submitters are about to send their next events). The wait ends as
// soon as a second event is queued. A lone publisher never shows that sign
// and never waits; under load an event waits at most the delay longer
// than without the rule (docs/PERFORMANCE.md "Group commit: no event alone
// under load").
//
// When a batch fails, nothing of it is assumed stored and every element is
// retried alone, as if there were no grouping: one bad event (a refused
// created_at floor, a constraint) gets its own error and never fails the
// others. An element whose batch may have committed before the failure was
// reported (the answer was lost, not refused) and that its retry finds
// stored is taken as stored by the batch: answered OK and fanned out
// (ambiguous.go).

// DefaultGroupCommitMax is the most events one group commit holds.
const DefaultGroupCommitMax = 128

// DefaultGroupDelay is the group delay (Config.GroupDelay): the longest a
// flusher holding a single event under load waits for a second. For twice
// as long after a batch of several events committed, the relay counts as
// under load.
const DefaultGroupDelay = time.Millisecond

// groupTimeout bounds one batch; its elements' own contexts do not, so one
// closed connection cannot abort the others' commit.
const groupTimeout = 30 * time.Second

// groupCommit queues one-statement inserts and commits them in batches.
type groupCommit struct {
	p     *Pipeline
	max   int
	delay time.Duration // Config.GroupDelay

	mu    sync.Mutex
	queue []*groupItem
	// flushing is set while the flusher runs.
	flushing bool
	// grew, when not nil, is closed by the next insert: a flusher holding a
	// single event waits on it for a second.
	grew chan struct{}
	// severalAt is when the last batch of several events committed.
	severalAt time.Time
}

// groupItem is one queued insert and, once done is closed, its result.
type groupItem struct {
	params store.EventInsertParams
	res    store.EventInsertResult
	err    error
	done   chan struct{}
}

// insert stores p through the next batch and returns its own result.
func (g *groupCommit) insert(p store.EventInsertParams) (store.EventInsertResult, error) {
	it := &groupItem{params: p, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, it)
	if g.grew != nil {
		close(g.grew)
		g.grew = nil
	}
	start := !g.flushing
	g.flushing = true
	g.mu.Unlock()
	if start {
		go g.flush()
	}
	// The answer waits for the commit even when the submitter's connection
	// has gone: the event may already be in a batch on its way.
	<-it.done
	return it.res, it.err
}

// flush commits batches until the queue is empty.
func (g *groupCommit) flush() {
	for several := false; ; {
		g.mu.Lock()
		if several {
			g.severalAt = time.Now()
		}
		if len(g.queue) == 1 && time.Since(g.severalAt) < 2*g.delay {
			g.awaitSecond()
		}
		n := min(len(g.queue), g.max)
		if n == 0 {
			g.flushing = false
			g.mu.Unlock()
			return
		}
		batch := make([]*groupItem, n)
		copy(batch, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()
		g.commit(batch)
		several = n > 1
	}
}

// awaitSecond waits, with g.mu held and released meanwhile, until another
// event is queued or the group delay has passed.
func (g *groupCommit) awaitSecond() {
	if g.grew == nil {
		g.grew = make(chan struct{})
	}
	grew := g.grew
	g.mu.Unlock()
	t := time.NewTimer(g.delay)
	select {
	case <-grew:
	case <-t.C:
	}
	t.Stop()
	g.mu.Lock()
}

// commit stores one batch, or each of its elements alone when the batch
// failed, and wakes their submitters.
func (g *groupCommit) commit(batch []*groupItem) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	st := g.p.st
	m := g.p.cfg.Metrics
	m.GroupCommitEvents.Observe(float64(len(batch)))
	start := time.Now()
	defer func() { m.GroupCommitSeconds.Observe(time.Since(start).Seconds()) }()
	ambiguous := false
	if len(batch) > 1 {
		// One order for every batch, the primary key's: two batches that
		// hold the same events (copies in flight in two processes) wait
		// for each other instead of deadlocking.
		slices.SortFunc(batch, func(a, b *groupItem) int {
			x, y := a.params, b.params
			return cmp.Or(strings.Compare(x.CommunityID, y.CommunityID),
				cmp.Compare(x.Event.CreatedAt, y.Event.CreatedAt), strings.Compare(x.Event.ID, y.Event.ID))
		})
		ps := make([]store.EventInsertParams, len(batch))
		for i, it := range batch {
			ps[i] = it.params
		}
		res, err := st.EventInsertBatch(ctx, ps)
		if err == nil {
			for i, it := range batch {
				it.res = res[i]
				close(it.done)
			}
			return
		}
		m.GroupCommitRetries.Inc()
		g.p.log.Debug("group commit failed; retrying its events one by one",
			"events", len(batch), "err", err.Error())
		ambiguous = pg.MayHaveCommitted(err)
	}
	for _, it := range batch {
		it.res, it.err = st.EventInsertCounted(ctx, it.params)
		if ambiguous && it.err == nil && !it.res.Inserted && !it.res.Refused {
			// The failed batch may have committed this event: stored,
			// and not yet fanned out by anyone (ambiguous.go).
			it.res.Inserted = true
			m.AmbiguousCommits.WithLabelValues(outcomeFannedOut).Inc()
		}
		close(it.done)
	}
}
