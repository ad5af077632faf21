package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// ReplayGuard records NIP-98 event ids as used, once per community
// (docs/PROTOCOL.md §8.2). fresh is false when the id was used before; an error fails closed.
// *store.Store and *store.ReplayBatcher satisfy it.
type ReplayGuard interface {
	NIP98Use(ctx context.Context, communityID, eventID string) (fresh bool, err error)
}

// MaxBodyBytes is the largest accepted bridge request body (docs/PROTOCOL.md §7.11).
const MaxBodyBytes = 1 << 20

// Config wires the HTTP surface. Resolver, Submitter, Reader and Replay are
// required, and Members is when RequireRelayMembership is set.
type Config struct {
	// Resolver is the tenant of each request, from its Host.
	Resolver *tenant.Resolver
	// Submitter is the ingest pipeline, the one door for writes.
	Submitter *ingest.Pipeline
	// Reader is the read engine, the one door for reads.
	Reader *read.Engine
	// Members answers the relay-membership gate.
	Members tenant.MemberChecker
	// Replay keeps NIP-98 ids single-use.
	Replay ReplayGuard
	// WebSocket is the WebSocket door: it serves GET / upgrade requests
	// and names a request's client address. When nil, upgrade requests get
	// the NIP-11 document like any plain GET /, and the client address is
	// the peer's.
	WebSocket WebSocket
	// Health, when set, is mounted on GET /_liveness and GET /_readiness.
	Health http.Handler
	// Metrics receives http_requests_total and http_request_latency_ms and
	// the NIP-98 auth counters. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// Audit records NIP-98 successes and failures (docs/PROTOCOL.md §13.4); nil disables it.
	Audit auth.Observer
	// Logger is the parent logger; nil discards.
	Logger *slog.Logger
	// RelayPubkey is advertised as NIP-11 "self"; "" unless
	// BUZZ_RELAY_PRIVATE_KEY is set.
	RelayPubkey string
	// Version is the build version in NIP-11.
	Version string
	// Admission charges each bridge call to its signer's api_calls quota
	// before the body is parsed. Nil admits every call.
	Admission *admission.Limiter
	// Listeners stores the operator-listener registrations of
	// docs/PROTOCOL.md §15.3; nil answers the operator routes 500.
	Listeners ListenerRegistry
	// Settings are the relay's settings, whole (config.Load, or
	// config.Defaults where a part is built directly). The server reads
	// RELAY_URL's scheme and host, BUZZ_REQUIRE_AUTH_TOKEN,
	// BUZZ_REQUIRE_RELAY_MEMBERSHIP, BUZZ_CORS_ORIGINS, the sizes NIP-11
	// advertises (BUZZ_MAX_FRAME_BYTES, BUZZ_MAX_EVENT_BYTES, which also
	// bounds the body of POST /events, and the subscription caps of
	// Filters), BUZZ_HTTP_MAX_CONCURRENT (admission.go) and the operator
	// routes' RELAY_OPERATOR_API_ORIGIN and BUZZ_OPERATOR_LISTENERS.
	Settings config.Config
	// NowFunc defaults to time.Now.
	NowFunc func() time.Time
}

// WebSocket is what the HTTP door needs of the WebSocket door (package
// wsapi's Server): the upgrades it hands over, and the client-address rule
// (BUZZ_TRUSTED_PROXIES, IPv6 /64) that keys a bridge request's share of
// concurrent reads, so both doors count one client alike.
type WebSocket interface {
	http.Handler
	ClientAddr(r *http.Request) string
}

// Server is the app listener's HTTP surface. Create it with New; it is safe
// for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	now   func() time.Time
	nip11 []byte
	// listeners are the pubkeys of BUZZ_OPERATOR_LISTENERS.
	listeners map[string]bool
	origins   map[string]struct{}
	mux       *http.ServeMux
	// busy holds one token per bridge request being served; nil without
	// a limit (admission.go).
	busy chan struct{}
}

// Route patterns, also the action label of the HTTP metrics.
const (
	actionRoot     = "/"
	actionInfo     = "/info"
	actionEvents   = "/events"
	actionQuery    = "/query"
	actionOperator = operatorPath
	actionCount    = "/count"
)

