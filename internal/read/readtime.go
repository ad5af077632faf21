package read

import (
	"math"
	"sync"
	"time"
)

// Read time (docs/OPERATIONS.md "Read deadlines and shares"). Shares bound
// how many database connections one reader holds; they do not bound how
// much of the machine its reads use, since a reader that keeps its shares
// busy with heavy reads (a thousand rows each, counts over a large
// community) keeps the CPU busy that honest writers and readers need. So
// each reader also has a read-time budget: a token bucket of milliseconds,
// filled at Rate per second up to Burst, from which every read pays the
// time it held its shares (from the grant to Close, every parallel share
// counted). A read starts only while its reader's bucket is above zero when
// its share is granted (a read that queued for a share is judged then),
// and reserves what the reader's previous read cost, so a reader in debt
// reads one read at a time, at the rate its budget refills, however many
// shares it has. What a read costs is known only when it ends, so the
// bucket may go below zero: that debt is paid before the next read.
//
// The reader is the authenticated pubkey, or the connection (the
// WebSocket, or the HTTP client address) when there is none. The buckets
// are this process's: a reader's reads on two processes have two budgets,
// as they have two CPUs.

// readTime is the read-time buckets of every reader.
type readTime struct {
	rate  float64 // ms per second
	burst float64 // ms
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*timeBucket
	// sweepAt is the map size at which full, idle buckets are dropped.
	sweepAt int
}

// timeBucket is one reader's budget.
type timeBucket struct {
	tokens float64   // ms; below zero is debt
	at     time.Time // when tokens was last refilled
	last   float64   // what the reader's last read cost, ms: the reservation
	open   int       // reads started and not yet settled
}

// minSweep is the map size below which buckets are never swept.
const minSweep = 1024

func newReadTime(perSecond, burst time.Duration) *readTime {
	if perSecond <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = time.Second
	}
	return &readTime{
		rate:    float64(perSecond) / float64(time.Millisecond),
		burst:   float64(burst) / float64(time.Millisecond),
		now:     time.Now,
		buckets: map[string]*timeBucket{},
		sweepAt: minSweep,
	}
}

// refillLocked brings b's tokens up to now. t.mu must be held.
func (t *readTime) refillLocked(b *timeBucket, now time.Time) {
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = math.Min(t.burst, b.tokens+dt*t.rate)
	}
	b.at = now
}

// start admits one read of reader: it returns the milliseconds reserved
// (given to settle) and true, or, when the reader's bucket is empty, the
// whole seconds until it is not and false. A nil readTime admits every read.
func (t *readTime) start(reader string) (reserved float64, retry int, ok bool) {
	if t == nil {
		return 0, 0, true
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[reader]
	if b == nil {
		t.sweepLocked(now)
		b = &timeBucket{tokens: t.burst, at: now}
		t.buckets[reader] = b
	} else {
		t.refillLocked(b, now)
	}
	if b.tokens <= 0 {
		return 0, max(1, int(math.Ceil(-b.tokens/t.rate))), false
	}
	b.tokens -= b.last
	b.open++
	return b.last, 0, true
}

// settle charges a read that started with reserved what it cost.
func (t *readTime) settle(reader string, reserved float64, cost time.Duration) {
	if t == nil {
		return
	}
	ms := float64(cost) / float64(time.Millisecond)
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[reader]
	if b == nil { // cannot happen: a bucket with a read open is never swept
		return
	}
	t.refillLocked(b, t.now())
	b.tokens += reserved - ms
	b.last = ms
	b.open--
}

// sweepLocked drops the buckets that are full and have no read open, once
// the map has grown to sweepAt, so it holds only readers that read
// recently. t.mu must be held.
func (t *readTime) sweepLocked(now time.Time) {
	if len(t.buckets) < t.sweepAt {
		return
	}
	for k, b := range t.buckets {
		t.refillLocked(b, now)
		if b.open == 0 && b.tokens >= t.burst {
			delete(t.buckets, k)
		}
	}
	t.sweepAt = max(minSweep, 2*len(t.buckets))
}
