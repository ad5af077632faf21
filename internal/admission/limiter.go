package admission

import (
	"context"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/metrics"
)

// Limit names one quota.
type Limit int

const (
	// Messages is the EVENTs a pubkey submits, through either door: 60 s
	// windows, the agent quota for an agent.
	Messages Limit = iota
	// APICalls is the HTTP bridge requests (POST /events, /query, /count):
	// 60 s windows, the agent quota for an agent.
	APICalls
	// WSEvents is the EVENT, REQ and COUNT frames of authenticated
	// WebSocket connections: 5 s windows of 5 × the per-second quota.
	WSEvents
	// ChannelCreates is the channels (kind 9007) a pubkey creates: 1 h
	// windows.
	ChannelCreates
	numLimits
)

// String is the limit's name in metrics and audit entries.
func (l Limit) String() string {
	switch l {
	case Messages:
		return "messages"
	case APICalls:
		return "api_calls"
	case WSEvents:
		return "ws_events"
	case ChannelCreates:
		return "channel_creates"
	}
	return "unknown"
}

// Windows of the quotas.
const (
	MessagesWindow       = 60 * time.Second
	APICallsWindow       = 60 * time.Second
	WSEventsWindow       = 5 * time.Second
	ChannelCreatesWindow = time.Hour
)

// Quotas are the budgets; 0 turns one off.
type Quotas struct {
	// HumanMessagesPerMin (BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN).
	HumanMessagesPerMin int
	// HumanAPICallsPerMin (BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN).
	HumanAPICallsPerMin int
	// WSEventsPerSec (BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC) applies to
	// humans and agents alike, as in the original relay.
	WSEventsPerSec int
	// AgentMessagesPerMin (BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN).
	AgentMessagesPerMin int
	// AgentAPICallsPerMin (BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN).
	AgentAPICallsPerMin int
	// ChannelCreatesPerHour (BUZZ_CHANNEL_CREATES_PER_HOUR).
	ChannelCreatesPerHour int
}

// Config configures a Limiter.
type Config struct {
	// Quotas are the budgets. All zero: New returns nil.
	Quotas Quotas
	// RedisURL shares the counters between processes (REDIS_URL); "" counts
	// in this process only.
	RedisURL string
	// RedisPoolSize bounds the Limiter's own Redis connections
	// (BUZZ_REDIS_POOL_SIZE). Default 16.
	RedisPoolSize int
	// Exempt are pubkeys no quota applies to, lowercase hex: the relay's
	// own key and RELAY_OWNER_PUBKEY.
	Exempt []string
	// AgentFunc reports whether pubkey is an agent in the community: its
	// users row there has an owner (agent_owner_pubkey NOT NULL). Answers
	// are cached for AgentCacheTTL. Nil: everyone is human.
	AgentFunc func(ctx context.Context, communityID, pubkey string) (bool, error)
	// RateLimitedFunc, when set, is told of each refusal for the audit log
	// (auth.Observer's RateLimited). It must not block.
	RateLimitedFunc func(communityID, pubkey, limit, transport string)
	// Metrics receives Metrics.Admission. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// Logger is the parent logger; nil discards.
	Logger *slog.Logger
	// NowFunc is the clock of the per-process windows. Default time.Now.
	NowFunc func() time.Time
}

// Limiter charges requests to quotas. It is safe for concurrent use; a nil
// *Limiter admits everything.
type Limiter struct {
	cfg    Config
	log    *slog.Logger
	m      metrics.Admission
	now    func() time.Time
	exempt map[string]bool
	// budget[l] is the human budget per window and agent[l] the agent one;
	// 0 is off.
	budget, agent [numLimits]int
	window        [numLimits]time.Duration
	local         *localCounter
	shared        *sharedCounter // nil without Redis
	agents        *agentCache
	// refused remembers keys past a quota until their window ends: local
	// for windows counted here (on now), shared for Redis's (on the wall
	// clock).
	refused struct{ local, shared *refusedMemo }
}

