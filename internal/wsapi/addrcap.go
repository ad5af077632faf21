package wsapi

import (
	"net/http"
	"net/netip"
	"sync"
)

// The per-address connection cap (BUZZ_MAX_CONNECTIONS_PER_ADDRESS): one
// client address may hold at most that many open WebSockets; one more
// upgrade is answered 429 before any WebSocket exists. The address is the
// one the connection rate uses (clientAddr: BUZZ_TRUSTED_PROXIES, IPv6 by
// its /64). Off unless configured: behind a proxy every client shares the
// proxy's address until BUZZ_TRUSTED_PROXIES names it.

// limitConnectionsPerAddress names this limit in rate_limit_exceeded
// audit entries.
const limitConnectionsPerAddress = "ws_connections_per_address"

// addrCap counts the open connections of each client address.
type addrCap struct {
	max     int
	trusted []netip.Prefix

	mu   sync.Mutex
	open map[netip.Addr]int
}

// newAddrCap returns nil (no cap) when max is 0.
func newAddrCap(max int, trusted []netip.Prefix) *addrCap {
	if max <= 0 {
		return nil
	}
	return &addrCap{max: max, trusted: trusted, open: make(map[netip.Addr]int)}
}

// take counts one more connection of r's client address and returns the
// function that uncounts it, or false when the address is at its cap. A
// request whose address cannot be read is admitted uncounted.
func (c *addrCap) take(r *http.Request) (release func(), ok bool) {
	addr, known := clientAddr(r, c.trusted)
	if !known {
		return func() {}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[addr] >= c.max {
		return nil, false
	}
	c.open[addr]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.open[addr]--; c.open[addr] <= 0 {
			delete(c.open, addr)
		}
	}, true
}

// ClientAddr is r's client address as the WebSocket door's per-address
// limits see it (BUZZ_TRUSTED_PROXIES, IPv6 by its /64), "" when it cannot
// be read. The HTTP bridge keys its share of concurrent reads on it.
func (s *Server) ClientAddr(r *http.Request) string {
	addr, ok := clientAddr(r, s.set.TrustedProxies)
	if !ok {
		return ""
	}
	return addr.String()
}
