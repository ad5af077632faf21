package relay

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/host"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
)

// Resolver maps a normalised host to its community. Any error, including
// "not found", is answered with 404 (spec 10 §2.2).
type Resolver interface {
	Resolve(ctx context.Context, host string) (host.Tenant, error)
}

// Submitter is the ingest pipeline: the one door for writes.
type Submitter interface {
	Submit(ctx context.Context, req ingest.Request) ingest.Result
}

// Reader is the read engine the transport consumes.
type Reader interface {
	// Accessible returns the reader's accessible channels (spec 10 §5.6).
	Accessible(ctx context.Context, sc read.Scope) (*read.Access, error)
	// Confirm returns requested ∩ accessible, confirming channels missing
	// from acc with an uncached query.
	Confirm(ctx context.Context, sc read.Scope, acc *read.Access, requested []string) ([]string, error)
	// Query reads the stored history of one filter: limit clamped, ordered,
	// post-filtered; search filters too.
	Query(ctx context.Context, sc read.Scope, acc *read.Access, f *event.Filter, opt read.QueryOptions) ([]read.Row, error)
	// Count counts one filter; it may return read.ErrCountTooBroad.
	Count(ctx context.Context, sc read.Scope, acc *read.Access, f *event.Filter) (int64, error)
	// CanAccess reports, from a cache, whether the reader may still read
	// channel; false on error (fail closed). Used by live delivery.
	CanAccess(ctx context.Context, sc read.Scope, channel string) bool
}

// MemberChecker looks up relay membership (spec 10 §2.5).
type MemberChecker interface {
	IsRelayMember(ctx context.Context, communityID, pubkey string) (bool, error)
}

// Limits and intervals used when a Config field is zero (spec 10 §7.11).
const (
	DefaultMaxConnections        = 10000
	DefaultMaxConcurrentHandlers = 1024
	DefaultSendBuffer            = 1000
	DefaultMaxFrameBytes         = 524288
	DefaultSlowClientGraceLimit  = 15
	DefaultHeartbeatInterval     = 30 * time.Second
	DefaultAuthTimeout           = 5 * time.Second
	DefaultMembershipRecheck     = 60 * time.Second

	// MaxSubscriptions is the number of subscriptions one connection may hold.
	MaxSubscriptions = 1024
	// missedPongLimit is how many consecutive unanswered pings close a connection.
	missedPongLimit = 3
	// writeTimeout bounds one frame write to a client.
	writeTimeout = 10 * time.Second
	// historyParallelism is how many history queries one REQ runs at once.
	historyParallelism = 4
)

// Answers of the upgrade handler (spec 10 §2.2, §9).
const (
	msgNoCommunity     = "relay: no community is configured for this host"
	msgRestarting      = "relay restarting"
	msgConnectionLimit = "relay: connection limit reached"
)

// Config configures a Server. Zero numeric fields take the defaults above.
type Config struct {
	Resolver  Resolver
	Submitter Submitter
	Reader    Reader
	// Members is consulted when RequireRelayMembership is set.
	Members MemberChecker
	// Metrics receives the transport metrics; nil disables them.
	Metrics *metrics.Metrics
	// Audit records auth and rate-limit observations (spec 30 §4.3); nil disables it.
	Audit AuditObserver
	// Logger is the parent logger; nil discards.
	Logger *slog.Logger
	// Secure is true when RELAY_URL is wss://; NIP-42 relay tags must then be wss.
	Secure bool
	// RequireRelayMembership is BUZZ_REQUIRE_RELAY_MEMBERSHIP.
	RequireRelayMembership bool
	// MaxConnections is BUZZ_MAX_CONNECTIONS. Default 10000.
	MaxConnections int
	// MaxConcurrentHandlers is BUZZ_MAX_CONCURRENT_HANDLERS. Default 1024.
	MaxConcurrentHandlers int
	// SendBuffer is BUZZ_SEND_BUFFER, messages per connection queue. Default 1000.
	SendBuffer int
	// MaxFrameBytes is BUZZ_MAX_FRAME_BYTES. Default 524288.
	MaxFrameBytes int
	// SlowClientGraceLimit is BUZZ_SLOW_CLIENT_GRACE_LIMIT. Default 15.
	SlowClientGraceLimit int
	// HeartbeatInterval is the ping interval. Default 30 s.
	HeartbeatInterval time.Duration
	// AuthTimeout is the AUTH deadline after the challenge. Default 5 s.
	AuthTimeout time.Duration
	// MembershipRecheck is the relay-membership revalidation interval. Default 60 s.
	MembershipRecheck time.Duration
}