// New builds the server and its routes. It panics when a required
// dependency is missing, a programming error that must fail at start.
func New(cfg Config) *Server {
	switch {
	case cfg.Resolver == nil:
		panic("httpapi: Config.Resolver is nil")
	case cfg.Submitter == nil:
		panic("httpapi: Config.Submitter is nil")
	case cfg.Reader == nil:
		panic("httpapi: Config.Reader is nil")
	case cfg.Replay == nil:
		panic("httpapi: Config.Replay is nil")
	case cfg.Settings.RequireRelayMembership && cfg.Members == nil:
		panic("httpapi: Config.Members is nil while RequireRelayMembership is set")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	s := &Server{
		cfg: cfg,
		log: cfg.Logger,
		now: cfg.NowFunc,
		mux: http.NewServeMux(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if n := cfg.Settings.Reads.HTTPMaxConcurrent; n > 0 {
		s.busy = make(chan struct{}, n)
	}
	s.log = s.log.With("component", "httpapi")
	if s.now == nil {
		s.now = time.Now
	}
	if !cfg.Settings.RequireAuthToken {
		s.log.Warn("X-Pubkey shortcut enabled: bridge requests without Authorization are trusted as the pubkey they name (BUZZ_REQUIRE_AUTH_TOKEN=false)")
	}
	s.nip11 = buildNIP11(cfg)
	s.listeners = make(map[string]bool, len(cfg.Settings.OperatorListeners))
	for _, l := range cfg.Settings.OperatorListeners {
		s.listeners[l.Pubkey] = true
	}
	if origins := cfg.Settings.CORSOrigins; len(origins) > 0 {
		s.origins = make(map[string]struct{}, len(origins))
		for _, o := range origins {
			s.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = struct{}{}
		}
	}
	s.routes()
	return s
}

// Handler returns the handler of the app listener.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) routes() {
	s.mux.HandleFunc("/{$}", s.root)
	s.mux.Handle("/info", s.instrument(actionInfo, http.HandlerFunc(s.serveNIP11)))
	s.mux.Handle("/events", s.instrument(actionEvents, s.bridgeLimited(s.eventsBody(), s.events)))
	s.mux.Handle("/query", s.instrument(actionQuery, s.bridge(s.query)))
	s.mux.Handle("/count", s.instrument(actionCount, s.bridge(s.count)))
	s.mux.Handle(operatorPath, s.instrument(actionOperator, http.HandlerFunc(s.operatorPubkeys)))
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	if s.cfg.Health != nil {
		s.mux.Handle("GET /_liveness", s.cfg.Health)
		s.mux.Handle("GET /_readiness", s.cfg.Health)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not found")
	})
	m := s.cfg.Metrics
	for _, a := range []string{actionRoot, actionInfo, actionEvents, actionQuery, actionCount} {
		m.InitHTTPAction(a)
	}
}

// root serves GET /: NIP-11 when asked for it, the WebSocket upgrade for an
// upgrade request, and NIP-11 as the fallback (docs/PROTOCOL.md §7.12).
func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	if s.cfg.WebSocket != nil && r.Method == http.MethodGet && isUpgrade(r) && !wantsNIP11(r) {
		// Not instrumented: the connection outlives the request, and the
		// upgrade handler needs the raw ResponseWriter to hijack it.
		s.cfg.WebSocket.ServeHTTP(w, r)
		return
	}
	s.instrument(actionRoot, http.HandlerFunc(s.serveNIP11)).ServeHTTP(w, r)
}

func isUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

func wantsNIP11(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "application/nostr+json") {
			return true
		}
	}
	return false
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts http_requests_total{code,action} and observes
// http_request_latency_ms{action}, and logs one debug line per request with
// no header or body content.
func (s *Server) instrument(action string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		took := time.Since(start)
		m := s.cfg.Metrics
		m.HTTPRequests.WithLabelValues(strconv.Itoa(sw.status), action).Inc()
		m.HTTPRequestLatencyMs.WithLabelValues(action).Observe(float64(took) / float64(time.Millisecond))
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http bridge request",
			slog.String("route", action), slog.String("method", r.Method),
			slog.Int("status", sw.status), slog.Int64("duration_ms", took.Milliseconds()))
	})
}
