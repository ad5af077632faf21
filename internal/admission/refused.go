package admission

import (
	"sync"
	"time"
)

// refusedMemo remembers, in this process, the pubkeys past a quota until
// their window ends. A window's count only grows until it ends (locally and
// in Redis alike), so once a charge is refused every charge of that key
// before the window's end is refused too: the memo answers those without a
// Redis round trip, and lets a door refuse before work that costs more than
// the refusal (docs/OPERATIONS.md "Per-user quotas": the bridge refuses an
// exhausted signer before its NIP-98 replay row is written).
type refusedMemo struct {
	mu    sync.Mutex
	until map[localKey]time.Time
	swept time.Time
}

func newRefusedMemo() *refusedMemo {
	return &refusedMemo{until: make(map[localKey]time.Time)}
}

// The memo's times are on the clock of the counter that refused: the
// Limiter's NowFunc for a window counted in this process, the wall clock
// for one counted in Redis (whose TTLs run on real time). In production
// both are time.Now; the Limiter keeps one memo per clock.

// remember marks k refused until until. Past maxLocalWindows keys (after a
// sweep) it forgets nothing and adds nothing: the key is then only refused
// by its counter, as before.
func (m *refusedMemo) remember(k localKey, until, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.until) >= maxLocalWindows || now.Sub(m.swept) >= localSweepEvery {
		m.sweep(now)
	}
	if len(m.until) < maxLocalWindows {
		m.until[k] = until
	}
}

// left is the time k stays refused, 0 when it is not.
func (m *refusedMemo) left(k localKey, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.until[k]
	if !ok {
		return 0
	}
	if !now.Before(until) {
		delete(m.until, k)
		return 0
	}
	return until.Sub(now)
}

func (m *refusedMemo) sweep(now time.Time) {
	m.swept = now
	for k, until := range m.until {
		if !now.Before(until) {
			delete(m.until, k)
		}
	}
}
