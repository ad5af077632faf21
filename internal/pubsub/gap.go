package pubsub

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A failed or skipped PUBLISH of an event is a gap for every other
// process: their links may be up, so nothing tells their subscribers that
// an event went by. docs/PROTOCOL.md §16.3 promises that an open subscription never
// silently misses an event, so the sender owes them a word. The Bus keeps,
// per community, the wall-clock time of its newest failed event publish
// and, once Redis takes publishes again, announces it on buzz:control as
// {"op":"gap","community":C,"until_ms":T}. A receiver closes every live
// subscription of C registered up to T (plus GapClockMargin) with
// "error: live delivery interrupted; resubscribe"; a subscription
// registered later read its history after the missed commit, so it holds
// the event already. An announcement that fails stays owed and is retried
// every GapRetry; one that may have been sent twice closes nothing twice.
// It is the gap op of docs/PROTOCOL.md §16.4, which older processes ignore.

// GapRetry is how often owed gap announcements are retried.
const GapRetry = time.Second

// GapClockMargin widens a receiver's cut-off for clock skew between hosts.
const GapClockMargin = 250 * time.Millisecond

// missed is the owed announcements: community → newest failure, Unix ms.
type missed struct {
	mu sync.Mutex
	by map[string]int64
}

// note records a failed event publish for community at now.
func (m *missed) note(community string, now time.Time) {
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string]int64{}
	}
	m.by[community] = max(m.by[community], ms)
}

// owed returns a copy of the owed announcements.
func (m *missed) owed() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.by))
	for c, ms := range m.by {
		out[c] = ms
	}
	return out
}

// paid forgets community's announcement, unless a newer failure came since.
func (m *missed) paid(community string, ms int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by[community] == ms {
		delete(m.by, community)
	}
}

// announceGaps sends the owed gap announcements every GapRetry until ctx
// ends.
func (b *Bus) announceGaps(ctx context.Context) {
	t := time.NewTicker(GapRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for community, ms := range b.missed.owed() {
			if b.pool() == nil {
				break // still down; the next tick tries again
			}
			if err := b.PublishControl(ctx, Control{Community: community, Op: OpGap, UntilMS: ms}); err != nil {
				continue // counted and logged by PublishControl
			}
			b.missed.paid(community, ms)
			b.log.Info("announced a live delivery gap", slog.String("community", community), slog.Int64("until_ms", ms))
		}
	}
}
