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
// up to DefaultGroupCommitMax events, and stores it with the statement of
// store.EventInsertBatch, one round trip and one commit for all of them.
// Each event keeps its own outcome (inserted or duplicate: from ON CONFLICT,
// its own listener rows) and its own answer, given only after the commit.
//
// A batch is whatever queued while the previous batch was on its way, so
// an idle relay commits a lone event at once (no flusher busy: one starts)
// and a busy one commits in groups as large as its load. The flusher is a
// goroutine that exists only while the queue is not empty or a batch is on
// its way. It sends batches of several events through one connection of
// its own (store.BatchPipe), and while one is on its way it sends a second
// once as many events are queued as that one holds, and at least
// secondBatchMin: the server finds the second in its socket when it has
// committed the first and starts it at once, instead of waiting for the
// relay to read the answer and send the next (docs/PERFORMANCE.md "Group
// commit: a second batch on its way"), and the second batch is no smaller
// than the first, so more events in flight make larger batches, not more
// of them (docs/PERFORMANCE.md "Group commit: a second batch as large as
// the first"). Never more than two: a second batch on another connection,
// or a third, takes only the events queued meanwhile, smaller batches for
// the same events, and the two backends compete for the same processors
// (docs/PERFORMANCE.md "Group commit: one batch in flight"). A lone event
// goes on a pooled connection, as when it was not grouped.
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

// secondBatchMin is the fewest events queued for which a flusher sends a
// second batch while one is on its way (docs/PERFORMANCE.md "Group commit:
// a second batch on its way"); a batch on its way that holds more raises
// it to its own size (secondBatchAt).
const secondBatchMin = 4

// secondBatchAt is how many events must be queued for a second batch to go
// behind onWay, the batch on its way.
func secondBatchAt(onWay *sentBatch) int {
	return max(secondBatchMin, len(onWay.items))
}

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
	// pipe carries the batches of several events, up to two at a time.
	pipe *store.BatchPipe
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

// flush commits batches until the queue is empty and nothing is on its
// way.
func (g *groupCommit) flush() {
	var onWay []*sentBatch // oldest first, at most two
	var lastDone time.Time
	several := false
	for {
		g.mu.Lock()
		if several {
			g.severalAt = time.Now()
			several = false
		}
		if len(onWay) == 0 {
			if len(g.queue) == 1 && time.Since(g.severalAt) < 2*g.delay {
				g.awaitSecond()
			}
			n := min(len(g.queue), g.max)
			if n == 0 {
				g.flushing = false
				g.mu.Unlock()
				return
			}
			batch := g.take(n)
			g.mu.Unlock()
			if n == 1 {
				g.commitAlone(batch)
				lastDone = time.Now()
				continue
			}
			onWay = append(onWay, g.send(batch, false))
			continue
		}
		if len(onWay) == 1 && len(g.queue) >= secondBatchAt(onWay[0]) {
			batch := g.take(min(len(g.queue), g.max))
			g.mu.Unlock()
			onWay = append(onWay, g.send(batch, true))
			continue
		}
		var grew chan struct{} // nil: no second batch to wait for
		if len(onWay) == 1 {
			grew = g.growth()
		}
		g.mu.Unlock()
		select {
		case <-onWay[0].pb.Done():
			sb := onWay[0]
			onWay = onWay[1:]
			res, err := sb.pb.Result()
			// The batch held the writer from its sending, or from the
			// answer of the batch before it, which it waited behind.
			from := sb.sent
			if lastDone.After(from) {
				from = lastDone
			}
			g.answer(sb.items, res, err)
			lastDone = time.Now()
			g.p.cfg.Metrics.GroupCommitSeconds.Observe(lastDone.Sub(from).Seconds())
			several = true
		case <-grew:
		}
	}
}

// take removes the first n events of the queue; g.mu is held.
func (g *groupCommit) take(n int) []*groupItem {
	batch := make([]*groupItem, n)
	copy(batch, g.queue)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	return batch
}

// growth is a channel the next insert closes; g.mu is held.
func (g *groupCommit) growth() chan struct{} {
	if g.grew == nil {
		g.grew = make(chan struct{})
	}
	return g.grew
}

// awaitSecond waits, with g.mu held and released meanwhile, until another
// event is queued or the group delay has passed.
func (g *groupCommit) awaitSecond() {
	grew := g.growth()
	g.mu.Unlock()
	t := time.NewTimer(g.delay)
	select {
	case <-grew:
	case <-t.C:
	}
	t.Stop()
	g.mu.Lock()
}

// sentBatch is a batch on its way through the pipe.
type sentBatch struct {
	items []*groupItem
	pb    *store.PendingBatch
	sent  time.Time
}

// send sends a batch of several events through the pipe; second is set
// when another batch is already on its way.
func (g *groupCommit) send(batch []*groupItem, second bool) *sentBatch {
	m := g.p.cfg.Metrics
	m.GroupCommitEvents.Observe(float64(len(batch)))
	if second {
		m.GroupCommitSecondBatches.Inc()
	}
	sortBatch(batch)
	return &sentBatch{items: batch, pb: g.pipe.Send(batchParams(batch)), sent: time.Now()}
}

// sortBatch puts a batch in one order for every batch, the primary key's:
// two batches that hold the same events (copies in flight in two
// processes) wait for each other instead of deadlocking.
func sortBatch(batch []*groupItem) {
	slices.SortFunc(batch, func(a, b *groupItem) int {
		x, y := a.params, b.params
		return cmp.Or(strings.Compare(x.CommunityID, y.CommunityID),
			cmp.Compare(x.Event.CreatedAt, y.Event.CreatedAt), strings.Compare(x.Event.ID, y.Event.ID))
	})
}

func batchParams(batch []*groupItem) []store.EventInsertParams {
	ps := make([]store.EventInsertParams, len(batch))
	for i, it := range batch {
		ps[i] = it.params
	}
	return ps
}

// commitAlone stores a batch of one event with the single-event statement
// on a pooled connection and wakes its submitter.
func (g *groupCommit) commitAlone(batch []*groupItem) {
	m := g.p.cfg.Metrics
	m.GroupCommitEvents.Observe(1)
	start := time.Now()
	g.alone(batch, false)
	m.GroupCommitSeconds.Observe(time.Since(start).Seconds())
}

// answer wakes a batch's submitters with their results, or, when the
// batch failed, stores each of its events alone first.
func (g *groupCommit) answer(batch []*groupItem, res []store.EventInsertResult, err error) {
	if err == nil {
		for i, it := range batch {
			it.res = res[i]
			close(it.done)
		}
		return
	}
	g.p.cfg.Metrics.GroupCommitRetries.Inc()
	g.p.log.Debug("group commit failed; retrying its events one by one",
		"events", len(batch), "err", err.Error())
	g.alone(batch, pg.MayHaveCommitted(err))
}

// alone stores each event of batch with its own statement and wakes its
// submitter; ambiguous is set when a failed batch may have committed them.
func (g *groupCommit) alone(batch []*groupItem, ambiguous bool) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	m := g.p.cfg.Metrics
	for _, it := range batch {
		it.res, it.err = g.p.st.EventInsertCounted(ctx, it.params)
		if ambiguous && it.err == nil && !it.res.Inserted && !it.res.Refused {
			// The failed batch may have committed this event: stored,
			// and not yet fanned out by anyone (ambiguous.go).
			it.res.Inserted = true
			m.AmbiguousCommits.WithLabelValues(outcomeFannedOut).Inc()
		}
		close(it.done)
	}
}
