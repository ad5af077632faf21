package wsapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/admission"
	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Limits of the transport that are not settings.
const (
	// MaxSubscriptions is the number of subscriptions one connection may hold.
	MaxSubscriptions = 1024
	// missedPongLimit is how many consecutive unanswered pings close a connection.
	missedPongLimit = 3
	// writeTimeout bounds one frame write to a client.
	writeTimeout = 10 * time.Second
)

// Answers of the upgrade handler (docs/PROTOCOL.md §2.2, §9).
const (
	msgRestarting      = "relay restarting"
	msgConnectionLimit = "relay: connection limit reached"
)

// Config configures a Server: the parts it uses and the relay's settings.
type Config struct {
	// Resolver is the tenant of each upgrade, from its Host. Required.
	Resolver *tenant.Resolver
	// Submitter is the ingest pipeline, the one door for writes. Required.
	Submitter *ingest.Pipeline
	// Reader is the read engine, the one door for reads. Required.
	Reader *read.Engine
	// Members is consulted when RequireRelayMembership is set.
	Members tenant.MemberChecker
	// Metrics receives the transport metrics. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// Audit records auth and rate-limit observations (docs/PROTOCOL.md §13.4); nil disables it.
	Audit auth.Observer
	// Logger is the parent logger; nil discards.
	Logger *slog.Logger
	// Admission charges the EVENT, REQ and COUNT frames of authenticated
	// connections to their pubkey's WebSocket quota. Nil admits every frame.
	Admission *admission.Limiter
	// Bus carries live traffic to and from the other relay processes
	// (REDIS_URL, docs/PROTOCOL.md §16): subscriptions retain its topics, REQs wait for
	// them and for its barrier. Nil for a single process.
	Bus CrossProcess
	// Settings are the relay's settings, whole (config.Load, or
	// config.Defaults where a part is built directly). The server reads
	// RELAY_URL's scheme, BUZZ_REQUIRE_RELAY_MEMBERSHIP, the connection
	// limits (BUZZ_MAX_CONNECTIONS, BUZZ_MAX_CONCURRENT_HANDLERS,
	// BUZZ_WS_CONNECT_RATE and _BURST, BUZZ_TRUSTED_PROXIES,
	// BUZZ_MAX_CONNECTIONS_PER_ADDRESS), the send queue (BUZZ_SEND_BUFFER,
	// BUZZ_SEND_BUFFER_BYTES, BUZZ_SLOW_CLIENT_GRACE_LIMIT),
	// BUZZ_MAX_FRAME_BYTES, the subscription caps of Filters, the NIP-77
	// session limits of Neg, and the heartbeat, AUTH and membership-recheck
	// intervals.
	Settings config.Config
}

// Server is the WebSocket transport. It is safe for concurrent use.
type Server struct {
	cfg Config
	// set is cfg.Settings, the relay's settings.
	set config.Config
	log *slog.Logger
	m   *metrics.Metrics
	idx *index
	// permits is the process-wide pool of EVENT/REQ/COUNT handlers.
	permits chan struct{}
	// admit is the per-address connection rate; nil when off.
	admit *addrLimiter
	// perAddr is the per-address connection cap; nil when off.
	perAddr *addrCap
	// inflight counts running EVENT/REQ/COUNT handlers, for Shutdown.
	inflight atomic.Int64
	nsubs    atomic.Int64
	// gap tracks an open gap in cross-process delivery; interrupts counts
	// the goroutines closing the subscriptions of a gap that ended.
	gap        gapState
	interrupts sync.WaitGroup
	// disp delivers to every connection but the publisher's (dispatch.go).
	disp dispatcher

	mu       sync.Mutex
	conns    map[*conn]struct{}
	reserved int
	shutting bool
}

// New returns a Server. It starts nothing; ServeHTTP serves connections and
// Run starts the background loops.
func New(cfg Config) *Server {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:     cfg,
		set:     cfg.Settings,
		log:     logger.With("component", "relay"),
		m:       cfg.Metrics,
		idx:     newIndex(),
		permits: make(chan struct{}, cfg.Settings.MaxConcurrentHandlers),
		admit:   newAddrLimiter(cfg.Settings.WSConnectRate, cfg.Settings.WSConnectBurst, cfg.Settings.TrustedProxies),
		perAddr: newAddrCap(cfg.Settings.Reads.MaxConnectionsPerAddress, cfg.Settings.TrustedProxies),
		conns:   make(map[*conn]struct{}),
	}
}

