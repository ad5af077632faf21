package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Limits of the pipeline (docs/PROTOCOL.md §7.11).
const (
	MaxContentBytes = 262144
	MaxDTagBytes    = 1024
	MaxEmojiChars   = 64
	// DefaultMaxPTags is Config.MaxPTags's default (BUZZ_MAX_P_TAGS).
	DefaultMaxPTags = 100
)

// Config configures a Pipeline.
type Config struct {
	// Pool is the writer: every statement of the pipeline runs on it or in
	// a transaction it begins. Required.
	Pool *pgxpool.Pool
	// Live receives every committed and ephemeral event, the access
	// changes and evictions of each commit, and the interruptions of
	// ambiguous commits. Nil: nothing is live (a pipeline used alone).
	Live Live
	// Metrics receives the ingest metrics. Default metrics.Disabled().
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time
	// RelayKey signs the relay's follow-up events (group state, notices).
	RelayKey []byte
	// SignFunc signs the relay's follow-up events; every follow-up goes
	// through it. Default: sign with RelayKey. Tests replace it to make
	// signing fail, which takes the same path.
	SignFunc func(ev *event.Event) error
	// AuditEnabled writes the audit intents of docs/PROTOCOL.md §13.3 in each event's
	// transaction (BUZZ_AUDIT_ENABLED). Default false.
	AuditEnabled bool
	// AuditWakeFunc, when set, is called after each commit that wrote
	// intents: the local chainer's Wake. It must not block.
	AuditWakeFunc func()
	// Admission charges each event to its author's messages quota, and a
	// channel creation to the channel-creation quota (admission.go). Nil
	// admits everything.
	Admission *admission.Limiter
	// MaxPTags is the most p tags an event may carry (BUZZ_MAX_P_TAGS).
	// Default DefaultMaxPTags.
	MaxPTags int
	// MaxEventBytes is the largest event accepted, measured as its
	// serialized JSON with tags (BUZZ_MAX_EVENT_BYTES); it is checked
	// before the id and the signature. 0 means no limit.
	MaxEventBytes int
	// GroupCommitMax is the most one-statement inserts committed together
	// (groupcommit.go). Default DefaultGroupCommitMax; 1 commits each event
	// alone.
	GroupCommitMax int
	// GroupDelay is how long, under load, an event waits for others to
	// share its group commit (groupcommit.go; BUZZ_GROUP_COMMIT_DELAY_MS).
	// Default DefaultGroupDelay.
	GroupDelay time.Duration
	// ResolveTimeout bounds how long an ambiguous commit is looked into
	// before Live.Interrupt is called. Default DefaultResolveTimeout.
	ResolveTimeout time.Duration
}

// Pipeline is the transport-neutral EVENT pipeline. It is safe for concurrent use.
type Pipeline struct {
	cfg     Config
	log     *slog.Logger
	group   *groupCommit // nil when GroupCommitMax is 1
	posters *posterCache
	resolve *resolver
	// st runs the statements outside a transaction, on Config.Pool.
	st *store.Store
	// coords queues this process's writes of one coordinate before they
	// take a connection (coordlock.go).
	coords coordLocks
}

// New returns a Pipeline.
func New(cfg Config) *Pipeline {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	if cfg.SignFunc == nil {
		key := cfg.RelayKey
		cfg.SignFunc = func(ev *event.Event) error { return ev.Sign(key) }
	}
	if cfg.GroupCommitMax == 0 {
		cfg.GroupCommitMax = DefaultGroupCommitMax
	}
	if cfg.GroupDelay <= 0 {
		cfg.GroupDelay = DefaultGroupDelay
	}
	if cfg.ResolveTimeout <= 0 {
		cfg.ResolveTimeout = DefaultResolveTimeout
	}
	if cfg.MaxPTags <= 0 {
		cfg.MaxPTags = DefaultMaxPTags
	}
	p := &Pipeline{cfg: cfg, log: cfg.Logger.With("component", "ingest"), st: store.New(cfg.Pool),
		posters: newPosterCache(cfg.NowFunc)}
	p.resolve = newResolver(p)
	if cfg.GroupCommitMax > 1 {
		p.group = &groupCommit{p: p, max: cfg.GroupCommitMax, delay: cfg.GroupDelay,
			pipe: store.NewBatchPipe(cfg.Pool, groupTimeout)}
	}
	return p
}

