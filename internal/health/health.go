// Package health serves the relay's health and metrics endpoints (docs/PROTOCOL.md §11).
//
// It owns the bodies and status codes of /_liveness, /_readiness and /_status
// on the health port, the readiness switch flipped at the start of a graceful
// shutdown, and the /metrics handler of the metrics port. Its Liveness and
// Readiness handlers are also mounted by the app listener (GET /health,
// /_liveness, /_readiness) so both ports give the same answers.
//
// It does NOT open listeners or own goroutines (cmd/buzz-relay serves the
// handlers), know how PostgreSQL or Redis are reached (the caller passes
// functions), or create a metrics registry (the caller passes a Gatherer).
// The pprof endpoints are mounted on the metrics listener only when the
// caller asks (MetricsOptions.Pprof); importing net/http/pprof also
// registers them on http.DefaultServeMux, which the relay never serves.
package health

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PingTimeout bounds the PostgreSQL check of /_readiness and /_status.
const PingTimeout = 2 * time.Second

// Redis states reported by Config.RedisStatus and /_status.
const (
	RedisConnected    = "connected"
	RedisDisconnected = "disconnected"
	RedisDisabled     = "disabled"
)

// ReplicaDisabled is /_status's read_replica when READ_DATABASE_URL is
// unset; ReplicaUnused when it is set but the start-time fence check
// failed, so every read stays on the writer.
const (
	ReplicaDisabled = "disabled"
	ReplicaUnused   = "unused"
)

// Config is what the health endpoints read. Every function may be called
// concurrently from several requests and must be safe for that.
type Config struct {
	// Version is reported by /_status, e.g. "v0.3.1" or "dev".
	Version string
	// Started is the process start time, for uptime_seconds. Zero means the
	// time New was called.
	Started time.Time
	// PingPostgres runs SELECT 1 on the writer pool and must honour ctx,
	// which carries the PingTimeout deadline. Nil means no database yet:
	// the relay is not ready and /_status reports "postgres":"error".
	PingPostgres func(ctx context.Context) error
	// RedisStatus returns RedisConnected, RedisDisconnected or RedisDisabled.
	// Nil means Redis is not configured (REDIS_URL unset): "disabled".
	RedisStatus func() string
	// ReplicaStatus returns the read replica's state for /_status
	// (ReplicaDisabled, ReplicaUnused or the probe's view). Nil means
	// ReplicaDisabled. The replica never affects readiness.
	ReplicaStatus func() string
	// Connections returns the open WebSockets of the process. Nil reads 0.
	Connections func() int
	// Subscriptions returns the live subscriptions of the process. Nil reads 0.
	Subscriptions func() int
	// Logger receives PostgreSQL reachability changes. Nil discards them.
	Logger *slog.Logger
}

// Server answers the health endpoints. Create it with New; its methods are
// safe for concurrent use.
type Server struct {
	cfg          Config
	log          *slog.Logger
	mux          *http.ServeMux
	shuttingDown atomic.Bool
	postgresDown atomic.Bool // last ping result, to log changes only
}

// New returns a Server reading cfg. It starts nothing.
func New(cfg Config) *Server {
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "health")
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /_liveness", s.Liveness)
	s.mux.HandleFunc("GET /_readiness", s.Readiness)
	s.mux.HandleFunc("GET /_status", s.Status)
	return s
}

// SetShuttingDown makes /_readiness answer 503 {"status":"shutting_down"}
// from now on, without pinging anything. Call it first when a shutdown
// signal arrives. It is idempotent and cannot be undone.
func (s *Server) SetShuttingDown() {
	s.shuttingDown.Store(true)
}

// Handler serves GET /_liveness, /_readiness and /_status for the health
// listener; other paths get 404 and other methods 405. It has no auth, CORS
// or rate limit.
func (s *Server) Handler() http.Handler {
	return s.mux
}

// Liveness answers 200 "ok" (text) while the process runs. The app listener
// mounts it for GET /_liveness and GET /health.
func (s *Server) Liveness(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}

// readiness is the body of a /_readiness answer; Postgres and Redis appear
// only when not ready, Redis only when Redis is configured.
type readiness struct {
	Status   string `json:"status"`
	Postgres *bool  `json:"postgres,omitempty"`
	Redis    *bool  `json:"redis,omitempty"`
}

