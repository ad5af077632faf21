package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/event"
)

// faultReport is what one injected fault did and how the deployment came
// back from it.
type faultReport struct {
	Name  string  `json:"name"`
	AtS   float64 `json:"at_s"`  // seconds into the traffic
	ForS  float64 `json:"for_s"` // how long the fault lasted
	Error string  `json:"error,omitempty"`
	// Recovered: every relay answered /_readiness 200 afterwards without
	// any action but the fault's own end (a restart of what was killed).
	Recovered  bool    `json:"recovered"`
	RecoveredS float64 `json:"recovered_after_s"`
	// Observed holds the fault's own findings (readiness during an
	// outage, the slow client's close, the storm's rate, …).
	Observed map[string]any `json:"observed,omitempty"`
	// HonestP99ms is the p99 of the soak's own operations that started
	// while the fault lasted, by type.
	HonestP99ms map[string]float64 `json:"honest_p99_ms,omitempty"`
	// HonestFailed counts those operations that failed, by type.
	HonestFailed map[string]int `json:"honest_failed,omitempty"`
	// BeforeP99ms is the same p99 over a window of the same length that
	// ended when the fault began: the run's own baseline for HonestP99ms
	// (in a run with several faults it may hold the end of an earlier one).
	BeforeP99ms map[string]float64 `json:"before_p99_ms,omitempty"`

	began, ended time.Time
}

// inject runs one fault against the deployment and reports it.
func (s *soakRun) inject(ctx context.Context, name string) faultReport {
	r := faultReport{Name: name, AtS: time.Since(s.trafficStart).Seconds(), Observed: map[string]any{}, began: time.Now()}
	var err error
	switch name {
	case "kill-relay":
		err = s.killRelay(ctx, &r)
	case "pg-fast":
		err = s.stopPostgres(ctx, &r, false)
	case "pg-immediate":
		err = s.stopPostgres(ctx, &r, true)
	case "failover":
		err = s.failover(ctx, &r)
	case "redis":
		err = s.stopRedis(ctx, &r)
	case "listener":
		err = s.failListener(ctx, &r)
	case "slow-client":
		err = s.slowClient(ctx, &r)
	case "storm":
		err = s.storm(ctx, &r)
	case "abuse":
		err = s.abuseFault(ctx, &r)
	}
	r.ended = time.Now()
	r.ForS = round1(r.ended.Sub(r.began).Seconds())
	if err != nil {
		r.Error = err.Error()
	}
	// Recovery: every relay ready again, with nothing done by hand.
	start := time.Now()
	r.Recovered = true
	for _, p := range s.relays {
		if err := p.waitReadiness(ctx, http.StatusOK, time.Minute); err != nil {
			r.Recovered = false
			if r.Error == "" {
				r.Error = "not recovered: " + err.Error()
			}
		}
	}
	r.RecoveredS = round1(time.Since(start).Seconds())
	r.AtS = round1(r.AtS)
	return r
}

// killRelay sends SIGKILL to the first relay and starts it again.
func (s *soakRun) killRelay(ctx context.Context, r *faultReport) error {
	p := s.relays[0]
	r.Observed["pid_killed"] = p.pid()
	p.signal(syscall.SIGKILL, time.Second)
	return p.start(ctx)
}

