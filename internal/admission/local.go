package admission

import (
	"sync"
	"time"
)

// Bounds of the per-process counters.
const (
	// maxLocalWindows bounds the windows held at once (about 200 bytes
	// each). Past it, after a sweep, a new key is admitted uncounted: a
	// flood spread over that many pubkeys is beyond a per-pubkey quota.
	maxLocalWindows = 1 << 16
	// localSweepEvery is how often ended windows are forgotten.
	localSweepEvery = 10 * time.Second
)

// localKey names one pubkey's window of one quota in one community.
type localKey struct {
	limit     Limit
	community string
	pubkey    string
}

// localWindow is a fixed window: count charges until reset.
type localWindow struct {
	count int
	reset time.Time
}

// localCounter counts fixed windows in this process, with the semantics of
// the Redis script: the first charge opens a window of the quota's length.
type localCounter struct {
	mu      sync.Mutex
	windows map[localKey]*localWindow
	swept   time.Time
}

func newLocalCounter() *localCounter {
	return &localCounter{windows: make(map[localKey]*localWindow)}
}

// incr adds one to k's window and returns its count and the time left.
func (lc *localCounter) incr(k localKey, window time.Duration, now time.Time) (int, time.Duration) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	full := len(lc.windows) >= maxLocalWindows
	if since := now.Sub(lc.swept); since >= localSweepEvery || (full && since >= time.Second) {
		lc.sweep(now)
	}
	w := lc.windows[k]
	if w != nil && !now.Before(w.reset) {
		w.count, w.reset = 0, now.Add(window)
	}
	if w == nil {
		if len(lc.windows) >= maxLocalWindows {
			return 0, 0
		}
		w = &localWindow{reset: now.Add(window)}
		lc.windows[k] = w
	}
	w.count++
	return w.count, w.reset.Sub(now)
}

// sweep forgets the windows that have ended: a new one is the same.
func (lc *localCounter) sweep(now time.Time) {
	lc.swept = now
	for k, w := range lc.windows {
		if !now.Before(w.reset) {
			delete(lc.windows, k)
		}
	}
}

// size is the number of windows held.
func (lc *localCounter) size() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.windows)
}