// New returns a Limiter, or nil when every quota is off. It dials nothing:
// the Redis connection is made at the first charge. Close releases it.
func New(cfg Config) (*Limiter, error) {
	q := cfg.Quotas
	if q == (Quotas{}) {
		return nil, nil
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{
		cfg:    cfg,
		log:    log.With("component", "admission"),
		m:      cfg.Metrics.Admission,
		now:    cfg.NowFunc,
		exempt: make(map[string]bool, len(cfg.Exempt)),
		local:  newLocalCounter(),
		agents: newAgentCache(cfg.AgentFunc),
	}
	l.refused.local, l.refused.shared = newRefusedMemo(), newRefusedMemo()
	for _, pk := range cfg.Exempt {
		if pk != "" {
			l.exempt[pk] = true
		}
	}
	l.budget = [numLimits]int{Messages: q.HumanMessagesPerMin, APICalls: q.HumanAPICallsPerMin,
		WSEvents: q.WSEventsPerSec * int(WSEventsWindow/time.Second), ChannelCreates: q.ChannelCreatesPerHour}
	l.agent = l.budget
	l.agent[Messages], l.agent[APICalls] = q.AgentMessagesPerMin, q.AgentAPICallsPerMin
	l.window = [numLimits]time.Duration{Messages: MessagesWindow, APICalls: APICallsWindow,
		WSEvents: WSEventsWindow, ChannelCreates: ChannelCreatesWindow}
	if cfg.RedisURL != "" {
		s, err := newSharedCounter(cfg.RedisURL, cfg.RedisPoolSize)
		if err != nil {
			return nil, err
		}
		l.shared = s
	}
	return l, nil
}

// Close releases the Redis connections. Safe on nil and twice.
func (l *Limiter) Close() {
	if l != nil && l.shared != nil {
		l.shared.close()
	}
}

// Charge is one request charged to one quota.
type Charge struct {
	Limit Limit
	// CommunityID and Pubkey are whose budget pays: the authenticated
	// principal, never an event's claimed author.
	CommunityID, Pubkey string
	// Transport is "ws" or "http", for the metric and the audit entry.
	Transport string
}

// Decision is the answer to a Charge.
type Decision struct {
	// Allowed is false past the quota.
	Allowed bool
	// RetryAfter is, for a refusal, the whole seconds until the window
	// ends, at least 1.
	RetryAfter int
}

// Charge takes one unit of c.Limit from c.Pubkey's budget in
// c.CommunityID and reports whether the request may go on. Exempt pubkeys
// and quotas that are off are never counted. A refusal is counted in
// buzz_admission_rejections_total and reported to RateLimitedFunc. It may
// wait on Redis (bounded by a short timeout, after which it counts in this
// process) and, for Messages and APICalls, on AgentFunc once a minute per
// pubkey; a key already refused in its current window is refused again
// from this process's memory, without either.
func (l *Limiter) Charge(ctx context.Context, c Charge) Decision {
	if l.off(c) {
		return Decision{Allowed: true}
	}
	if d, refused := l.remembered(c); refused {
		return d
	}
	budget := l.budgetOf(ctx, c)
	if budget == 0 {
		return Decision{Allowed: true}
	}
	n, ttl, shared := l.count(ctx, c, l.window[c.Limit])
	if n <= budget {
		return Decision{Allowed: true}
	}
	// A window counted here while Redis is down is not remembered: once
	// Redis answers again, its count decides.
	switch {
	case shared:
		now := time.Now()
		l.refused.shared.remember(memoKey(c), now.Add(ttl), now)
	case l.shared == nil:
		now := l.now()
		l.refused.local.remember(memoKey(c), now.Add(ttl), now)
	}
	return l.refuse(c, ttl)
}

// Refused answers, without charging anything, whether c would be refused
// because its key is already past its quota in the current window, as far
// as this process has seen (a key refused by another process is known here
// at its next charge). A door calls it before work that costs more than a
// refusal; a request it lets through still pays with Charge. A refusal is
// counted and reported as Charge's are.
func (l *Limiter) Refused(c Charge) Decision {
	if l.off(c) {
		return Decision{Allowed: true}
	}
	d, _ := l.remembered(c)
	return d
}

func (l *Limiter) off(c Charge) bool {
	return l == nil || l.exempt[c.Pubkey] || c.Limit < 0 || c.Limit >= numLimits ||
		(l.budget[c.Limit] == 0 && l.agent[c.Limit] == 0)
}

// remembered is the refusal of a key the memo holds, or Allowed.
func (l *Limiter) remembered(c Charge) (Decision, bool) {
	k := memoKey(c)
	left := max(l.refused.local.left(k, l.now()), l.refused.shared.left(k, time.Now()))
	if left <= 0 {
		return Decision{Allowed: true}, false
	}
	return l.refuse(c, left), true
}

// refuse counts and reports a refusal whose window ends in ttl.
func (l *Limiter) refuse(c Charge, ttl time.Duration) Decision {
	retry := int((ttl + time.Second - 1) / time.Second)
	d := Decision{RetryAfter: max(retry, 1)}
	l.m.Rejections.WithLabelValues(c.Limit.String(), c.Transport).Inc()
	if f := l.cfg.RateLimitedFunc; f != nil {
		f(c.CommunityID, c.Pubkey, c.Limit.String(), c.Transport)
	}
	return d
}

func memoKey(c Charge) localKey {
	return localKey{limit: c.Limit, community: c.CommunityID, pubkey: c.Pubkey}
}

// budgetOf is the budget per window that applies to c, 0 when off.
func (l *Limiter) budgetOf(ctx context.Context, c Charge) int {
	human, agent := l.budget[c.Limit], l.agent[c.Limit]
	if human == agent {
		return human
	}
	if l.agents.isAgent(ctx, l.log, c.CommunityID, c.Pubkey, l.now()) {
		return agent
	}
	return human
}

// count adds one to c's window and returns the count and the time left in
// the window: in Redis when it answers (shared), in this process otherwise.
func (l *Limiter) count(ctx context.Context, c Charge, window time.Duration) (n int, ttl time.Duration, shared bool) {
	if s := l.shared; s != nil {
		if n, ttl, ok := s.incr(ctx, l, sharedKey(c), window); ok {
			return n, ttl, true
		}
		l.m.Fallback.Inc()
	}
	n, ttl = l.local.incr(memoKey(c), window, l.now())
	return n, ttl, false
}

// sharedKey is the Redis key of c's window.
func sharedKey(c Charge) string {
	return "buzz:admission:" + c.Limit.String() + ":" + c.CommunityID + ":" + c.Pubkey
}
