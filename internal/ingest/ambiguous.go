package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// Ambiguous commits (docs/ARCHITECTURE.md "Ambiguous commits"). A write
// whose COMMIT reached the server but whose answer did not come back may
// have stored the event: the client was answered error:, and its retry
// will be answered duplicate:, so without more the event would never be
// offered to live subscribers and nobody would know. After such a failure
// the pipeline asks the database, in the background, whether the event is
// stored:
//
//   - stored, by a one-statement change (no relay-signed follow-ups, no
//     access change): the event is fanned out as if the commit had
//     answered;
//   - stored, by any other change: the community's live subscriptions are
//     interrupted (Live.Interrupt), so their clients re-read the history,
//     follow-ups and access included;
//   - not stored: nothing committed; the client's retry stores it;
//   - still unknown after DefaultResolveTimeout (the database unreachable):
//     interrupted as well, since it may be stored.
//
// Inside a group commit, a batch that failed in a way that may have
// committed and whose event its lone retry finds already stored is taken as
// stored by that batch (groupcommit.go): the submitter gets OK true and the
// event is fanned out at once.

// DefaultResolveTimeout bounds how long an ambiguous commit is looked into
// before the community's live subscriptions are interrupted.
const DefaultResolveTimeout = 30 * time.Second

// maxUnresolved bounds the ambiguous commits waiting to be looked into;
// past it a community is interrupted at once.
const maxUnresolved = 1024

// unresolved is one ambiguous commit waiting to be looked into.
type unresolved struct {
	communityID string
	channel     string
	ev          event.Event
	plain       bool
	at          time.Time
}

// resolver looks into ambiguous commits on one goroutine that exists only
// while there is work; Close ends it.
type resolver struct {
	p       *Pipeline
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	queue   []unresolved
	running bool
}

func newResolver(p *Pipeline) *resolver {
	ctx, cancel := context.WithCancel(context.Background())
	return &resolver{p: p, ctx: ctx, cancel: cancel}
}

// add queues an ambiguous commit of req's event.
func (r *resolver) add(req *Request, channel string, plain bool) {
	u := unresolved{communityID: req.Tenant.CommunityID, channel: channel, ev: req.Event, plain: plain, at: r.p.cfg.NowFunc()}
	r.mu.Lock()
	if r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	if len(r.queue) >= maxUnresolved {
		r.mu.Unlock()
		r.p.settle(u, outcomeInterrupted)
		return
	}
	r.queue = append(r.queue, u)
	start := !r.running
	r.running = true
	if start {
		r.wg.Add(1)
	}
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// run looks into the queued commits until none is left.
func (r *resolver) run() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if len(r.queue) == 0 || r.ctx.Err() != nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		u := r.queue[0]
		r.queue = r.queue[1:]
		r.mu.Unlock()
		outcome := r.resolve(u)
		if r.ctx.Err() != nil { // closing: the subscribers go with the process
			continue
		}
		r.p.settle(u, outcome)
	}
}

// Outcomes of an ambiguous commit, the values of
// buzz_ingest_ambiguous_commits_total{outcome}.
const (
	outcomeFannedOut   = "fanned_out"
	outcomeInterrupted = "interrupted"
	outcomeNotStored   = "not_stored"
)

// resolve asks the database whether u's event is stored, retrying with a
// growing pause until the answer comes or the timeout passes.
func (r *resolver) resolve(u unresolved) string {
	timeout := r.p.cfg.ResolveTimeout
	deadline := u.at.Add(timeout)
	pause := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(r.ctx, min(5*time.Second, timeout))
		_, err := r.p.st.EventLookup(ctx, u.communityID, u.ev.ID)
		cancel()
		switch {
		case err == nil && u.plain:
			return outcomeFannedOut
		case err == nil:
			return outcomeInterrupted
		case errors.Is(err, pg.ErrNotFound):
			return outcomeNotStored
		}
		left := time.Until(deadline)
		if left <= 0 || r.ctx.Err() != nil {
			return outcomeInterrupted
		}
		select {
		case <-time.After(min(pause, left)):
		case <-r.ctx.Done():
			return outcomeInterrupted
		}
		pause = min(2*pause, time.Second)
	}
}

// close stops looking and waits for the goroutine. What was not looked
// into is dropped: the process is stopping, and its subscribers with it.
func (r *resolver) close() {
	r.mu.Lock()
	r.cancel()
	r.queue = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// settle applies the outcome of an ambiguous commit.
func (p *Pipeline) settle(u unresolved, outcome string) {
	p.cfg.Metrics.AmbiguousCommits.WithLabelValues(outcome).Inc()
	log := p.log.With(slog.String("event_id", u.ev.ID), slog.Int("kind", u.ev.Kind), slog.String("outcome", outcome))
	switch outcome {
	case outcomeFannedOut:
		p.broadcast(u.communityID, u.channel, &u.ev, "")
		log.Warn("ambiguous commit: event found stored, fanned out")
	case outcomeInterrupted:
		if live := p.cfg.Live; live != nil {
			live.Interrupt(u.communityID)
		}
		log.Warn("ambiguous commit: live subscriptions of the community interrupted")
	default:
		log.Info("ambiguous commit: event not stored")
	}
}

// Close stops the background work of the pipeline (the ambiguous commits
// being looked into) and ends the group commit's own connection once its
// batches on their way have answered. Submit must not be called after it.
// Safe to call twice.
func (p *Pipeline) Close() {
	p.resolve.close()
	if p.group != nil {
		p.group.pipe.Close()
	}
}
