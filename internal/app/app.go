// Package app is the composition root: it wires every component of a
// running relay — the database (private cluster or DATABASE_URL),
// migrations, partitions, the deployment community, the tenant resolver,
// the read engine, the ingest pipeline, the WebSocket door (wsapi), the
// HTTP door (httpapi), health and metrics, and the background services.
//
// It owns construction order and shutdown order. It does NOT implement any
// protocol rule itself; cmd/buzz-relay and the end-to-end tests both use it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/health"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wsapi"
)

// Version is the build version reported by NIP-11 and /_status.
var Version = "dev"

// Hooks are fault-injection points for tests.
type Hooks struct {
	// SignFunc replaces the relay's signing of follow-up events.
	SignFunc func(ev *event.Event) error
	// QueryHookFunc runs before each history query of the read engine.
	QueryHookFunc func(ctx context.Context, f *event.Filter) error
}

// Relay is a running relay: every component wired together. Tests build one
// with Start and stop it with Close.
type Relay struct {
	Config   config.Config
	DB       *Database
	Store    *store.Store
	Reader   *read.Engine
	Pipeline *ingest.Pipeline
	Relay    *wsapi.Server
	HTTP     *httpapi.Server
	Health   *health.Server
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics
	Resolver *tenant.Resolver
	// Audit is nil when BUZZ_AUDIT_ENABLED is false.
	Audit *Audit
	// Bus carries live traffic between relay processes; nil without
	// REDIS_URL (docs/PROTOCOL.md §16).
	Bus *pubsub.Bus
	// ProcessID names this process in logs, control messages and its
	// barrier topic: a random UUID per start.
	ProcessID string
	// Admission is the per-user quotas; nil when every quota is off.
	Admission *admission.Limiter
	// Services are the background jobs Run owns.
	Services  *Services
	RelayKey  []byte
	Log       *slog.Logger
	appSrv    *http.Server
	healthSrv *http.Server
	metricSrv *http.Server
}

