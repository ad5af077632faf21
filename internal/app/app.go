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
	"github.com/jackc/pgx/v5/pgxpool"
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
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/replica"
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
// with Start and stop it with Close. Its parts are built once, in order, by
// Start; callers outside reach the few they need through methods.
type Relay struct {
	cfg config.Config
	log *slog.Logger
	db  *Database
	// store is the SQL of every entity, on the writer pool.
	store    *store.Store
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	// relayKey signs the relay's own events: BUZZ_RELAY_PRIVATE_KEY, or a
	// key generated at start for a single process.
	relayKey []byte
	services *Services
	// audit is nil when BUZZ_AUDIT_ENABLED is false.
	audit *Audit
	// admission is the per-user quotas; nil when every quota is off.
	admission *admission.Limiter
	pipeline  *ingest.Pipeline
	ws        *wsapi.Server
	http      *httpapi.Server
	health    *health.Server
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
	ok := false
	var closers []func()
	defer func() {
		if !ok {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	closers = append(closers, db.Close)
	// processID names this process in logs, control messages and its
	// barrier topic: a random UUID per start.
	processID := uuid.NewString()
	log = log.With(slog.String("process_id", processID))
	log.Info("process started", slog.Bool("redis", cfg.RedisURL != ""),
		slog.Bool("read_replica", cfg.ReadDatabaseURL != ""))
	st := store.New(db.Pool)
	registry, m := newMetrics(cfg, db)
	services := newServices(cfg, db, st, m, log)
	if err := services.Partitions.Ensure(ctx); err != nil {
		return nil, err
	}
	relayKey, relayPubkey := cfg.RelayPrivateKey, ""
	if relayKey != nil {
		relayPubkey = event.PubKey(relayKey)
	} else {
		relayKey = event.GenerateKey() // single process only; never advertised
	}
	services.Listeners = newListenerWorker(cfg, db, st, relayKey, m, log)
	resolver := tenant.NewResolver(tenant.Config{LookupFunc: st.CommunityIDByHost})
	services.Replica = openReplica(ctx, cfg, db, m, log)
	// The fan-out is the Bus's receiver, and the hot window follows the
	// other processes through the Bus; the reader is set once built.
	fan := &fanout{resolver: resolver, store: st, pool: db.Pool, log: log}
	if fan.bus, err = newBus(cfg, processID, m, log, fan); err != nil {
		return nil, err
	}
	services.PubSub = fan.bus
	var reader *read.Engine // the warm's read share; built next, before any read
	hw := newHotWindow(cfg, st, m, log, fan.bus, func(ctx context.Context) (func(), error) { return reader.Background(ctx) })
	reader = read.New(read.Config{Pool: db.Pool, Metrics: m, Logger: log, Hot: hw,
		QueryHookFunc: h.QueryHookFunc, Replica: services.Replica, NoReplicaReason: noReplicaReason(cfg, services.Replica),
		RelayKey: relayKey, Caps: readCaps(cfg), Shares: readShares(cfg), MaxBytes: cfg.Bytes.ReadMaxBytes,
		SearchRankWindow: cfg.SearchRankWindow, SearchCacheBytes: cfg.SearchCacheBytes})
	if err := reader.LoadCeiling(ctx); err != nil {
		return nil, err
	}
	aud, err := startAudit(ctx, cfg, db, m, log)
	if err != nil {
		return nil, err
	}
	closers = append(closers, aud.close)
	var (
		auditWake func()
		observer  auth.Observer
	)
	if aud != nil { // a nil *audit.Observer must not become a non-nil interface
		auditWake, observer = aud.Chainer.Wake, aud.Observer
	}
	fan.reader, fan.hot = reader, hw
	if hw != nil {
		services.HotListener = &hotListener{pool: db.Pool, w: hw, log: log}
	}
	lim, err := newAdmission(cfg, relayKey, st, db, m, log, observer)
	if err != nil {
		return nil, err
	}
	closers = append(closers, lim.Close)
	pipeline := ingest.New(ingest.Config{
		Pool: db.Pool, Live: fan, Metrics: m, Logger: log,
		RelayKey: relayKey, SignFunc: h.SignFunc,
		AuditEnabled: aud != nil, AuditWakeFunc: auditWake,
		ResolveTimeout: cfg.AmbiguousCommitTimeout,
		Admission:      lim, MaxPTags: cfg.Admission.MaxPTags,
		MaxEventBytes: cfg.Bytes.MaxEventBytes, GroupDelay: cfg.GroupCommitDelay,
	})
	ws := wsapi.New(wsapi.Config{
		Resolver: resolver, Submitter: pipeline, Reader: reader, Members: st, Metrics: m, Logger: log,
		Audit: observer, Bus: fan.crossProcess(), Admission: lim, Settings: cfg,
	})
	fan.ws = ws // the pipeline fans out to the server that submits to it
	services.Membership = wsapi.NewMembershipService(ws)
	hs := health.New(health.Config{
		Version: Version, Started: time.Now(), Logger: log,
		PingPostgres: db.Pool.Ping,
		Connections:  ws.Connections, Subscriptions: ws.Subscriptions,
		RedisStatus: redisStatus(fan.bus), ReplicaStatus: replicaStatus(cfg, services.Replica),
	})
	door := httpapi.New(httpapi.Config{
		Resolver: resolver, Submitter: pipeline, Reader: reader, Members: st,
		Replay:    store.NewReplayBatcher(st, cfg.Reads.StatementTimeout),
		WebSocket: ws, Health: hs.Handler(), Metrics: m, Logger: log,
		RelayPubkey: relayPubkey, Version: Version, Audit: observer, Admission: lim,
		Listeners: st, Settings: cfg,
	})
	ok = true
	return &Relay{cfg: cfg, log: log, db: db, store: st, registry: registry, metrics: m, relayKey: relayKey,
		services: services, audit: aud, admission: lim, pipeline: pipeline, ws: ws, http: door, health: hs}, nil
}

// newMetrics is the process's registry with the Go and process collectors
// and every relay metric, the pool's statistics read from db.
func newMetrics(cfg config.Config, db *Database) (*prometheus.Registry, *metrics.Metrics) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(registry)
	m.InitCommunity(cfg.RelayHost)
	m.SetPoolStatsFunc(func() (size, idle, active, max int32) {
		st := db.Pool.Stat()
		return st.TotalConns(), st.IdleConns(), st.AcquiredConns(), st.MaxConns()
	})
	return registry, m
}

// Pool is the writer pool.
func (a *Relay) Pool() *pgxpool.Pool { return a.db.Pool }

// Store is the SQL of every entity on the writer pool.
func (a *Relay) Store() *store.Store { return a.store }

// RelayKey is the key the relay signs its own events with.
func (a *Relay) RelayKey() []byte { return a.relayKey }

// Metrics are the relay's metrics.
func (a *Relay) Metrics() *metrics.Metrics { return a.metrics }

// Registry is the Prometheus registry /metrics serves.
func (a *Relay) Registry() *prometheus.Registry { return a.registry }

// Audit is the audit subsystem, nil when BUZZ_AUDIT_ENABLED is false.
func (a *Relay) Audit() *Audit { return a.audit }

// Replica is the read replica's probe; nil without READ_DATABASE_URL or
// when its fence check failed.
func (a *Relay) Replica() *replica.Replica { return a.services.Replica }

// Bootstrap creates the deployment community of RELAY_URL when it does not
// exist and, with RELAY_OWNER_PUBKEY, upserts its owner (docs/PROTOCOL.md §2.5).
// Run calls it before serving, on listeners already bound, so a start
// that cannot bind its ports leaves the database as it found it.
func (a *Relay) bootstrap(ctx context.Context) error {
	if _, err := a.store.CommunityEnsure(ctx, a.cfg.RelayHost); err != nil {
		return fmt.Errorf("ensure deployment community: %w", err)
	}
	if a.cfg.RelayOwnerPubkey == "" {
		return nil
	}
	c, err := a.store.CommunityByHost(ctx, a.cfg.RelayHost)
	if err != nil {
		return fmt.Errorf("bootstrap owner: %w", err)
	}
	if _, err := a.store.RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{
		CommunityID: c.ID, Pubkey: a.cfg.RelayOwnerPubkey, Role: "owner", AddedBy: "bootstrap"}); err != nil {
		return fmt.Errorf("bootstrap owner: %w", err)
	}
	return nil
}

