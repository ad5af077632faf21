package main

import (
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, or 0 when it is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencies summarises one phase's request latencies in milliseconds.
type latencies struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func summarise(d []time.Duration) latencies {
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return math.Round(float64(x)/1e3) / 1e3 }
	return latencies{P50: ms(percentile(d, 50)), P90: ms(percentile(d, 90)), P99: ms(percentile(d, 99)), Max: ms(percentile(d, 100))}
}

// checkLoopback refuses any --relay URL whose host is not localhost,
// 127.0.0.0/8 or ::1. Names other than localhost are not resolved.
func checkLoopback(relay string) error { return checkLoopbackFlag("--relay", relay) }

// checkLoopbackFlag is checkLoopback for the URL of the flag name.
func checkLoopbackFlag(name, relay string) error {
	u, err := url.Parse(relay)
	if err != nil || u.Host == "" {
		return errf("%s %q is not a URL", name, relay)
	}
	switch u.Scheme {
	case "ws", "wss":
	default:
		return errf("%s %q: scheme must be ws or wss", name, relay)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errf("%s %q: buzz-bench only targets loopback hosts (localhost, 127.0.0.0/8, ::1)", name, relay)
}

// hostOf is the host (and port) of a relay URL, "" when it does not parse.
func hostOf(relay string) string {
	u, err := url.Parse(relay)
	if err != nil {
		return ""
	}
	return u.Host
}