// Start opens the database (private cluster or DATABASE_URL), applies or
// checks migrations, ensures partitions, and builds every component. It
// opens no listener and writes no tenant data: the caller runs Listen,
// then Run, which bootstraps the deployment community before serving.
//
// Hooks are for tests: fault injection points inside the pipeline and the
// read engine; production passes none.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger, hooks ...Hooks) (*Relay, error) {
	var h Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	db, err := openDatabase(ctx, cfg, log, pg.MigrateCheck, writerFloor(cfg))
	if err != nil {
		return nil, err
	}
	processID := uuid.NewString()
	log = log.With(slog.String("process_id", processID))
	log.Info("process started", slog.Bool("redis", cfg.RedisURL != ""),
		slog.Bool("read_replica", cfg.ReadDatabaseURL != ""))
	a := &Relay{Config: cfg, DB: db, Log: log, Store: store.New(db.Pool), ProcessID: processID}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	a.Registry = prometheus.NewRegistry()
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Metrics = metrics.New(a.Registry)
	a.Metrics.InitCommunity(cfg.RelayHost)
	a.Metrics.SetPoolStatsFunc(func() (size, idle, active, max int32) {
		st := db.Pool.Stat()
		return st.TotalConns(), st.IdleConns(), st.AcquiredConns(), st.MaxConns()
	})
	a.Services = newServices(a)
	if err := a.Services.Partitions.Ensure(ctx); err != nil {
		return nil, err
	}
	a.RelayKey = cfg.RelayPrivateKey
	relayPubkey := ""
	if a.RelayKey != nil {
		relayPubkey = event.PubKey(a.RelayKey)
	} else {
		a.RelayKey = event.GenerateKey() // single process only; never advertised
	}
	a.Services.Listeners = newListenerWorker(a)
	a.Resolver = tenant.NewResolver(tenant.Config{LookupFunc: a.communityByHost})
	a.Services.Replica = openReplica(ctx, a)
	a.Reader = read.New(read.Config{Pool: db.Pool, Metrics: a.Metrics, Logger: log, QueryHookFunc: h.QueryHookFunc,
		Replica: a.Services.Replica, NoReplicaReason: noReplicaReason(cfg, a.Services.Replica), RelayKey: a.RelayKey,
		Caps: read.Caps{MaxIDs: cfg.Filters.MaxIDs, MaxAuthors: cfg.Filters.MaxAuthors, MaxKinds: cfg.Filters.MaxKinds,
			MaxTagValues: cfg.Filters.MaxTagValues, MaxTagKeys: cfg.Filters.MaxTagKeys},
		Shares: readShares(cfg), MaxBytes: cfg.Bytes.ReadMaxBytes})
	if a.Audit, err = startAudit(ctx, a); err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			a.Audit.close()
		}
	}()
	var (
		auditWake func()
		observer  auth.Observer
	)
	if a.Audit != nil { // a nil *audit.Observer must not become a non-nil interface
		auditWake, observer = a.Audit.Chainer.Wake, a.Audit.Observer
	}
	if a.Bus, err = newBus(a); err != nil {
		return nil, err
	}
	a.Services.PubSub = a.Bus
	if a.Admission, err = newAdmission(a, observer); err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			a.Admission.Close()
		}
	}()
	fan := &fanout{a: a}
	a.Pipeline = ingest.New(ingest.Config{
		Pool: db.Pool, Broadcaster: fan, Metrics: a.Metrics, Logger: log,
		ForgetAccessFunc: fan.forget,
		RelayKey:         a.RelayKey, SignFunc: h.SignFunc, EvictFunc: fan.evict,
		AuditEnabled: a.Audit != nil, AuditWakeFunc: auditWake,
		InterruptFunc: fan.interrupt, ResolveTimeout: cfg.AmbiguousCommitTimeout,
		Admission: a.Admission, MaxPTags: cfg.Admission.MaxPTags,
		MaxEventBytes: cfg.Bytes.MaxEventBytes,
	})
	a.Relay = wsapi.New(wsapi.Config{
		Resolver: a.Resolver, Submitter: a.Pipeline, Reader: a.Reader, Members: a.Store, Metrics: a.Metrics, Logger: log,
		Secure: cfg.RelayScheme == "wss", RequireRelayMembership: cfg.RequireRelayMembership,
		MaxConnections: cfg.MaxConnections, MaxConcurrentHandlers: cfg.MaxConcurrentHandlers,
		ConnectRate: cfg.WSConnectRate, ConnectBurst: cfg.WSConnectBurst, TrustedProxies: cfg.TrustedProxies,
		SendBuffer: cfg.SendBuffer, SendBufferBytes: cfg.Bytes.SendBufferBytes, MaxFrameBytes: cfg.MaxFrameBytes, SlowClientGraceLimit: cfg.SlowClientGraceLimit,
		HeartbeatInterval: cfg.HeartbeatInterval, AuthTimeout: cfg.AuthTimeout, MembershipRecheck: cfg.MembershipRecheck,
		Audit: observer, Bus: a.Bus, Admission: a.Admission,
		SubMaxIndexKeys: cfg.Filters.SubMaxIndexKeys, ConnMaxIndexKeys: cfg.Filters.ConnMaxIndexKeys,
		ConnMaxFilterBytes:       cfg.Filters.ConnMaxFilterBytes,
		MaxConnectionsPerAddress: cfg.Reads.MaxConnectionsPerAddress,
	})
	a.Services.Membership = wsapi.NewMembershipService(a.Relay)
	started := time.Now()
	a.Health = health.New(health.Config{
		Version: Version, Started: started, Logger: log,
		PingPostgres: db.Pool.Ping,
		Connections:  a.Relay.Connections, Subscriptions: a.Relay.Subscriptions,
		RedisStatus: a.redisStatus(), ReplicaStatus: a.replicaStatus(),
	})
	a.HTTP = httpapi.New(httpapi.Config{
		Resolver: a.Resolver, Submitter: a.Pipeline, Reader: a.Reader, Members: a.Store, Replay: a.Store,
		WebSocket: a.Relay, Health: a.Health.Handler(), Metrics: a.Metrics, Logger: log,
		Secure: cfg.RelayScheme == "wss", RequireAuthToken: cfg.RequireAuthToken,
		Operator: httpapi.OperatorConfig{Origin: cfg.OperatorAPIOrigin, Listeners: listenerSet(cfg.OperatorListeners),
			ReplayHost: cfg.RelayHost, Registry: a.Store},
		RequireRelayMembership: cfg.RequireRelayMembership, CORSOrigins: cfg.CORSOrigins,
		RelayPubkey: relayPubkey, Version: Version, MaxFrameBytes: cfg.MaxFrameBytes,
		SubMaxIndexKeys: cfg.Filters.SubMaxIndexKeys, ConnMaxIndexKeys: cfg.Filters.ConnMaxIndexKeys,
		ConnMaxFilterBytes: cfg.Filters.ConnMaxFilterBytes,
		Audit:              observer, Admission: a.Admission,
		MaxConcurrent: cfg.Reads.HTTPMaxConcurrent, ClientAddrFunc: a.Relay.ClientAddr,
		MaxEventBytes: cfg.Bytes.MaxEventBytes,
	})
	ok = true
	return a, nil
}