// outOfScopeEphemeral are kinds of the ephemeral range that the product
// refuses as unknown instead of fanning them out: the NIP-43 leave request
// (docs/PROTOCOL.md §2.5, §4.1).
var outOfScopeEphemeral = event.KindSet{28936: {}}

// refusal is a pipeline answer other than success, carried as an error
// through the steps.
type refusal struct{ res Result }

func (r *refusal) Error() string { return r.res.Message }

func reject(prefix, format string, args ...any) error {
	return &refusal{Result{Code: Rejected, Message: wire.Reason(prefix, fmt.Sprintf(format, args...))}}
}

// clockDrift answers an event outside the ±900 s drift (step 6) and one
// whose commit the created_at floor refused.
func clockDrift() error { return &refusal{Result{Code: Rejected, Message: wire.MsgClockDrift}} }

func invalid(format string, args ...any) error { return reject(wire.Invalid, format, args...) }

func conflict(msg string) error { return &refusal{Result{Code: Conflict, Message: msg}} }

// Submit runs one event through the pipeline (docs/PROTOCOL.md §1.2, steps 1–23) and
// returns the answer. OK true is returned only after the write transaction
// committed; dispatch to live subscribers happens before Submit returns.
func (p *Pipeline) Submit(ctx context.Context, req Request) Result {
	start := p.cfg.NowFunc()
	ev := &req.Event
	m := p.cfg.Metrics
	m.EventsReceived.WithLabelValues(metrics.KindLabel(ev.Kind)).Inc()
	res := p.submit(ctx, &req)
	m.EventProcessingSeconds.Observe(p.cfg.NowFunc().Sub(start).Seconds())
	if res.Code != Accepted {
		m.EventsRejected.WithLabelValues(rejectReason(res), req.Source.String()).Inc()
	}
	return res
}

func (p *Pipeline) submit(ctx context.Context, req *Request) Result {
	ev := &req.Event
	if err := p.check(req); err != nil { // steps 1–8
		return p.answer(ctx, req, err)
	}
	if err := p.admit(ctx, req, admission.Messages); err != nil { // the author is verified: charge it
		return p.answer(ctx, req, err)
	}
	if event.IsEphemeral(ev.Kind) {
		if outOfScopeEphemeral.Has(ev.Kind) { // 9
			return p.answer(ctx, req, reject(wire.Restricted, "unknown event kind"))
		}
		return p.answer(ctx, req, p.ephemeral(ctx, req))
	}
	reg, c, err := p.authorize(ctx, req) // steps 9–19
	if err == nil {
		err = p.settlePoster(ctx, req, c)
	}
	if err != nil {
		return p.answer(ctx, req, err)
	}
	if req.posterCheck != "" {
		p.cfg.Metrics.PosterChecks.WithLabelValues("write").Inc()
	}
	out, err := p.commitPosted(ctx, req, reg, c) // step 20
	if _, rs := c.(readStateChange); rs {
		p.countReadState(req, out, err)
	}
	if errors.Is(err, errDuplicate) {
		return Result{Code: Duplicate, Message: wire.MsgDuplicate}
	}
	if pg.IsCreatedAtFloor(err) { // committed too long after created_at: the replica proof's floor (docs/PROTOCOL.md §16.6)
		return p.answer(ctx, req, clockDrift())
	}
	if err != nil {
		p.countIntentError(err)
		if pg.MayHaveCommitted(err) {
			_, plain := c.(oneStatement)
			if live := p.cfg.Live; live != nil {
				live.Unsettled(req.Tenant.CommunityID)
			}
			p.resolve.add(req, changeChannel(c, out), plain)
		}
		return p.answer(ctx, req, err)
	}
	if p.cfg.AuditWakeFunc != nil && p.auditOn() {
		p.cfg.AuditWakeFunc()
	}
	m := p.cfg.Metrics
	m.EventsStored.WithLabelValues(metrics.KindLabel(ev.Kind)).Inc()
	if req.enqueued > 0 {
		m.Listener.Enqueued.Add(float64(req.enqueued))
	}
	if out.created != "" {
		m.ChannelsCreated.WithLabelValues(req.Tenant.Host, out.created).Inc()
	}
	p.log.Debug("event stored", slog.String("community", req.Tenant.Host), slog.String("event_id", ev.ID), slog.Int("kind", ev.Kind))
	return Result{Code: Accepted, After: p.afterCommit(req, &out)} // step 22 (21 and 23 in afterCommit)
}

