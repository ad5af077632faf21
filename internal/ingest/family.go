package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// A kind family is the write side of a group of kinds that share their rules.
// Each family has the same three steps:
//
//   - authorize (family.route for step 10, family.authorize for the family's
//     share of steps 16–19): reads outside the write transaction; it returns a
//     change that nothing modifies afterwards;
//   - apply (change.apply, step 20): the writes, inside the write transaction
//     (or, for a oneStatement change, as one autocommitted statement). pg.InTx
//     runs it again after a serialization failure or a deadlock, so it reads
//     the change and never writes to it: what it produced comes back in the
//     outcome;
//   - after commit (the outcome): caches to forget, the relay-signed
//     follow-ups to fan out with the event (step 21) and the evictions that
//     run after the answer (step 23, Result.After).
//
// The generic steps (check, steps 1–8; the ephemeral path; steps 9 and 11–15;
// broadcast; answer) are in pipeline.go and authorize.go.
type family interface {
	// route is step 10: the event's channel, and for kinds that take their
	// target's channel, the target it read.
	route(ctx context.Context, p *Pipeline, req *Request) (route, error)
	// authorize runs the family's share of steps 16–19 once steps 11–15
	// passed, and returns the change to write.
	authorize(ctx context.Context, p *Pipeline, req *Request, rt route) (change, error)
}

// registration ties a family to the kinds it handles.
type registration struct {
	// name is the family in the errors of the event failed log line.
	name   string
	kinds  func(kind int) bool
	family family
}

// families is the registration table: the first entry whose kinds match an
// accepted kind handles it, so the catch-all plain family comes last.
var families = []registration{
	{"deletion", isKind(event.KindDeletion), deletionFamily{}},
	{"group", groupKinds.Has, groupFamily{}},
	{"reaction", isKind(event.KindReaction), reactionFamily{}},
	{"thread", event.ThreadKinds.Has, threadFamily{}},
	{"edit", isKind(event.KindMessageEdit), editFamily{}},
	{"vote", isKind(event.KindForumVote), voteFamily{}},
	{"profile", isKind(event.KindProfile, event.KindAgentProfile), profileFamily{}},
	{"read-state", isKind(event.KindAppData), readStateFamily{}},
	{"replaceable", isReplaceable, replaceableFamily{}},
	{"plain", func(int) bool { return true }, plainFamily{}},
}

// familyOf returns the registration that handles kind.
func familyOf(kind int) *registration {
	for i := range families {
		if families[i].kinds(kind) {
			return &families[i]
		}
	}
	panic("ingest: no kind family matches") // unreachable: plain matches every kind
}

func isKind(kinds ...int) func(int) bool {
	return func(k int) bool {
		for _, want := range kinds {
			if k == want {
				return true
			}
		}
		return false
	}
}

// isReplaceable covers NIP-16 replaceable and NIP-33 addressable kinds.
func isReplaceable(k int) bool { return event.IsReplaceable(k) || event.IsAddressable(k) }

// route is the outcome of step 10.
type route struct {
	// channel is the event's channel UUID, or "" for a global event.
	channel string
	// target is the stored event a reaction or deletion points at, when it
	// was looked up and found.
	target *store.EventRef
}

// byTag is the default step 10: global-only kinds and gift wraps have no
// channel (step 11), the other kinds take the first UUID h tag.
type byTag struct{}

func (byTag) route(_ context.Context, _ *Pipeline, req *Request) (route, error) {
	return route{channel: tagChannel(&req.Event)}, nil
}

func tagChannel(ev *event.Event) string {
	if event.GlobalOnly.Has(ev.Kind) || ev.Kind == event.KindGiftWrap { // 11
		return ""
	}
	return channelFromTags(ev.Tags)
}

// change is what a family's authorize decided. It is immutable once built.
type change interface {
	// apply writes the change through w (step 20). It may run more than
	// once; each run starts from the same change.
	apply(ctx context.Context, w writer) (outcome, error)
}

// oneStatement marks a change that is a single statement: commit runs it on
// the pool, without BEGIN and COMMIT (the hot path).
type oneStatement interface {
	change
	oneStatement()
}

// outcome is what one successful apply produced: the after-commit step.
type outcome struct {
	// channel is the event's channel, for fan-out.
	channel string
	// follow are the relay-signed follow-ups stored with the event, fanned
	// out right after it.
	follow []*event.Event
	// forget lists readers whose cached access changed; forgetAll drops
	// the whole community's cached access.
	forget    []string
	forgetAll bool
	// evict says whose live subscriptions on the channel end after the
	// answer (docs/PROTOCOL.md §5.5).
	evict eviction
	// created is the type of the channel the event created, "" for none.
	created string
	// readState marks a conforming read-state event that was stored, and
	// readStateDeleted counts the superseded rows it hard-deleted.
	readState        bool
	readStateDeleted int
}