// Bootstrap creates the deployment community of RELAY_URL when it does not
// exist and, with RELAY_OWNER_PUBKEY, upserts its owner (docs/PROTOCOL.md §2.5).
// Run calls it before serving, on listeners already bound, so a start
// that cannot bind its ports leaves the database as it found it.
func (a *Relay) bootstrap(ctx context.Context) error {
	if _, err := a.Store.CommunityEnsure(ctx, a.Config.RelayHost); err != nil {
		return fmt.Errorf("ensure deployment community: %w", err)
	}
	if a.Config.RelayOwnerPubkey == "" {
		return nil
	}
	c, err := a.Store.CommunityByHost(ctx, a.Config.RelayHost)
	if err != nil {
		return fmt.Errorf("bootstrap owner: %w", err)
	}
	if _, err := a.Store.RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{
		CommunityID: c.ID, Pubkey: a.Config.RelayOwnerPubkey, Role: "owner", AddedBy: "bootstrap"}); err != nil {
		return fmt.Errorf("bootstrap owner: %w", err)
	}
	return nil
}

// Listen opens the app, health and metrics listeners. A port already in
// use is reported with the three variables that move together, since
// moving BUZZ_BIND_ADDR alone to run a second relay fails on the others.
func (a *Relay) Listen() (app, healthL, metricsL net.Listener, err error) {
	if app, err = net.Listen("tcp", a.Config.BindAddr); err != nil {
		return nil, nil, nil, a.listenError("BUZZ_BIND_ADDR "+a.Config.BindAddr, err)
	}
	if healthL, err = net.Listen("tcp", ":"+strconv.Itoa(a.Config.HealthPort)); err != nil {
		app.Close()
		return nil, nil, nil, a.listenError("BUZZ_HEALTH_PORT "+strconv.Itoa(a.Config.HealthPort), err)
	}
	if metricsL, err = net.Listen("tcp", ":"+strconv.Itoa(a.Config.MetricsPort)); err != nil {
		app.Close()
		healthL.Close()
		return nil, nil, nil, a.listenError("BUZZ_METRICS_PORT "+strconv.Itoa(a.Config.MetricsPort), err)
	}
	return app, healthL, metricsL, nil
}

func (a *Relay) listenError(what string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: %w", what, err)
	}
	return fmt.Errorf("listen on %s: %w (the relay listens on three ports, BUZZ_BIND_ADDR %s, BUZZ_HEALTH_PORT %d "+
		"and BUZZ_METRICS_PORT %d: another relay on this machine needs all three moved)",
		what, err, a.Config.BindAddr, a.Config.HealthPort, a.Config.MetricsPort)
}

