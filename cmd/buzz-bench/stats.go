package main

import (
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/benchstat"
)

// latencies summarises one phase's request latencies in milliseconds.
type latencies struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func summarise(d []time.Duration) latencies {
	slices.Sort(d)
	ms := func(p float64) float64 { return benchstat.Millis(benchstat.Percentile(d, p), 3) }
	return latencies{P50: ms(50), P90: ms(90), P99: ms(99), Max: ms(100)}
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