// Server is the WebSocket transport. It is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger
	m   *metrics.Metrics
	idx *index
	// permits is the process-wide pool of EVENT/REQ/COUNT handlers.
	permits chan struct{}
	// inflight counts running EVENT/REQ/COUNT handlers, for Shutdown.
	inflight atomic.Int64
	nsubs    atomic.Int64

	mu       sync.Mutex
	conns    map[*conn]struct{}
	reserved int
	shutting bool
}

// New returns a Server. It starts nothing; ServeHTTP serves connections and
// Run starts the background loops.
func New(cfg Config) *Server {
	cfg.MaxConnections = cmp.Or(cfg.MaxConnections, DefaultMaxConnections)
	cfg.MaxConcurrentHandlers = cmp.Or(cfg.MaxConcurrentHandlers, DefaultMaxConcurrentHandlers)
	cfg.SendBuffer = cmp.Or(cfg.SendBuffer, DefaultSendBuffer)
	cfg.MaxFrameBytes = cmp.Or(cfg.MaxFrameBytes, DefaultMaxFrameBytes)
	cfg.SlowClientGraceLimit = cmp.Or(cfg.SlowClientGraceLimit, DefaultSlowClientGraceLimit)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	cfg.AuthTimeout = cmp.Or(cfg.AuthTimeout, DefaultAuthTimeout)
	cfg.MembershipRecheck = cmp.Or(cfg.MembershipRecheck, DefaultMembershipRecheck)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:     cfg,
		log:     logger.With("component", "relay"),
		m:       cfg.Metrics,
		idx:     newIndex(),
		permits: make(chan struct{}, cfg.MaxConcurrentHandlers),
		conns:   make(map[*conn]struct{}),
	}
}

// ServeHTTP upgrades GET / to a WebSocket and serves it until it closes. In
// order: the Host is resolved (404 when unmapped), then upgrades are refused
// with 503 while shutting down or at MaxConnections. Any Origin is accepted
// (see the package documentation).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := host.Normalize(r.Host)
	if h == "" {
		plain(w, http.StatusNotFound, msgNoCommunity)
		return
	}
	tenant, err := s.cfg.Resolver.Resolve(r.Context(), h)
	if err != nil {
		s.log.Debug("host not resolved", slog.String("community", h), slog.Any("err", err))
		plain(w, http.StatusNotFound, msgNoCommunity)
		return
	}
	if msg := s.reserve(); msg != "" {
		plain(w, http.StatusServiceUnavailable, msg)
		return
	}
	defer s.release()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.log.Debug("websocket upgrade failed", slog.String("community", tenant.Host), slog.Any("err", err))
		return
	}
	if s.m != nil {
		s.m.WSConnectionsTotal.WithLabelValues(tenant.Host).Inc()
	}
	c := newConn(s, ws, tenant)
	s.track(c)
	defer s.untrack(c)
	c.serve()
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// reserve takes a connection slot, or returns the 503 body.
func (s *Server) reserve() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting {
		return msgRestarting
	}
	if s.reserved >= s.cfg.MaxConnections {
		return msgConnectionLimit
	}
	s.reserved++
	return ""
}

func (s *Server) release() {
	s.mu.Lock()
	s.reserved--
	s.mu.Unlock()
}

func (s *Server) track(c *conn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	shutting := s.shutting
	s.mu.Unlock()
	if shutting {
		c.closeWith(websocket.StatusServiceRestart, msgRestarting, nil, true)
	}
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Server) snapshot() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Connections returns the number of open (or opening) WebSockets.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved
}

// Subscriptions returns the number of live subscriptions in the index.
func (s *Server) Subscriptions() int { return int(s.nsubs.Load()) }

// acquire takes a handler permit without waiting.
func (s *Server) acquire() bool {
	select {
	case s.permits <- struct{}{}:
		s.inflight.Add(1)
		return true
	default:
		return false
	}
}

func (s *Server) releasePermit() {
	s.inflight.Add(-1)
	<-s.permits
}

// Shutdown refuses new upgrades with 503, lets handlers of frames already
// received finish, then closes every socket with 1012 "relay restarting"
// after its queued messages. It returns when every connection is gone or
// ctx ends; then the remaining sockets are dropped without a handshake.
// Calling it twice is harmless.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.shutting = true
	s.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	for _, c := range s.snapshot() {
		c.closeWith(websocket.StatusServiceRestart, msgRestarting, nil, true)
	}
	for s.Connections() > 0 {
		select {
		case <-ctx.Done():
			for _, c := range s.snapshot() {
				c.cancel()
			}
			return
		case <-tick.C:
		}
	}
}
