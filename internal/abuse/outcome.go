package abuse

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Outcome names beside the reason prefixes ("invalid:", "rate-limited:", …).
const (
	// OK is an accepted EVENT, a REQ that reached EOSE, a COUNT answered.
	OK = "ok"
	// Closed is a connection or request the relay (or the network) ended
	// without a prefixed answer.
	Closed = "closed"
	// Timeout is a request that got no answer within its time.
	Timeout = "timeout"
	// Other is an answer with no known prefix.
	Other = "other"
)

// prefixes are the reason prefixes an answer is counted under.
var prefixes = []string{wire.Invalid, wire.Restricted, wire.AuthRequired, wire.Blocked, wire.RateLimited, wire.Error, wire.Duplicate}

// maxFirst is how many distinct refusal texts an Outcomes keeps.
const maxFirst = 8

// Outcomes counts the attacker's answers by outcome and keeps the first
// few distinct refusal texts. It is safe for concurrent use.
type Outcomes struct {
	mu     sync.Mutex
	counts map[string]int
	first  []string
}

// NewOutcomes returns an empty count.
func NewOutcomes() *Outcomes { return &Outcomes{counts: map[string]int{}} }

// Add counts one answer. accepted and msg are an EVENT's OK; err is the
// call's error (a *client.RefusedError for a CLOSED or a non-2xx bridge
// answer). ctx is the call's context: an error after it ended is a
// timeout.
func (o *Outcomes) Add(ctx context.Context, accepted bool, msg string, err error) {
	name, text := classify(ctx, accepted, msg, err)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[name]++
	if text != "" && len(o.first) < maxFirst && !contains(o.first, text) {
		o.first = append(o.first, text)
	}
}

// Note counts n outcomes of name without a message.
func (o *Outcomes) Note(name string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[name] += n
}

// Counts returns a copy of the counts by outcome.
func (o *Outcomes) Counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int, len(o.counts))
	for k, v := range o.counts {
		out[k] = v
	}
	return out
}

// First returns the first distinct refusal texts, sorted.
func (o *Outcomes) First() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := append([]string(nil), o.first...)
	sort.Strings(out)
	return out
}

// Total is the number of answers counted.
func (o *Outcomes) Total() int {
	n := 0
	for _, v := range o.Counts() {
		n += v
	}
	return n
}

// classify names an answer and returns the text worth keeping.
func classify(ctx context.Context, accepted bool, msg string, err error) (name, text string) {
	var refused *client.RefusedError
	switch {
	case err == nil && accepted:
		return OK, ""
	case err == nil:
		return prefixOf(msg), clip(msg)
	case errors.As(err, &refused):
		n := prefixOf(refused.Message)
		if n == Other && refused.Status != 0 {
			n = "http-" + strconv.Itoa(refused.Status)
		}
		return n, clip(refused.Error())
	case errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return Timeout, ""
	default:
		return Closed, clip(err.Error())
	}
}

// prefixOf is the reason prefix of msg with its colon ("invalid:"), or
// Other.
func prefixOf(msg string) string {
	p, _, ok := strings.Cut(msg, ":")
	if ok && contains(prefixes, p) {
		return p + ":"
	}
	return Other
}

// clip shortens a refusal text for the report.
func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
