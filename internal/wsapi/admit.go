package wsapi

import (
	"math"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The per-address connection rate (BUZZ_WS_CONNECT_RATE): a token bucket per
// client address admits WebSocket upgrades; past it the upgrade is answered
// 429 before any WebSocket exists, which costs the relay a fraction of a
// refused AUTH. It is off unless configured: behind a proxy every client
// shares the proxy's address until BUZZ_TRUSTED_PROXIES names it.

const (
	// limitConnectRate names this limiter in rate_limit_exceeded audit
	// entries (docs/PROTOCOL.md §13.3).
	limitConnectRate = "ws_connect_per_address"
	// maxTrackedAddrs bounds the buckets held at once (about 100 bytes
	// each). Past it, a new address is admitted untracked: a storm spread
	// over that many addresses is beyond what a per-address limit can stop.
	maxTrackedAddrs = 1 << 16
	// sweepEvery is how often buckets that have refilled are forgotten.
	sweepEvery = 10 * time.Second
)

// addrLimiter is the set of buckets, keyed by client address (IPv6 by its
// /64, the block one host usually holds).
type addrLimiter struct {
	limit   rate.Limit
	burst   int
	trusted []netip.Prefix

	mu      sync.Mutex
	buckets map[netip.Addr]*rate.Limiter
	swept   time.Time
}

// newAddrLimiter returns nil (no limit) when perSecond is 0.
func newAddrLimiter(perSecond float64, burst int, trusted []netip.Prefix) *addrLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &addrLimiter{
		limit: rate.Limit(perSecond), burst: max(burst, 1), trusted: trusted,
		buckets: make(map[netip.Addr]*rate.Limiter),
	}
}

// allow takes one token from the bucket of r's client address. A request
// whose address cannot be read is admitted.
func (l *addrLimiter) allow(r *http.Request, now time.Time) bool {
	addr, ok := clientAddr(r, l.trusted)
	if !ok {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	full := len(l.buckets) >= maxTrackedAddrs
	if since := now.Sub(l.swept); since >= sweepEvery || (full && since >= time.Second) {
		l.sweep(now)
	}
	b := l.buckets[addr]
	if b == nil {
		if len(l.buckets) >= maxTrackedAddrs {
			return true
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[addr] = b
	}
	return b.AllowN(now, 1)
}

// sweep forgets the buckets that have refilled: a new bucket is the same.
func (l *addrLimiter) sweep(now time.Time) {
	l.swept = now
	for a, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, a)
		}
	}
}

// retryAfter is the Retry-After of a refusal, in whole seconds: the time
// one token takes to come back, at least 1.
func (l *addrLimiter) retryAfter() int {
	return max(1, int(math.Ceil(1/float64(l.limit))))
}

// clientAddr is the address a request comes from: the peer, or, when the
// peer is a trusted proxy, the nearest X-Forwarded-For entry that is not
// one (read right to left, since a client can write any entries on the
// left). IPv6 addresses are cut to their /64.
func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0 && isTrusted(addr, trusted); i-- {
			hop, ok := parseHop(hops[i])
			if !ok {
				break
			}
			addr = hop
		}
	}
	if addr.Is6() {
		addr = netip.PrefixFrom(addr.WithZone(""), 64).Masked().Addr()
	}
	return addr, true
}

// parseHop reads one X-Forwarded-For entry: an address, or an address
// with a port.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