// Run bootstraps the deployment community, then serves on the given
// listeners and runs background jobs until ctx ends, then drains:
// readiness 503, sockets closed 1012, HTTP finished, bounded by the drain
// timeout.
func (a *Relay) Run(ctx context.Context, app, healthL, metricsL net.Listener) error {
	if err := a.bootstrap(ctx); err != nil {
		app.Close()
		healthL.Close()
		metricsL.Close()
		return err
	}
	a.appSrv = appServer(a.Config, a.HTTP.Handler())
	a.healthSrv = &http.Server{Handler: a.Health.Handler(), ReadHeaderTimeout: 10 * time.Second}
	a.metricSrv = &http.Server{Handler: health.MetricsHandlerWith(a.Registry, health.MetricsOptions{Pprof: a.Config.PprofEnabled}), ReadHeaderTimeout: 10 * time.Second}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, gctx := errgroup.WithContext(runCtx)
	serveOn := func(srv *http.Server, l net.Listener) func() error {
		return func() error {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
	g.Go(serveOn(a.appSrv, app))
	g.Go(serveOn(a.healthSrv, healthL))
	g.Go(serveOn(a.metricSrv, metricsL))
	for _, s := range a.Services.list() {
		g.Go(func() error { return service.Run(gctx, s) })
	}
	if a.Audit != nil {
		g.Go(func() error { return a.Audit.run(gctx, a.Log) })
	}
	if a.DB.cluster != nil {
		// The private cluster's supervisor stops at the shutdown signal,
		// before the drain, so nothing is restarted while the relay stops.
		superviseCtx, stopSupervise := context.WithCancel(gctx)
		defer context.AfterFunc(ctx, stopSupervise)()
		g.Go(func() error {
			defer stopSupervise()
			return a.DB.Supervise(superviseCtx)
		})
	}
	a.Log.Info("listening", slog.String("app", app.Addr().String()), slog.String("health", healthL.Addr().String()),
		slog.String("metrics", metricsL.Addr().String()), slog.String("relay_url", a.Config.RelayURL))
	select {
	case <-ctx.Done():
		a.Log.Info("shutdown signal received")
	case <-gctx.Done():
	}
	a.drain()
	cancel()
	return g.Wait()
}

// drain is the graceful shutdown of docs/PROTOCOL.md §9.
func (a *Relay) drain() {
	timeout := a.Config.DrainTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a.Health.SetShuttingDown()
	a.Relay.Shutdown(ctx)
	_ = a.appSrv.Shutdown(ctx)
	_ = a.healthSrv.Shutdown(ctx)
	_ = a.metricSrv.Shutdown(ctx)
	a.Log.Info("drain complete")
}

// Close releases the audit pool, the quotas' Redis connections, the
// database and the private cluster.
func (a *Relay) Close() {
	if a.Pipeline != nil {
		a.Pipeline.Close()
	}
	a.Audit.close()
	a.Admission.Close()
	a.DB.Close()
}

// communityByHost is the tenant resolver's lookup: the community whose host
// or alias is h, tenant.ErrUnknownHost when none is.
func (a *Relay) communityByHost(ctx context.Context, h string) (string, error) {
	c, err := a.Store.CommunityByHost(ctx, h)
	if errors.Is(err, pg.ErrNotFound) {
		return "", tenant.ErrUnknownHost
	}
	if err != nil {
		return "", err
	}
	return c.ID, nil
}

// listenerSet is the set of operator-listener pubkeys configured on this
// process.
func listenerSet(ls []config.OperatorListener) map[string]bool {
	out := make(map[string]bool, len(ls))
	for _, l := range ls {
		out[l.Pubkey] = true
	}
	return out
}

// readShares is the read engine's bound on concurrent reads and every
// read's deadline (docs/OPERATIONS.md "Read deadlines and shares").
func readShares(cfg config.Config) read.ShareConfig {
	r := cfg.Reads
	return read.ShareConfig{Max: r.MaxConcurrentReads, PerConnection: r.PerConnection, PerPubkey: r.PerPubkey,
		AcquireTimeout: r.AcquireTimeout, Timeout: r.StatementTimeout,
		TimePerSecond: r.TimePerSecond, TimeBurst: r.TimeBurst}
}

// appServer is the app listener's server with its timeouts
// (docs/OPERATIONS.md "HTTP timeouts and concurrency"): request headers
// within min(10 s, BUZZ_HTTP_READ_TIMEOUT_MS), the whole request within
// BUZZ_HTTP_READ_TIMEOUT_MS, the response within BUZZ_HTTP_WRITE_TIMEOUT_MS,
// an idle keep-alive connection closed after BUZZ_HTTP_IDLE_TIMEOUT_MS. A
// WebSocket upgrade is hijacked, which clears the connection's deadlines:
// the socket then lives by its own heartbeat and write timeout.
func appServer(cfg config.Config, h http.Handler) *http.Server {
	r := cfg.Reads
	header := 10 * time.Second
	if r.HTTPReadTimeout > 0 {
		header = min(header, r.HTTPReadTimeout)
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: header,
		ReadTimeout: r.HTTPReadTimeout, WriteTimeout: r.HTTPWriteTimeout, IdleTimeout: r.HTTPIdleTimeout}
}