// ServeHTTP upgrades GET / to a WebSocket and serves it until it closes. In
// order: the Host is resolved (404 when unmapped), the client address's
// connection rate is taken (429 past it, when BUZZ_WS_CONNECT_RATE is set), the
// address's open connections counted (429 at MaxConnectionsPerAddress,
// when set), then
// upgrades are refused with 503 while shutting down or at MaxConnections.
// Any Origin is accepted (see the package documentation).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := s.cfg.Resolver.Resolve(r.Context(), r.Host)
	if err != nil {
		s.log.Debug("host not resolved", slog.Any("err", err))
		plain(w, http.StatusNotFound, tenant.MsgNoCommunity)
		return
	}
	if s.admit != nil && !s.admit.allow(r, time.Now()) {
		s.m.WSConnectRateLimited.Inc()
		if a := s.cfg.Audit; a != nil {
			a.RateLimited(t.CommunityID, "", limitConnectRate, "ws")
		}
		w.Header().Set("Retry-After", strconv.Itoa(s.admit.retryAfter()))
		plain(w, http.StatusTooManyRequests, wire.MsgConnectRate)
		return
	}
	releaseAddr := func() {}
	if s.perAddr != nil {
		release, ok := s.perAddr.take(r)
		if !ok {
			s.m.Reads.HTTPRejections.WithLabelValues("address_connections").Inc()
			if a := s.cfg.Audit; a != nil {
				a.RateLimited(t.CommunityID, "", limitConnectionsPerAddress, "ws")
			}
			w.Header().Set("Retry-After", "1")
			plain(w, http.StatusTooManyRequests, wire.MsgConnectRate)
			return
		}
		releaseAddr = release
	}
	if msg := s.reserve(); msg != "" {
		releaseAddr()
		plain(w, http.StatusServiceUnavailable, msg)
		return
	}
	cork := &corkWriter{writes: s.m.WSSocketWrites}
	ws, err := websocket.Accept(&corkingResponse{ResponseWriter: w, cork: cork}, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.release()
		releaseAddr()
		s.log.Debug("websocket upgrade failed", slog.String("community", t.Host), slog.Any("err", err))
		return
	}
	s.m.WSConnectionsTotal.WithLabelValues(t.Host).Inc()
	c := newConn(s, ws, t)
	c.cork = cork
	s.track(c)
	// The connection runs on a goroutine of its own and the handler
	// returns: net/http then lets go of what it kept for the request (its
	// own buffers, the request, the handler's stack), which would otherwise
	// live as long as the socket (P6, docs/PERFORMANCE.md "Idle
	// connections: what net/http kept"). A panic in its read loop ends
	// that connection alone, logged with its stack, as net/http did while
	// the loop ran in its handler.
	go func() {
		defer func() {
			if v := recover(); v != nil {
				c.log.Error("websocket connection panicked", slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				_ = ws.CloseNow()
			}
		}()
		defer releaseAddr()
		defer s.release()
		defer s.untrack(c)
		c.serve()
	}()
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
	if s.reserved >= s.set.MaxConnections {
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
	if pubkey, ok := c.identity(); ok {
		s.lastConnectionClosed(c.tenant.CommunityID, pubkey)
	}
}

// lastConnectionClosed deletes the pubkey's presence key when it has no
// other connection in the community on this process (docs/PROTOCOL.md §16.5); another
// process holding one restores it at the next heartbeat.
func (s *Server) lastConnectionClosed(communityID, pubkey string) {
	bus := s.cfg.Bus
	if bus == nil {
		return
	}
	for _, other := range s.snapshot() {
		if pk, ok := other.identity(); ok && pk == pubkey && other.tenant.CommunityID == communityID {
			return
		}
	}
	bus.ClearPresence(context.Background(), communityID, pubkey)
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
	defer s.interrupts.Wait()
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