// Listen opens the app, health and metrics listeners. A port already in
// use is reported with the three variables that move together, since
// moving BUZZ_BIND_ADDR alone to run a second relay fails on the others.
func (a *Relay) Listen() (app, healthL, metricsL net.Listener, err error) {
	if app, err = net.Listen("tcp", a.cfg.BindAddr); err != nil {
		return nil, nil, nil, a.listenError("BUZZ_BIND_ADDR "+a.cfg.BindAddr, err)
	}
	if healthL, err = net.Listen("tcp", ":"+strconv.Itoa(a.cfg.HealthPort)); err != nil {
		app.Close()
		return nil, nil, nil, a.listenError("BUZZ_HEALTH_PORT "+strconv.Itoa(a.cfg.HealthPort), err)
	}
	if metricsL, err = net.Listen("tcp", ":"+strconv.Itoa(a.cfg.MetricsPort)); err != nil {
		app.Close()
		healthL.Close()
		return nil, nil, nil, a.listenError("BUZZ_METRICS_PORT "+strconv.Itoa(a.cfg.MetricsPort), err)
	}
	return app, healthL, metricsL, nil
}

func (a *Relay) listenError(what string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: %w", what, err)
	}
	return fmt.Errorf("listen on %s: %w (the relay listens on three ports, BUZZ_BIND_ADDR %s, BUZZ_HEALTH_PORT %d "+
		"and BUZZ_METRICS_PORT %d: another relay on this machine needs all three moved)",
		what, err, a.cfg.BindAddr, a.cfg.HealthPort, a.cfg.MetricsPort)
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
	a.appSrv = appServer(a.cfg, a.http.Handler())
	a.healthSrv = &http.Server{Handler: a.health.Handler(), ReadHeaderTimeout: 10 * time.Second}
	a.metricSrv = &http.Server{Handler: health.MetricsHandlerWith(a.registry, health.MetricsOptions{Pprof: a.cfg.PprofEnabled}), ReadHeaderTimeout: 10 * time.Second}
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
	for _, s := range a.services.list() {
		g.Go(func() error { return service.Run(gctx, s) })
	}
	if a.audit != nil {
		g.Go(func() error { return a.audit.run(gctx, a.log) })
	}
	if a.db.cluster != nil {
		// The private cluster's supervisor stops at the shutdown signal,
		// before the drain, so nothing is restarted while the relay stops.
		superviseCtx, stopSupervise := context.WithCancel(gctx)
		defer context.AfterFunc(ctx, stopSupervise)()
		g.Go(func() error {
			defer stopSupervise()
			return a.db.Supervise(superviseCtx)
		})
	}
	a.log.Info("listening", slog.String("app", app.Addr().String()), slog.String("health", healthL.Addr().String()),
		slog.String("metrics", metricsL.Addr().String()), slog.String("relay_url", a.cfg.RelayURL))
	select {
	case <-ctx.Done():
		a.log.Info("shutdown signal received")
	case <-gctx.Done():
	}
	a.drain()
	cancel()
	return g.Wait()
}

// drain is the graceful shutdown of docs/PROTOCOL.md §9.
func (a *Relay) drain() {
	timeout := a.cfg.DrainTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a.health.SetShuttingDown()
	a.ws.Shutdown(ctx)
	_ = a.appSrv.Shutdown(ctx)
	_ = a.healthSrv.Shutdown(ctx)
	_ = a.metricSrv.Shutdown(ctx)
	a.log.Info("drain complete")
}

// Close releases the audit pool, the quotas' Redis connections, the
// database and the private cluster.
func (a *Relay) Close() {
	if a.pipeline != nil {
		a.pipeline.Close()
	}
	a.audit.close()
	a.admission.Close()
	a.db.Close()
}

// readCaps are the read engine's filter caps (BUZZ_FILTER_MAX_*).
func readCaps(cfg config.Config) read.Caps {
	f := cfg.Filters
	return read.Caps{MaxIDs: f.MaxIDs, MaxAuthors: f.MaxAuthors, MaxKinds: f.MaxKinds,
		MaxTagValues: f.MaxTagValues, MaxTagKeys: f.MaxTagKeys}
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