// afterCommit is the after-commit step of the event's family, read from its
// outcome: stale cached access is forgotten, the event and its relay-signed
// follow-ups are fanned out (step 21), and the evictions are returned to run
// after the answer (step 23).
func (p *Pipeline) afterCommit(req *Request, out *outcome) func() {
	cid := req.Tenant.CommunityID
	if out.channel != "" {
		if out.forgetAll {
			p.posters.dropChannel(cid, out.channel, "")
		}
		for _, who := range out.forget {
			p.posters.dropChannel(cid, out.channel, who)
		}
	}
	if live := p.cfg.Live; live != nil {
		if out.forgetAll {
			live.Forget(cid, out.channel, "")
		} else {
			for _, who := range out.forget {
				live.Forget(cid, out.channel, who)
			}
		}
	}
	p.broadcast(cid, out.channel, &req.Event, req.Origin) // 21
	for _, fe := range out.follow {
		channel := out.channel
		if isNotice(fe.Kind) {
			channel = ""
		}
		p.broadcast(cid, channel, fe, req.Origin)
	}
	return p.evictions(cid, out.channel, out.evict)
}

// changeChannel is the channel of the event c writes, for a write that
// failed before its outcome was known.
func changeChannel(c change, out outcome) string {
	if pc, ok := c.(plainChange); ok {
		return pc.channel
	}
	return out.channel
}

// answer turns a step's error into a Result; anything that is not a refusal
// is an internal failure, logged here with the step that failed and
// answered without details.
func (p *Pipeline) answer(ctx context.Context, req *Request, err error) Result {
	if err == nil {
		return Result{Code: Accepted}
	}
	var r *refusal
	if errors.As(err, &r) {
		return r.res
	}
	p.log.ErrorContext(ctx, "event failed", slog.String("community", req.Tenant.Host),
		slog.String("event_id", req.Event.ID), slog.Int("kind", req.Event.Kind), slog.String("err", err.Error()))
	return Result{Code: Internal, Message: wire.MsgInternal}
}

// check runs steps 1–8: kind refusals, id and signature, clock, size, author.
// The whole event's size comes first, before any work that grows with it.
func (p *Pipeline) check(req *Request) error {
	ev := &req.Event
	if limit := p.cfg.MaxEventBytes; limit > 0 {
		if n := ev.JSONSize(); n > limit {
			return &refusal{Result{Code: Rejected, Message: wire.EventTooLarge(n, limit)}}
		}
	}
	switch {
	case ev.Kind == event.KindAuth: // 1
		return invalid("AUTH events cannot be submitted")
	case event.RelaySignedNotice.Has(ev.Kind): // 2
		return invalid("membership notifications are relay-signed only")
	case req.Source == SourceHTTP && event.IsWSOnly(ev.Kind): // 3
		return invalid("kind %d is only accepted via WebSocket", ev.Kind)
	case event.RelayOnly.Has(ev.Kind): // 4
		return reject(wire.Restricted, "relay-only kind")
	}
	if n := countPTags(ev); n > p.cfg.MaxPTags { // before the id is hashed: nothing grows with them
		return &refusal{Result{Code: Rejected, Message: wire.TooManyPTags(n, p.cfg.MaxPTags)}}
	}
	if computed, ok := ev.CheckID(); !ok { // 5
		return invalid("invalid event id: computed %s, got %s", computed, ev.ID)
	}
	if !ev.VerifySignature() {
		return invalid("invalid schnorr signature")
	}
	now := p.cfg.NowFunc().Unix()
	if d := ev.CreatedAt - now; d > int64(event.MaxClockDrift/time.Second) || d < -int64(event.MaxClockDrift/time.Second) { // 6
		return clockDrift()
	}
	if n := len(ev.Content); n > MaxContentBytes { // 7
		return invalid("content exceeds maximum size of %d bytes (got %d)", MaxContentBytes, n)
	}
	if hasNUL(ev) {
		return invalid("event contains a NUL character")
	}
	if at, present, ok := ev.Expiration(); !ok { // NIP-40, docs/PROTOCOL.md §6.6
		return &refusal{Result{Code: Rejected, Message: wire.MsgBadExpiration}}
	} else if present && at <= now {
		return &refusal{Result{Code: Rejected, Message: wire.MsgExpired}}
	}
	if ev.PubKey != req.Author && ev.Kind != event.KindGiftWrap { // 8
		return &refusal{Result{Code: Forbidden, Message: wire.Reason(wire.Invalid, "event pubkey does not match authenticated identity")}}
	}
	return nil
}

