package app

import (
	"context"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
)

// newAdmission builds the per-user quotas of the configuration, nil when
// every quota is off. The relay's own key and RELAY_OWNER_PUBKEY are
// exempt. An agent is a pubkey whose users row in the community has an
// owner (agent_owner_pubkey, set by a verified owner attestation or by the
// operator), as the original Buzz relay tells them apart.
func newAdmission(a *Relay, observer auth.Observer) (*admission.Limiter, error) {
	q := a.Config.Admission
	cfg := admission.Config{
		Quotas: admission.Quotas{
			HumanMessagesPerMin: q.HumanMessagesPerMin, HumanAPICallsPerMin: q.HumanAPICallsPerMin,
			WSEventsPerSec:      q.HumanWSEventsPerSec,
			AgentMessagesPerMin: q.AgentMessagesPerMin, AgentAPICallsPerMin: q.AgentAPICallsPerMin,
			ChannelCreatesPerHour: q.ChannelCreatesPerHour,
		},
		RedisURL: a.Config.RedisURL, RedisPoolSize: a.Config.RedisPoolSize,
		Exempt: []string{event.PubKey(a.RelayKey), a.Config.RelayOwnerPubkey},
		AgentFunc: func(ctx context.Context, communityID, pubkey string) (bool, error) {
			_, owner, err := a.Store.UserAddPolicy(ctx, communityID, pubkey)
			return owner != "", err
		},
		Metrics: a.Metrics, Logger: a.Log,
	}
	if observer != nil {
		cfg.RateLimitedFunc = observer.RateLimited
	}
	return admission.New(cfg)
}