// Readiness answers 200 {"status":"ready"} when not shutting down and
// PostgreSQL answers within PingTimeout; 503 {"status":"shutting_down"}
// during drain; otherwise 503 {"status":"not_ready","postgres":false}, with
// "redis":<connected> added when Redis is configured. Redis never makes the
// relay unready. The app listener mounts it for GET /_readiness.
func (s *Server) Readiness(w http.ResponseWriter, r *http.Request) {
	if s.shuttingDown.Load() {
		writeJSON(w, http.StatusServiceUnavailable, readiness{Status: "shutting_down"})
		return
	}
	up := s.pingPostgres(r.Context())
	switch {
	case s.shuttingDown.Load(): // the drain began during the ping
		writeJSON(w, http.StatusServiceUnavailable, readiness{Status: "shutting_down"})
	case up:
		writeJSON(w, http.StatusOK, readiness{Status: "ready"})
	default:
		body := readiness{Status: "not_ready", Postgres: new(false)}
		if redis := s.redisStatus(); redis != RedisDisabled {
			body.Redis = new(redis == RedisConnected)
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
	}
}

// status is the body of /_status, fields in the order of docs/PROTOCOL.md §11.1.
type status struct {
	Service       string `json:"service"`
	Version       string `json:"version"`
	UptimeSeconds int64  `json:"uptime_seconds"`
	Postgres      string `json:"postgres"`
	Redis         string `json:"redis"`
	ReadReplica   string `json:"read_replica"`
	Connections   int    `json:"connections"`
	Subscriptions int    `json:"subscriptions"`
}

// Status answers 200 with the service, version, whole seconds of uptime,
// PostgreSQL ("ok" or "error", pinged within PingTimeout), Redis
// ("connected", "disconnected" or "disabled"), the read replica
// ("disabled", "unused", "starting", "reachable" or "unreachable") and the
// process's connection
// and subscription counts. It answers 200 during drain too.
func (s *Server) Status(w http.ResponseWriter, r *http.Request) {
	body := status{
		Service:       "buzz-relay",
		Version:       s.cfg.Version,
		UptimeSeconds: int64(time.Since(s.cfg.Started) / time.Second),
		Postgres:      "error",
		Redis:         s.redisStatus(),
		ReadReplica:   ReplicaDisabled,
	}
	if s.pingPostgres(r.Context()) {
		body.Postgres = "ok"
	}
	if s.cfg.ReplicaStatus != nil {
		body.ReadReplica = s.cfg.ReplicaStatus()
	}
	if s.cfg.Connections != nil {
		body.Connections = s.cfg.Connections()
	}
	if s.cfg.Subscriptions != nil {
		body.Subscriptions = s.cfg.Subscriptions()
	}
	writeJSON(w, http.StatusOK, body)
}

// pingPostgres reports whether PostgreSQL answered within PingTimeout and
// logs when that changes.
func (s *Server) pingPostgres(ctx context.Context) bool {
	if s.cfg.PingPostgres == nil {
		return false
	}
	pingCtx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	err := s.cfg.PingPostgres(pingCtx)
	if err != nil && ctx.Err() != nil {
		return false // the client went away; that says nothing about PostgreSQL
	}
	if down := err != nil; s.postgresDown.Swap(down) != down {
		if down {
			s.log.Warn("postgres unreachable", slog.Any("err", err))
		} else {
			s.log.Info("postgres reachable")
		}
	}
	return err == nil
}

func (s *Server) redisStatus() string {
	if s.cfg.RedisStatus == nil {
		return RedisDisabled
	}
	return s.cfg.RedisStatus()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only plain structs are marshalled here
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// MetricsHandler serves GET /metrics from g in the Prometheus text format
// for the metrics listener; other paths get 404. A collector that fails is
// left out of the scrape instead of failing it. It is
// MetricsHandlerWith(g, MetricsOptions{}): no profiling endpoints.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return MetricsHandlerWith(g, MetricsOptions{})
}

// MetricsOptions are the optional endpoints of the metrics listener.
type MetricsOptions struct {
	// Pprof mounts the net/http/pprof handlers under /debug/pprof/
	// (BUZZ_PPROF_ENABLED): the index, every named profile (heap,
	// goroutine, allocs, …), cmdline, profile (CPU), symbol and trace.
	// Off, /debug/pprof/ is 404 like any other unknown path.
	Pprof bool
}

// MetricsHandlerWith is MetricsHandler plus the endpoints opts asks for.
func MetricsHandlerWith(g prometheus.Gatherer, opts MetricsOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	if opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // the index and the named profiles
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}
