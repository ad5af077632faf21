package httpapi

import (
	"net"
	"net/http"
)

// The bridge's admission (docs/OPERATIONS.md "HTTP timeouts and
// concurrency"): at most BUZZ_HTTP_MAX_CONCURRENT bridge requests are served at
// once; one more is answered 503 {"error":"error: server busy"} with
// Retry-After, before its body is read, so a flood costs the relay no
// database work and no memory for bodies. NIP-11, health and WebSocket
// upgrades are not counted: upgrades have their own limits.

// enter takes a bridge slot without waiting; false means the bridge is full.
func (s *Server) enter() bool {
	if s.busy == nil {
		return true
	}
	select {
	case s.busy <- struct{}{}:
		return true
	default:
		return false
	}
}

// leave gives back the slot enter took.
func (s *Server) leave() {
	if s.busy != nil {
		<-s.busy
	}
}

// clientAddr is r's client address for its share of concurrent reads.
func (s *Server) clientAddr(r *http.Request) string {
	if ws := s.cfg.WebSocket; ws != nil {
		return ws.ClientAddr(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