// stopPostgres shuts the database down (fast or immediate), watches the
// relays while it is down, and starts it again after --pg-down. With a
// standby it is the current primary that stops (Observed "primary": "a"
// or "b", the member's place), and the standby streams again once it is
// back.
func (s *soakRun) stopPostgres(ctx context.Context, r *faultReport, immediate bool) error {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if len(s.db.members) > 1 {
		r.Observed["primary"] = s.db.current().name
	}
	if err := s.db.shutdown(sctx, immediate); err != nil {
		return err
	}
	up := time.Now().Add(s.cfg.pgDown)
	seen503 := false
	for time.Now().Before(up) && ctx.Err() == nil {
		if s.relays[0].readiness() == http.StatusServiceUnavailable {
			seen503 = true
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	r.Observed["readiness_503_while_down"] = seen503
	if err := s.db.start(ctx); err != nil {
		return err
	}
	if !seen503 {
		return errors.New("readiness never answered 503 while PostgreSQL was down")
	}
	return nil
}

// failover is the writer's failover (docs/OPERATIONS.md "High
// availability"): the primary dies with every backend (SIGKILL, as with a
// crashed host), every relay's /_readiness answers 503 while no writer
// answers, then the synchronous standby is promoted (pg_ctl promote). The
// relays find the new writer by themselves through their multi-host
// DATABASE_URL; nothing is done to them. It records the time without a
// writer (from the kill to the first OK true of the soak's ledgered writes
// after the promotion began, and to the last relay's readiness 200), and
// the soak's operations under way meanwhile, with those that failed by
// prefix. Then it clones a new synchronous standby from the new primary
// into the dead one's place, so the database keeps its topology and a
// later fault acts on the new primary.
func (s *soakRun) failover(ctx context.Context, r *faultReport) error {
	if !s.db.hasStandby() {
		return errors.New("failover: the soak's database has no synchronous standby")
	}
	r.Observed["primary_killed"] = s.db.current().name
	watch := watchReadiness(ctx, s.relays)
	defer watch.stop()
	killed := time.Now()
	pid, err := s.db.killPrimary(ctx)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	r.Observed["postmaster_killed"] = pid
	after := func(t time.Time) float64 { return round2(t.Sub(killed).Seconds()) }

	// No writer: every relay must say so before the promotion (a failover
	// manager promotes once it has seen the primary gone, too).
	err = poll(ctx, 20*time.Millisecond, time.Now().Add(30*time.Second), func() (bool, error) {
		_, all := watch.last(false)
		return all, nil
	})
	seen503 := err == nil
	r.Observed["readiness_503_without_writer"] = seen503
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if down, all := watch.last(false); all {
		r.Observed["readiness_503_after_s"] = after(down)
	}

	promoting := time.Now()
	r.Observed["promotion_began_after_s"] = after(promoting)
	if err := s.db.promote(ctx); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	r.Observed["promoted_after_s"] = after(time.Now())

	// A writer again: the first write acknowledged after the promotion
	// began (the standby was read-only until then, and the old primary's
	// backends are dead, so it was committed on the new primary), and
	// every relay ready.
	var back time.Time
	err = poll(ctx, 20*time.Millisecond, time.Now().Add(2*time.Minute), func() (bool, error) {
		t, ok := s.load.ledger.firstStoredSince(promoting)
		back = t
		return ok, nil
	})
	if errors.Is(err, errTimedOut) {
		return errors.New("failover: no write was acknowledged within 2 min of the promotion")
	}
	if err != nil {
		return err
	}
	r.Observed["no_writer_s"] = after(back)
	err = poll(ctx, 20*time.Millisecond, time.Now().Add(time.Minute), func() (bool, error) {
		_, all := watch.last(true)
		return all, nil
	})
	if errors.Is(err, errTimedOut) {
		return errors.New("failover: a relay's readiness was not 200 again within 1 min of the first write")
	}
	if err != nil {
		return err
	}
	up, _ := watch.last(true)
	r.Observed["readiness_200_after_s"] = after(up)
	ops, failed := s.load.stats.during(killed, back)
	r.Observed["ops_without_writer"] = ops
	r.Observed["failed_without_writer"] = failed
	if !seen503 {
		return errors.New("failover: readiness never answered 503 on every relay while no writer answered")
	}

	rebuilding := time.Now()
	if err := s.db.rebuildStandby(ctx); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	r.Observed["standby_rebuilt_s"] = round1(time.Since(rebuilding).Seconds())
	r.Observed["primary"] = s.db.current().name
	return nil
}

// readinessWatch polls each relay's /_readiness every 50 ms, each relay on
// its own (a busy relay's answer may take the check's 2 s), and records
// when it first answered 503 and, after that, first 200 again.
type readinessWatch struct {
	mu       sync.Mutex
	down, up []time.Time // per relay; zero until seen
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

func watchReadiness(ctx context.Context, relays []*relayProc) *readinessWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &readinessWatch{down: make([]time.Time, len(relays)), up: make([]time.Time, len(relays)), cancel: cancel}
	for i, p := range relays {
		w.done.Go(func() {
			for ctx.Err() == nil {
				st := p.readiness()
				at := time.Now()
				w.mu.Lock()
				switch {
				case st == http.StatusServiceUnavailable && w.down[i].IsZero():
					w.down[i] = at
				case st == http.StatusOK && !w.down[i].IsZero() && w.up[i].IsZero():
					w.up[i] = at
				}
				seenBoth := !w.up[i].IsZero()
				w.mu.Unlock()
				if seenBoth {
					return
				}
				sleepCtx(ctx, 50*time.Millisecond) // polling interval
			}
		})
	}
	return w
}

// last is the latest of the relays' first 503s (up false) or first 200s
// after them (up true), and whether every relay has had one.
func (w *readinessWatch) last(up bool) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	times := w.down
	if up {
		times = w.up
	}
	var latest time.Time
	for _, t := range times {
		if t.IsZero() {
			return time.Time{}, false
		}
		if t.After(latest) {
			latest = t
		}
	}
	return latest, true
}

// stop ends the polling and waits for it (at most one readiness check).
func (w *readinessWatch) stop() {
	w.cancel()
	w.done.Wait()
}

// stopRedis kills the Redis server the relays share and starts a fresh one
// on the same port after --redis-down.
func (s *soakRun) stopRedis(ctx context.Context, r *faultReport) error {
	s.redis.kill()
	up := time.Now().Add(s.cfg.redisOff)
	seenDown := false
	for time.Now().Before(up) && ctx.Err() == nil {
		if st := s.relays[0].status(); st["redis"] == "disconnected" {
			seenDown = true
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	r.Observed["status_redis_disconnected"] = seenDown
	if err := s.redis.start(ctx); err != nil {
		return err
	}
	// Each relay reconnects by itself (backoff up to 30 s).
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range s.relays {
		err := poll(ctx, 200*time.Millisecond, deadline, func() (bool, error) { return p.status()["redis"] == "connected", nil })
		if errors.Is(err, errTimedOut) {
			return fmt.Errorf("%s did not reconnect to Redis within 90 s", p.name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// failListener makes the endpoint answer 503 for the first half of
// --listener-down and hold every request until the relay gives up for the
// second half.
func (s *soakRun) failListener(ctx context.Context, r *faultReport) error {
	before := s.endpoint.refusedCount()
	s.endpoint.setMode(answer503)
	sleepCtx(ctx, s.cfg.listenerDown/2)
	s.endpoint.setMode(answerTimeout)
	sleepCtx(ctx, s.cfg.listenerDown-s.cfg.listenerDown/2)
	s.endpoint.setMode(answerOK)
	r.Observed["notifications_failed"] = s.endpoint.refusedCount() - before
	return nil
}

// slowClient opens an authenticated socket with a tiny receive buffer,
// asks for as much history as it can and never reads. The relay must close
// it ("slow client") while its memory stays bounded; reading afterwards
// must end in that close.
func (s *soakRun) slowClient(ctx context.Context, r *faultReport) error {
	p := s.relays[0]
	comm := s.comms[0]
	rssBefore := rssBytes(p.pid())
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := rawAuth(dctx, p.wsURL, comm.host, hc, event.GenerateKey())
	if err != nil {
		return fmt.Errorf("slow client: %w", err)
	}
	defer c.CloseNow()
	disconnects := func() float64 { return p.metric("buzz_ws_backpressure_disconnects_total") }
	base := disconnects()
	// Ask for history again and again (each REQ a fresh page of the
	// channel), never reading, until the relay gives up on the socket.
	deadline := time.Now().Add(90 * time.Second)
	sent, closed := 0, false
	peak := rssBefore
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if disconnects() > base {
			closed = true
			break
		}
		frame, _ := json.Marshal([]any{"REQ", "h" + strconv.Itoa(sent%50), map[string]any{"kinds": []int{9}, "#h": []string{comm.channel}, "limit": 500}})
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		werr := c.Write(wctx, websocket.MessageText, frame)
		wcancel()
		if werr == nil {
			sent++
		} else if wctx.Err() == nil {
			// The relay closed the socket without the metric (its write
			// timeout, docs/OPERATIONS.md): the write fails on the closed connection.
			closed = true
			r.Observed["noticed_by"] = "write failed: " + werr.Error()
			break
		}
		peak = max(peak, rssBytes(p.pid()))
		time.Sleep(20 * time.Millisecond) // pacing of the REQs
	}
	if closed && r.Observed["noticed_by"] == nil {
		r.Observed["noticed_by"] = "buzz_ws_backpressure_disconnects_total"
	}
	r.Observed["reqs_sent"] = sent
	r.Observed["rss_before_mb"] = mb(rssBefore)
	r.Observed["rss_peak_mb"] = mb(peak)
	r.Observed["disconnected_by_relay"] = closed
	if !closed {
		return errors.New("the relay did not disconnect a client that never reads within 90 s")
	}
	// Now read: what was buffered, then the relay's close.
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	for {
		if _, _, err := c.Read(rctx); err != nil {
			status := websocket.CloseStatus(err)
			r.Observed["close_status"] = int(status)
			if status != websocket.StatusPolicyViolation {
				r.Observed["close_error"] = err.Error()
			}
			return nil
		}
	}
}

// status reads /_status, nil when it does not answer.
func (p *relayProc) status() map[string]any {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.healthURL + "/_status")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return m
}

// metric sums the samples of a counter or gauge on /metrics, -1 when the
// endpoint does not answer.
func (p *relayProc) metric(name string) float64 {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.metricsURL + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func mb(b int64) float64 { return round1(float64(b) / (1 << 20)) }
