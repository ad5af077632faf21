package app

import (
	"log/slog"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/listener"
	"github.com/buzz-relay/buzz/internal/maintenance"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/notify"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wsapi"
)

// Services are the background services a running relay owns besides the
// audit subsystem, each of the one shape of package service. Run starts
// them in its errgroup and stops them when it ends; the audit chainer and
// observer run apart because their flush must follow the doors' closing.
type Services struct {
	// Partitions keeps this month's and the next three months' events
	// partitions (every 24 h; Start also runs it once before anything else).
	Partitions *maintenance.Partitions
	// Analyze analyzes the partitions and side tables that changed (every 10 s).
	Analyze *maintenance.Analyze
	// ReplayPurge deletes used NIP-98 ids older than 180 s (every 60 s).
	ReplayPurge *maintenance.ReplayPurge
	// ExpiredPurge deletes events whose NIP-40 expiration has passed
	// (every BUZZ_EXPIRED_PURGE_INTERVAL_MS, 60 s by default).
	ExpiredPurge *maintenance.ExpiredPurge
	// Membership revalidates relay membership of authenticated connections
	// (every BUZZ_MEMBERSHIP_RECHECK, only with RequireRelayMembership).
	Membership *wsapi.MembershipService
	// Replica is the read replica's probe (every 5 s); nil without
	// READ_DATABASE_URL or when its fence check failed.
	Replica *replica.Replica
	// PubSub is the Redis link to the other relay processes; nil without
	// REDIS_URL. It connects in the background and keeps retrying.
	PubSub *pubsub.Bus
	// Listeners delivers mention notifications to the operator listeners
	// configured on this process (docs/PROTOCOL.md §15.5); nil without any.
	Listeners *listener.Worker
	// ListenerReaper deletes outbox rows past 15 minutes and registrations
	// past 30 days (docs/PROTOCOL.md §15.8), on every process, listeners or not.
	ListenerReaper *listener.Reaper
	// HotListener follows store.HotWindowChannel for the hot window; nil
	// when BUZZ_HOT_WINDOW_EVENTS is 0.
	HotListener *hotListener
}

// newServices builds the database jobs; the other services are added as
// Start builds their parts.
func newServices(cfg config.Config, db *Database, st *store.Store, m *metrics.Metrics, log *slog.Logger) *Services {
	return &Services{
		Partitions: maintenance.NewPartitions(maintenance.PartitionsConfig{Pool: db.Pool, Logger: log,
			Errors: m.PartitionMaintenanceErrors}),
		Analyze:     maintenance.NewAnalyze(maintenance.AnalyzeConfig{Pool: db.Pool, Logger: log}),
		ReplayPurge: maintenance.NewReplayPurge(maintenance.ReplayPurgeConfig{Store: st, Logger: log}),
		ExpiredPurge: maintenance.NewExpiredPurge(maintenance.ExpiredPurgeConfig{Pool: db.Pool, Logger: log,
			Interval: cfg.ExpiredPurgeInterval}),
		ListenerReaper: listener.NewReaper(listener.ReaperConfig{Pool: db.Pool, Logger: log,
			Metrics: m}),
	}
}

// newListenerWorker is the delivery worker of the listeners configured on
// this process, or nil (logged) when there are none (docs/PROTOCOL.md §15.2).
func newListenerWorker(cfg config.Config, db *Database, st *store.Store, relayKey []byte, m *metrics.Metrics,
	log *slog.Logger) *listener.Worker {
	if len(cfg.OperatorListeners) == 0 {
		log.Info("operator-listener mention delivery disabled by BUZZ_OPERATOR_LISTENERS")
		return nil
	}
	urls := make(map[string]string, len(cfg.OperatorListeners))
	for _, l := range cfg.OperatorListeners {
		urls[l.Pubkey] = l.URL
	}
	return listener.NewWorker(listener.Config{Pool: db.Pool, Listeners: urls,
		Client: notify.NewClient(cfg.OperatorListenerTimeout, relayKey), Logger: log, Metrics: m})
}

// list is every service, in the order Run starts them.
func (s *Services) list() []service.Service {
	list := []service.Service{s.Partitions, s.Analyze, s.ReplayPurge, s.ExpiredPurge, s.Membership}
	if s.Replica != nil {
		list = append(list, s.Replica)
	}
	if s.PubSub != nil {
		list = append(list, s.PubSub)
	}
	if s.Listeners != nil {
		list = append(list, s.Listeners)
	}
	if s.HotListener != nil {
		list = append(list, s.HotListener)
	}
	return append(list, s.ListenerReaper)
}
