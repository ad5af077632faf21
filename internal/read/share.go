package read

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Read shares (docs/OPERATIONS.md "Read deadlines and shares"). A share is
// one database connection a read may hold. The process has Max of them,
// fewer than the writer pool, so the connections left over are ingest's
// whatever readers do; one connection (a WebSocket, or one HTTP client
// address) holds at most PerConnection, one pubkey at most PerPubkey across
// its connections. Every read of every surface takes one share in Open and
// gives it back in Close; a REQ's history takes up to historyParallelism−1
// more while they are free and runs its filters one at a time otherwise.
// A read that finds a share full waits at most AcquireTimeout, then is
// refused with MsgTooManyReads.

// ShareConfig bounds concurrent reads.
type ShareConfig struct {
	// Max is the process's shares (BUZZ_MAX_CONCURRENT_READS). Zero means
	// no limit.
	Max int
	// PerConnection is one connection's shares (BUZZ_READS_PER_CONNECTION).
	// Zero means no limit.
	PerConnection int
	// PerPubkey is one pubkey's shares (BUZZ_READS_PER_PUBKEY). Zero means
	// no limit.
	PerPubkey int
	// AcquireTimeout is how long a read waits for its share
	// (BUZZ_DB_ACQUIRE_TIMEOUT_MS). Default 3 s.
	AcquireTimeout time.Duration
	// Timeout is every read's deadline (BUZZ_READ_STATEMENT_TIMEOUT_MS),
	// counted from the moment its share is granted. Zero means none.
	Timeout time.Duration
	// TimePerSecond is the read time one reader earns per second
	// (BUZZ_READ_TIME_PER_SECOND_MS), TimeBurst what it may save up
	// (BUZZ_READ_TIME_BURST_MS): readtime.go. Zero TimePerSecond means no
	// read-time budget.
	TimePerSecond, TimeBurst time.Duration
}

// Share scopes, the values of buzz_read_share_rejections_total's label.
const (
	scopeProcess    = "process"
	scopeConnection = "connection"
	scopePubkey     = "pubkey"
	scopeReadTime   = "read_time"
)

// shares counts the shares held, by process, connection and pubkey.
type shares struct {
	cfg ShareConfig
	m   *metrics.Metrics

	mu      sync.Mutex
	total   int
	conns   map[string]int
	pubkeys map[string]int
	// waiters are the reads waiting for a share, oldest first. A share
	// given back goes to the oldest waiter whose scopes all have room: it
	// is taken for the waiter, which alone is woken. (Waking every waiter
	// to race for it put dozens of goroutines on the run queue at each
	// release when one pubkey flooded reads.)
	waiters list.List
}

// shareWaiter is one read waiting in acquire.
type shareWaiter struct {
	conn, pubkey string
	// ready is closed once granted is set: the share is taken for it.
	ready   chan struct{}
	granted bool
}

func newShares(cfg ShareConfig, m *metrics.Metrics) *shares {
	if cfg.AcquireTimeout <= 0 {
		cfg.AcquireTimeout = 3 * time.Second
	}
	return &shares{cfg: cfg, m: m, conns: map[string]int{}, pubkeys: map[string]int{}}
}

// full returns the scope that has no share left for (conn, pubkey), ""
// when one may be taken. s.mu must be held.
func (s *shares) fullLocked(conn, pubkey string) string {
	switch {
	case s.cfg.Max > 0 && s.total >= s.cfg.Max:
		return scopeProcess
	case conn != "" && s.cfg.PerConnection > 0 && s.conns[conn] >= s.cfg.PerConnection:
		return scopeConnection
	case pubkey != "" && s.cfg.PerPubkey > 0 && s.pubkeys[pubkey] >= s.cfg.PerPubkey:
		return scopePubkey
	}
	return ""
}

// takeLocked takes one share. s.mu must be held.
func (s *shares) takeLocked(conn, pubkey string) {
	s.total++
	if conn != "" {
		s.conns[conn]++
	}
	if pubkey != "" {
		s.pubkeys[pubkey]++
	}
	s.m.Reads.InFlight.Inc()
}