// eviction selects live subscriptions that lost the channel.
type eviction struct {
	pubkey     string // one holder
	nonMembers bool   // every holder that is not an active member
	all        bool   // every holder
}

func (e eviction) none() bool { return e.pubkey == "" && !e.nonMembers && !e.all }

// writer is what apply writes through: the querier is the write transaction,
// or the pool for a oneStatement change.
type writer struct {
	p   *Pipeline
	req *Request
	q   pg.Querier
	// group, when set, is where a oneStatement change's insert goes: the
	// group commit, instead of its own statement on q.
	group *groupCommit
}

func (w writer) store() *store.Store { return store.New(w.q) }
func (w writer) cid() string         { return w.req.Tenant.CommunityID }
func (w writer) ev() *event.Event    { return &w.req.Event }

// insertEvent writes the event row, its event_mentions, its event_created
// audit intent and, for a mention kind, its operator-listener outbox rows
// in one statement. errDuplicate when the event is already stored.
func (w writer) insertEvent(ctx context.Context, channel string, dTag *string) error {
	ev := w.ev()
	p := store.EventInsertParams{CommunityID: w.cid(), Event: ev, Channel: channel,
		DTag: dTag, Audit: w.p.eventIntent(w.req, ev, channel),
		PosterCheck: channel != "" && w.req.posterCheck == channel}
	if store.IsMentionKind(ev.Kind) { // the kind test first: other kinds pay nothing (docs/PROTOCOL.md §15.4)
		p.ListenerTargets = store.MentionTargets(ev)
	}
	var (
		res store.EventInsertResult
		err error
	)
	if w.group != nil {
		res, err = w.group.insert(p)
	} else {
		res, err = w.store().EventInsertCounted(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("store event: %w", err)
	}
	if res.Refused {
		return errPosterRefused
	}
	w.req.enqueued = int(res.ListenerRows)
	if !res.Inserted {
		return errDuplicate
	}
	return nil
}

// errDuplicate ends a write that stored nothing because the event, or a
// newer version of its key, already is: the answer is duplicate:. In a
// transaction it rolls back what ran before it.
var errDuplicate = errors.New("duplicate")

// errPosterRefused ends a write whose poster check (posters.go) found that
// the author may not post in the channel: nothing was stored, and the
// pipeline reads the channel's state to answer why.
var errPosterRefused = errors.New("poster check refused the write")

// commit is step 20: the change's writes in one write transaction, or as
// one statement for a oneStatement change. Everything that must be
// consistent with the event commits together.
func (p *Pipeline) commit(ctx context.Context, req *Request, reg *registration, c change) (outcome, error) {
	w := writer{p: p, req: req, q: p.cfg.Pool}
	if _, ok := c.(oneStatement); ok {
		// The hot path: the event row, its mentions and its audit intent
		// are one statement, so it commits atomically; the group commit
		// sends it with the other connections' (groupcommit.go).
		w.group = p.group
		out, err := c.apply(ctx, w)
		return out, during("apply", reg.name, err)
	}
	if k, ok := c.(coordinated); ok {
		// One connection per coordinate at a time: the writes behind it
		// wait here, not on its advisory lock holding a connection each.
		unlock, err := p.coords.lock(ctx, k.coordinate())
		if err != nil {
			return outcome{}, fmt.Errorf("commit %s: wait for the coordinate: %w", reg.name, err)
		}
		defer unlock()
	}
	var (
		out      outcome
		applyErr error
	)
	err := pg.InTx(ctx, p.cfg.Pool, func(tx pgx.Tx) error {
		w.q = tx
		var err error
		out, err = c.apply(ctx, w)
		applyErr = during("apply", reg.name, err)
		return applyErr
	})
	if err != nil && !errors.Is(err, applyErr) { // begin or commit failed, not apply
		err = fmt.Errorf("commit %s: %w", reg.name, err)
	}
	return out, err
}

// during names the step and family that failed in err. Refusals and the
// duplicate signal pass through unchanged: they are answers, not failures.
func during(step, family string, err error) error {
	if err == nil || errors.Is(err, errDuplicate) {
		return err
	}
	var r *refusal
	if errors.As(err, &r) {
		return err
	}
	return fmt.Errorf("%s %s: %w", step, family, err)
}
