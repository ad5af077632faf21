package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// Bounds of the idle phase.
const (
	// idleDialers is how many idle sockets connect and authenticate at once.
	idleDialers = 32
	// idleSpareFDs is what the bench keeps for itself beyond the idle
	// sockets: the fleet, HTTP, files.
	idleSpareFDs = 256
	// heapProfileTimeout bounds the download of the relay's heap profile.
	heapProfileTimeout = 30 * time.Second
	// idleSettle is the pause after the sockets close before the last RSS
	// reading.
	idleSettle = time.Second
)

// idleConfig is the idle phase's shape (P6, docs/PERFORMANCE.md).
type idleConfig struct {
	// conns is the number of idle sockets (--idle-conns).
	conns int
	// hold is how long they stay idle once all are open (--idle-seconds).
	hold time.Duration
	// pprof is the relay's heap profile URL (--pprof), "" for none.
	pprof string
	// heapProfile is the file the profile is written to (--heap-profile).
	heapProfile string
}

// idleLine is the idle phase's figures. RSS is the VmRSS of the --pids
// group named relay (summed over its processes), read from /proc; the
// fields are left out when no relay pid was given.
type idleLine struct {
	Phase          string  `json:"phase"`
	Relay          string  `json:"relay"`
	Conns          int     `json:"conns"`
	Connected      int     `json:"connected"`
	Failed         int     `json:"failed"`
	FirstError     string  `json:"first_error,omitempty"`
	ConnectSeconds float64 `json:"connect_seconds"`
	HoldSeconds    float64 `json:"hold_seconds"`
	// Ended counts sockets the relay closed before the hold was over.
	Ended      int      `json:"ended"`
	EndedFirst []string `json:"ended_messages,omitempty"`
	// NoFile is the bench's RLIMIT_NOFILE soft limit after raising it.
	NoFile uint64 `json:"rlimit_nofile"`
	// RSS before dialing, once every socket is authenticated, at the end
	// of the hold, and idleSettle after the sockets closed, in KiB.
	RSSBefore    int64 `json:"rss_before_kib,omitempty"`
	RSSConnected int64 `json:"rss_connected_kib,omitempty"`
	RSSAfter     int64 `json:"rss_after_kib,omitempty"`
	RSSClosed    int64 `json:"rss_closed_kib,omitempty"`
	// RSSAfterMiB is RSSAfter in MiB; PerConn is (RSSAfter − RSSBefore) /
	// Connected in KiB.
	RSSAfterMiB float64           `json:"rss_after_mib,omitempty"`
	PerConn     float64           `json:"kib_per_conn,omitempty"`
	RSSError    string            `json:"rss_error,omitempty"`
	HeapProfile string            `json:"heap_profile,omitempty"`
	Truncated   bool              `json:"truncated,omitempty"`
	CPU         map[string]cpuUse `json:"cpu,omitempty"`
}

// parseIdle checks the idle flags.
func parseIdle(c *idleConfig, seconds float64) error {
	if c.conns < 1 || seconds <= 0 {
		return errf("--idle-conns and --idle-seconds must be positive")
	}
	c.hold = time.Duration(seconds * float64(time.Second))
	if (c.pprof == "") != (c.heapProfile == "") {
		return errf("--pprof and --heap-profile go together: the profile at --pprof is saved to --heap-profile")
	}
	if c.pprof != "" {
		u, err := url.Parse(c.pprof)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errf("--pprof %q: not an http(s) URL", c.pprof)
		}
		ws := "ws" + strings.TrimPrefix(c.pprof, "http")
		if err := checkLoopbackFlag("--pprof", ws); err != nil {
			return err
		}
	}
	return nil
}

// raiseNoFile lifts the bench's RLIMIT_NOFILE soft limit to the hard limit
// and returns the soft limit in force.
func raiseNoFile() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", r.Max, err)
		}
	}
	return r.Cur, nil
}

// rssKiB sums VmRSS over pids from /proc/<pid>/status.
func rssKiB(pids []int) (int64, error) {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			return 0, err
		}
		v, err := vmRSS(string(b))
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
		}
		total += v
	}
	return total, nil
}

