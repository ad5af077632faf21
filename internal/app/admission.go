package app

import (
	"context"
	"log/slog"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/store"
)

// newAdmission builds the per-user quotas of the configuration, nil when
// every quota is off. The relay's own key and RELAY_OWNER_PUBKEY are
// exempt. An agent is a pubkey whose users row in the community has an
// owner (agent_owner_pubkey, set by a verified owner attestation or by the
// operator), as the original Buzz relay tells them apart.
func newAdmission(c config.Config, relayKey []byte, st *store.Store, db *Database, m *metrics.Metrics, log *slog.Logger,
	observer auth.Observer) (*admission.Limiter, error) {
	q := c.Admission
	cfg := admission.Config{
		Quotas: admission.Quotas{
			HumanMessagesPerMin: q.HumanMessagesPerMin, HumanAPICallsPerMin: q.HumanAPICallsPerMin,
			WSEventsPerSec:      q.HumanWSEventsPerSec,
			AgentMessagesPerMin: q.AgentMessagesPerMin, AgentAPICallsPerMin: q.AgentAPICallsPerMin,
			ChannelCreatesPerHour: q.ChannelCreatesPerHour,
		},
		RedisURL: c.RedisURL, RedisPoolSize: c.RedisPoolSize,
		Exempt: []string{event.PubKey(relayKey), c.RelayOwnerPubkey},
		AgentFunc: func(ctx context.Context, communityID, pubkey string) (bool, error) {
			_, owner, err := st.UserAddPolicy(ctx, communityID, pubkey)
			return owner != "", err
		},
		Metrics: m, Logger: log,
	}
	if observer != nil {
		cfg.RateLimitedFunc = observer.RateLimited
	}
	return admission.New(cfg)
}