// acquire takes one share for (conn, pubkey), waiting at most the acquire
// timeout, in arrival order with the other waiters. It returns a *Refusal
// (CodeTooManyReads) when the wait ends with a share still full, and ctx's
// error when ctx ends first.
func (s *shares) acquire(ctx context.Context, conn, pubkey string) error {
	s.mu.Lock()
	if s.fullLocked(conn, pubkey) == "" {
		s.takeLocked(conn, pubkey)
		s.mu.Unlock()
		return nil
	}
	w := &shareWaiter{conn: conn, pubkey: pubkey, ready: make(chan struct{})}
	e := s.waiters.PushBack(w)
	s.mu.Unlock()
	timer := time.NewTimer(s.cfg.AcquireTimeout)
	defer timer.Stop()
	select {
	case <-w.ready:
		return nil
	case <-timer.C:
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted {
			return nil
		}
		s.waiters.Remove(e)
		scope := s.fullLocked(conn, pubkey)
		if scope == "" { // room now, not yet handed out
			s.takeLocked(conn, pubkey)
			return nil
		}
		s.m.Reads.ShareRejections.WithLabelValues(scope).Inc()
		return refuse(CodeTooManyReads, wire.MsgTooManyReads)
	case <-ctx.Done():
		s.mu.Lock()
		granted := w.granted
		if !granted {
			s.waiters.Remove(e)
		}
		s.mu.Unlock()
		if granted { // handed to a read that is gone: give it on
			s.release(conn, pubkey, 1)
		}
		return ctx.Err()
	}
}

// handOffLocked gives free shares to the oldest waiters that have room in
// every scope. s.mu must be held.
func (s *shares) handOffLocked() {
	for e := s.waiters.Front(); e != nil; {
		if s.cfg.Max > 0 && s.total >= s.cfg.Max {
			return
		}
		next := e.Next()
		w := e.Value.(*shareWaiter)
		if s.fullLocked(w.conn, w.pubkey) == "" {
			s.takeLocked(w.conn, w.pubkey)
			w.granted = true
			close(w.ready)
			s.waiters.Remove(e)
		}
		e = next
	}
}

// tryAcquire takes one share for (conn, pubkey) only if one is free now.
func (s *shares) tryAcquire(conn, pubkey string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fullLocked(conn, pubkey) != "" {
		return false
	}
	s.takeLocked(conn, pubkey)
	return true
}

// release gives back n shares of (conn, pubkey).
func (s *shares) release(conn, pubkey string, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total -= n
	if conn != "" {
		if s.conns[conn] -= n; s.conns[conn] <= 0 {
			delete(s.conns, conn)
		}
	}
	if pubkey != "" {
		if s.pubkeys[pubkey] -= n; s.pubkeys[pubkey] <= 0 {
			delete(s.pubkeys, pubkey)
		}
	}
	s.m.Reads.InFlight.Sub(float64(n))
	s.handOffLocked()
}

// grant is the shares one Read holds; Close gives them back once, and
// pays the read's time to its reader's budget (readtime.go).
type grant struct {
	s            *shares
	conn, pubkey string
	mu           sync.Mutex
	n            int

	rt       *readTime
	reader   string        // the bucket paid
	reserved float64       // ms reserved by readTime.start
	start    time.Time     // when the first share was granted
	extra    time.Duration // time held by the shares taken with more
	parallel []time.Time   // when each share still held from more was taken
}

// more takes one more share for the same read if one is free now.
func (g *grant) more() bool {
	if g == nil || !g.s.tryAcquire(g.conn, g.pubkey) {
		return false
	}
	g.mu.Lock()
	g.n++
	g.parallel = append(g.parallel, time.Now())
	g.mu.Unlock()
	return true
}

// less gives back one share taken with more.
func (g *grant) less() {
	g.mu.Lock()
	g.n--
	if k := len(g.parallel) - 1; k >= 0 {
		g.extra += time.Since(g.parallel[k])
		g.parallel = g.parallel[:k]
	}
	g.mu.Unlock()
	g.s.release(g.conn, g.pubkey, 1)
}

// close gives back every share still held and, the first time, pays the
// read's time: the first share's, and each parallel one's.
func (g *grant) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	n := g.n
	g.n = 0
	settle := !g.start.IsZero()
	var cost time.Duration
	if settle {
		now := time.Now()
		cost = now.Sub(g.start) + g.extra
		for _, at := range g.parallel {
			cost += now.Sub(at)
		}
		g.start, g.parallel = time.Time{}, nil
	}
	g.mu.Unlock()
	// The read pays before its shares go back: a read waiting for one of
	// them is judged on the budget with this cost taken out.
	if settle {
		g.rt.settle(g.reader, g.reserved, cost)
	}
	g.s.release(g.conn, g.pubkey, n)
}
