package soak

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/benchstat"
	"github.com/buzz-relay/buzz/internal/client"
)

// stats collects every operation's outcome and latency. Safe for
// concurrent use.
type stats struct {
	mu     sync.Mutex
	ops    map[string]*opStats
	errors map[string]int      // prefix → count
	sample map[string][]string // prefix → first distinct messages
}

type opStats struct {
	n, failed int
	lat       []timed // successful and refused operations both
}

// timed is one operation's start and latency, and its failure's prefix
// ("" when it succeeded).
type timed struct {
	at     time.Time
	d      time.Duration
	failed bool
	prefix string
}

func newStats() *stats {
	return &stats{ops: map[string]*opStats{}, errors: map[string]int{}, sample: map[string][]string{}}
}

// add records one operation of type op that started at and took d and
// ended with msg ("" for success; otherwise a refusal text or an error).
func (s *stats) add(op string, at time.Time, d time.Duration, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.ops[op]
	if o == nil {
		o = &opStats{}
		s.ops[op] = o
	}
	o.n++
	if msg == "" {
		o.lat = append(o.lat, timed{at, d, false, ""})
		return
	}
	p := prefixOf(msg)
	o.lat = append(o.lat, timed{at, d, true, p})
	o.failed++
	s.errors[p]++
	if len(s.sample[p]) < 3 && !slices.Contains(s.sample[p], msg) {
		s.sample[p] = append(s.sample[p], msg)
	}
}

// prefixOf classifies a failure: the relay's machine-readable prefix
// (error:, rate-limited:, …), an HTTP status, or the transport's kind.
func prefixOf(msg string) string {
	if strings.HasPrefix(msg, "hang:") {
		return "hang"
	}
	if p, _, ok := strings.Cut(msg, ":"); ok && p != "" && !strings.ContainsAny(p, " /") {
		return p + ":"
	}
	switch {
	case strings.HasPrefix(msg, "HTTP "):
		return strings.Fields(msg)[0] + " " + strings.Fields(msg)[1]
	default:
		return "transport"
	}
}

// errText turns a client error into the text stats classifies: the
// relay's refusal message when there is one, "hang" for a timeout,
// "transport: …" for a lost connection.
func errText(err error) string {
	var refused *client.RefusedError
	switch {
	case errors.As(err, &refused):
		switch {
		case refused.Status != 0 && prefixOf(refused.Message) == "transport":
			// A bridge answer without a prefix (500 internal server error).
			return "HTTP " + strconv.Itoa(refused.Status) + " " + refused.Message
		case refused.Message != "":
			return refused.Message
		}
		return refused.Error()
	case errors.Is(err, errHang):
		return "hang: " + err.Error()
	default:
		return "transport: " + err.Error()
	}
}

// errHang marks an operation that did not finish within --op-timeout.
var errHang = errors.New("no answer within the operation timeout")

// opSummary is one operation type in the summary.
type opSummary struct {
	Count  int     `json:"count"`
	Failed int     `json:"failed"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func (s *stats) summary() (map[string]opSummary, map[string]int, map[string][]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]opSummary, len(s.ops))
	total := 0
	for name, o := range s.ops {
		lat := make([]time.Duration, len(o.lat))
		for i, x := range o.lat {
			lat[i] = x.d
		}
		slices.Sort(lat)
		out[name] = opSummary{Count: o.n, Failed: o.failed, P50ms: ms(quantile(lat, 0.5)),
			P99ms: ms(quantile(lat, 0.99)), MaxMs: ms(quantile(lat, 1))}
		total += o.n
	}
	errs := make(map[string]int, len(s.errors))
	for k, v := range s.errors {
		errs[k] = v
	}
	samples := make(map[string][]string, len(s.sample))
	for k, v := range s.sample {
		samples[k] = slices.Clone(v)
	}
	return out, errs, samples, total
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	return benchstat.Percentile(sorted, q*100)
}

// ms is d in milliseconds to a tenth, the summary's precision.
func ms(d time.Duration) float64 { return benchstat.Millis(d, 1) }

// between is the p99 latency, and the number of failures, by operation
// type, of the operations that started between from and to.
func (s *stats) between(from, to time.Time) (p99 map[string]float64, failed map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p99, failed = map[string]float64{}, map[string]int{}
	for name, o := range s.ops {
		var lat []time.Duration
		for _, x := range o.lat {
			if !x.at.Before(from) && x.at.Before(to) {
				lat = append(lat, x.d)
				if x.failed {
					failed[name]++
				}
			}
		}
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		p99[name] = ms(quantile(lat, 0.99))
	}
	return p99, failed
}

// during counts the operations that were under way at some moment between
// from and to (started before to, answered at or after from), and those
// of them that failed, by prefix.
func (s *stats) during(from, to time.Time) (ops int, failed map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed = map[string]int{}
	for _, o := range s.ops {
		for _, x := range o.lat {
			if x.at.Before(to) && !x.at.Add(x.d).Before(from) {
				ops++
				if x.failed {
					failed[x.prefix]++
				}
			}
		}
	}
	return ops, failed
}