// vmRSS reads the "VmRSS:  1234 kB" line of a /proc/<pid>/status text.
func vmRSS(status string) (int64, error) {
	for l := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(l, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, errf("unexpected VmRSS line %q", strings.TrimSpace(l))
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errf("no VmRSS line")
}

// relayPIDs is the --pids group named relay, nil when there is none.
func relayPIDs(groups []pidGroup) []int {
	for _, g := range groups {
		if g.Name == "relay" {
			return g.PIDs
		}
	}
	return nil
}

// idleConn is one idle socket: authenticated, read by one goroutine (which
// answers the relay's pings) until it ends.
type idleConn struct {
	s     *subscriber
	done  chan struct{}
	ended atomic.Pointer[string]
}

// runIdle runs the idle phase: cfg.idle.conns sockets on the first relay,
// each authenticated (NIP-42) with a key of its own, held open with
// nothing to do for cfg.idle.hold, with the relay's RSS read around it.
func runIdle(ctx context.Context, cfg config) (idleLine, error) {
	ic := cfg.idle
	relay := cfg.relays[0]
	line := idleLine{Phase: "idle", Relay: relay, Conns: ic.conns}
	nofile, err := raiseNoFile()
	if err != nil {
		return line, err
	}
	line.NoFile = nofile
	if need := uint64(ic.conns + idleSpareFDs); nofile < need {
		return line, errf("--idle-conns %d needs about %d file descriptors, RLIMIT_NOFILE allows %d (raise the hard limit: ulimit -Hn)", ic.conns, need, nofile)
	}
	pids := relayPIDs(cfg.pids)
	rss := func(dst *int64) {
		if pids == nil || line.RSSError != "" {
			return
		}
		v, err := rssKiB(pids)
		if err != nil {
			line.RSSError = err.Error()
			return
		}
		*dst = v
	}
	rss(&line.RSSBefore)
	before := sampleCPU(cfg.pids)

	t0 := time.Now()
	conns, failed, first := dialIdle(ctx, relay, ic.conns)
	line.ConnectSeconds = round3(time.Since(t0).Seconds())
	line.Connected, line.Failed = len(conns), failed
	if first != nil {
		line.FirstError = first.Error()
	}
	defer func() { closeIdle(conns) }()
	rss(&line.RSSConnected)

	t1 := time.Now()
	_ = sleepUntil(ctx, t1.Add(ic.hold))
	line.HoldSeconds = round3(time.Since(t1).Seconds())
	rss(&line.RSSAfter)
	line.CPU = cpuSince(cfg.pids, before)
	var ended rejections
	for _, c := range conns {
		if msg := c.ended.Load(); msg != nil {
			ended.add(*msg)
		}
	}
	line.Ended, line.EndedFirst = ended.n, ended.first
	if ic.pprof != "" && ctx.Err() == nil {
		if err := saveProfile(ctx, ic.pprof, ic.heapProfile); err != nil {
			return line, err
		}
		line.HeapProfile = ic.heapProfile
	}
	closeIdle(conns)
	conns = nil
	_ = sleepUntil(ctx, time.Now().Add(idleSettle))
	rss(&line.RSSClosed)
	if line.RSSAfter > 0 {
		line.RSSAfterMiB = round1(float64(line.RSSAfter) / 1024)
		if line.Connected > 0 {
			line.PerConn = round1(float64(line.RSSAfter-line.RSSBefore) / float64(line.Connected))
		}
	}
	line.Truncated = ctx.Err() != nil
	return line, nil
}

// dialIdle opens n authenticated sockets to relay, idleDialers at a time.
// Sockets that fail are counted, not retried: a relay at its connection
// limit refuses the rest, and the line says how many got in.
func dialIdle(ctx context.Context, relay string, n int) (conns []*idleConn, failed int, first error) {
	out := make([]*idleConn, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(idleDialers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				out[i], errs[i] = dialIdleOne(ctx, relay, event.GenerateKey())
			}
		})
	}
	wg.Wait()
	for i, c := range out {
		switch {
		case c != nil:
			conns = append(conns, c)
		case errs[i] != nil:
			failed++
			if first == nil {
				first = errs[i]
			}
		default: // never tried: the run was cut short
			failed++
		}
	}
	return conns, failed, first
}

// dialIdleOne connects and authenticates one idle socket and starts its
// reader.
func dialIdleOne(ctx context.Context, relay string, sk []byte) (*idleConn, error) {
	ws, _, err := websocket.Dial(ctx, relay, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", relay, err)
	}
	ws.SetReadLimit(client.MaxFrameBytes)
	s := &subscriber{ws: ws}
	if err := s.authenticate(ctx, relay, sk); err != nil {
		ws.CloseNow()
		return nil, err
	}
	c := &idleConn{s: s, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				msg := "connection ended: " + err.Error()
				c.ended.CompareAndSwap(nil, &msg)
				return
			}
		}
	}()
	return c, nil
}

// closeIdle ends every socket at once and waits for the readers. The
// reader of a socket this side closed records no end.
func closeIdle(conns []*idleConn) {
	closing := "closed by the bench"
	for _, c := range conns {
		c.ended.CompareAndSwap(nil, &closing)
		c.s.close()
	}
	for _, c := range conns {
		<-c.done
	}
}

// saveProfile downloads the profile at src into the file dst.
func saveProfile(ctx context.Context, src, dst string) error {
	ctx, cancel := context.WithTimeout(ctx, heapProfileTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: GET %s: %s (is BUZZ_PPROF_ENABLED=true on the relay?)", src, resp.Status)
	}
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("heap profile: write %s: %w", dst, err), os.Remove(dst))
	}
	return nil
}
