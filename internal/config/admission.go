package config

import "log/slog"

// Defaults of per-user admission (docs/OPERATIONS.md "Per-user quotas"):
// the quotas and variable names of the original Buzz relay, and the two
// caps of this relay.
const (
	DefaultHumanMessagesPerMin         = 60
	DefaultHumanAPICallsPerMin         = 300
	DefaultHumanWSEventsPerSec         = 10
	DefaultAgentStandardMessagesPerMin = 120
	DefaultAgentStandardAPICallsPerMin = 600
	DefaultChannelCreatesPerHour       = 20
	DefaultMaxPTags                    = 100

	maxQuota = 1000000
	maxPTags = 100000
)

// Admission holds the per-user quotas, counted per authenticated pubkey per
// community, and the p-tag cap. A quota of 0 is off.
type Admission struct {
	// HumanMessagesPerMin is the EVENTs a human may submit a minute, over
	// both doors (BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN), 0–1000000.
	// Default 60.
	HumanMessagesPerMin int
	// HumanAPICallsPerMin is the HTTP bridge calls (POST /events, /query,
	// /count) a human may make a minute
	// (BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN), 0–1000000. Default 300.
	HumanAPICallsPerMin int
	// HumanWSEventsPerSec is the EVENT, REQ and COUNT frames any
	// authenticated connection's pubkey may send a second, counted over 5 s
	// windows of 5 × this (BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC),
	// 0–1000000. Default 10.
	HumanWSEventsPerSec int
	// AgentMessagesPerMin is HumanMessagesPerMin for an agent, a pubkey
	// with an owner (BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN),
	// 0–1000000. Default 120.
	AgentMessagesPerMin int
	// AgentAPICallsPerMin is HumanAPICallsPerMin for an agent
	// (BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN), 0–1000000.
	// Default 600.
	AgentAPICallsPerMin int
	// ChannelCreatesPerHour is the channels (kind 9007) a pubkey may create
	// in a community an hour (BUZZ_CHANNEL_CREATES_PER_HOUR), 0–1000000.
	// Default 20.
	ChannelCreatesPerHour int
	// MaxPTags is the most p tags an event may carry (BUZZ_MAX_P_TAGS),
	// 1–100000. Default 100. It is a cap, not a quota: it cannot be off.
	MaxPTags int
}

// admission reads the per-user admission variables.
func (l *loader) admission() Admission {
	return Admission{
		HumanMessagesPerMin:   l.integer("BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN", DefaultHumanMessagesPerMin, 0, maxQuota),
		HumanAPICallsPerMin:   l.integer("BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN", DefaultHumanAPICallsPerMin, 0, maxQuota),
		HumanWSEventsPerSec:   l.integer("BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC", DefaultHumanWSEventsPerSec, 0, maxQuota),
		AgentMessagesPerMin:   l.integer("BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN", DefaultAgentStandardMessagesPerMin, 0, maxQuota),
		AgentAPICallsPerMin:   l.integer("BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN", DefaultAgentStandardAPICallsPerMin, 0, maxQuota),
		ChannelCreatesPerHour: l.integer("BUZZ_CHANNEL_CREATES_PER_HOUR", DefaultChannelCreatesPerHour, 0, maxQuota),
		MaxPTags:              l.integer("BUZZ_MAX_P_TAGS", DefaultMaxPTags, 1, maxPTags),
	}
}

// LogValue is the admission settings as logged at start.
func (a Admission) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("human_messages_per_min", a.HumanMessagesPerMin),
		slog.Int("human_api_calls_per_min", a.HumanAPICallsPerMin),
		slog.Int("human_ws_events_per_sec", a.HumanWSEventsPerSec),
		slog.Int("agent_messages_per_min", a.AgentMessagesPerMin),
		slog.Int("agent_api_calls_per_min", a.AgentAPICallsPerMin),
		slog.Int("channel_creates_per_hour", a.ChannelCreatesPerHour),
		slog.Int("max_p_tags", a.MaxPTags),
	)
}