func hasNUL(ev *event.Event) bool {
	if strings.IndexByte(ev.Content, 0) >= 0 {
		return true
	}
	for _, t := range ev.Tags {
		for _, v := range t {
			if strings.IndexByte(v, 0) >= 0 {
				return true
			}
		}
	}
	return false
}

// ephemeral is the short path of docs/PROTOCOL.md §7.4 for kinds 20000–29999: never
// stored, routed by an optional h tag.
func (p *Pipeline) ephemeral(ctx context.Context, req *Request) error {
	ev := &req.Event
	channel := channelFromTags(ev.Tags)
	if channel != "" {
		st, err := p.st.ChannelStateGet(ctx, req.Tenant.CommunityID, channel, ev.PubKey)
		if err != nil {
			return fmt.Errorf("ephemeral: channel access %s: %w", channel, err)
		}
		if !st.CanPost() {
			return reject(wire.Restricted, "not a channel member")
		}
	}
	p.broadcast(req.Tenant.CommunityID, channel, ev, req.Origin)
	return nil
}

// broadcast hands a committed (or ephemeral) event to local fan-out, the
// connection it came through (origin, or "") first. It never fails the
// request.
func (p *Pipeline) broadcast(communityID, channel string, ev *event.Event, origin string) {
	if p.cfg.Live == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("dispatch failed", slog.String("event_id", ev.ID), slog.Any("panic", r))
			p.cfg.Metrics.PostCommitDispatchErrors.Inc()
		}
	}()
	// Not encoded here: the live side encodes it once, and only when a
	// subscriber or another process takes it (Delivery.JSON).
	p.cfg.Live.Broadcast(Delivery{CommunityID: communityID, Channel: channel, Event: ev, Origin: origin})
}

// evictions returns the dispatch that runs after the answer (step 23):
// live subscriptions that lost access to the channel stop at once.
func (p *Pipeline) evictions(cid, ch string, e eviction) func() {
	live := p.cfg.Live
	if live == nil || e.none() {
		return nil
	}
	return func() {
		switch {
		case e.all:
			live.Evict(cid, ch, "", nil)
		case e.nonMembers:
			live.Evict(cid, ch, "", func(pubkey string) bool {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				st, err := p.st.ChannelStateGet(ctx, cid, ch, pubkey)
				return err != nil || !st.ActiveMember()
			})
		default:
			live.Evict(cid, ch, e.pubkey, nil)
		}
	}
}

func rejectReason(r Result) string {
	if r.Code == Duplicate || r.Code == Conflict {
		return "duplicate"
	}
	prefix, _, _ := strings.Cut(r.Message, ":")
	switch prefix {
	case wire.AuthRequired:
		return "auth"
	case wire.Invalid, wire.Restricted, wire.Duplicate, wire.RateLimited:
		return prefix
	}
	if strings.HasPrefix(r.Message, "invalid") { // "invalid visibility: …" has no colon after invalid
		return wire.Invalid
	}
	return "error"
}
