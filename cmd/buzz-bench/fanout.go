package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// Bounds of the fanout phase.
const (
	// fanoutDialers is how many subscribers connect at once.
	fanoutDialers = 32
	// fanoutInflight bounds the EVENTs awaiting their OK; the pacer waits
	// (and the sent rate drops below --rate) when the relay falls that far behind.
	fanoutInflight = 1024
	// fanoutSeed makes the fanout events' content reproducible.
	fanoutSeed = 0xfa
)

// fanoutLine is the fanout phase's figures (P5 and the scale-out fan-out, docs/PERFORMANCE.md).
//
// Latencies are per delivered (event, subscriber) pair. p50/p99/max run
// from the moment the publisher read its OK to the moment the subscriber
// read the EVENT. The relay fans out before it answers OK, so a delivery
// may come first: its latency is negative, and before_ok counts those.
// send_* run from the moment the publisher sent the EVENT instead.
type fanoutLine struct {
	Phase          string   `json:"phase"`
	Relays         []string `json:"relays"`
	SubRelay       string   `json:"sub_relay"`
	Channel        string   `json:"channel"`
	Subscribers    int      `json:"subscribers"`
	Publishers     int      `json:"publishers"`
	Rate           float64  `json:"rate"`
	ConnectSeconds float64  `json:"connect_seconds"`
	Seconds        float64  `json:"seconds"`
	SentPerSec     float64  `json:"sent_per_sec"`
	// Events is the EVENTs answered; Accepted those answered OK true.
	Events        int      `json:"events"`
	Accepted      int      `json:"accepted"`
	Rejected      int      `json:"rejected"`
	RejectedFirst []string `json:"rejected_messages,omitempty"`
	Errors        int      `json:"errors"`
	FirstError    string   `json:"first_error,omitempty"`
	OKP50         float64  `json:"ok_p50_ms"`
	OKP99         float64  `json:"ok_p99_ms"`
	// Expected is Accepted × Subscribers; Delivered the pairs that arrived
	// by the end of the drain (--fanout-drain after the last OK), each
	// counted once; Missing the difference: lost, or later than the drain.
	Expected   int `json:"expected"`
	Delivered  int `json:"delivered"`
	Missing    int `json:"missing"`
	Duplicates int `json:"duplicates"`
	// Unexpected counts EVENTs of the run's events that got no OK true,
	// and of events the run did not publish.
	Unexpected int     `json:"unexpected"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	SendP50    float64 `json:"send_p50_ms"`
	SendP99    float64 `json:"send_p99_ms"`
	SendMax    float64 `json:"send_max_ms"`
	BeforeOK   int     `json:"before_ok"`
	// Ended counts subscriptions the relay closed, or sockets that ended,
	// before the phase did.
	Ended        int               `json:"ended"`
	EndedFirst   []string          `json:"ended_messages,omitempty"`
	DrainSeconds float64           `json:"drain_seconds"`
	Truncated    bool              `json:"truncated,omitempty"`
	CPU          map[string]cpuUse `json:"cpu,omitempty"`
}

// fanoutEvents is the number of events the phase publishes.
func fanoutEvents(f fanoutConfig) int {
	return int(math.Round(f.rate * f.duration.Seconds()))
}

// published is one fanout EVENT's fate, in time since the phase's epoch.
type published struct {
	sent, answered time.Duration
	ok             bool
	msg            string
	err            error
}

// runFanout runs the fanout phase: publishers on the --relay list, a fresh
// channel, --subscribers sockets on --sub-relay holding its REQ, then
// --rate events per second for --fanout-seconds.
func runFanout(ctx context.Context, cfg config) (fanoutLine, error) {
	fc := cfg.fanout
	line := fanoutLine{Phase: "fanout", Relays: cfg.relays, SubRelay: fc.subRelay,
		Subscribers: fc.subscribers, Publishers: fc.publishers, Rate: fc.rate}
	wl := newWorkload(fc.publishers)
	pubs, err := dialPublishers(ctx, cfg.relays, wl)
	if err != nil {
		return line, err
	}
	defer closeAll(pubs)
	channel, refusal, err := publishChannel(ctx, pubs[0], wl.keys[0])
	if err != nil {
		return line, fmt.Errorf("fanout: %w", err)
	}
	if refusal != "" {
		return line, fmt.Errorf("fanout: the relay refused the channel's kind 9007 (%s)", refusal)
	}
	wl.channel, line.Channel = channel, channel
	n := fanoutEvents(fc)
	jobs := wl.sign(n, fanoutSeed, func(i int) int { return i % fc.publishers })
	index := make(map[string]int32, n)
	for i, j := range jobs {
		index[j.ev.ID] = int32(i)
	}

	t0 := time.Now()
	subs, err := dialSubscribers(ctx, fc, channel, n)
	if err != nil {
		return line, err
	}
	line.ConnectSeconds = round3(time.Since(t0).Seconds())

	epoch := time.Now()
	var received atomic.Int64
	rctx, stopReaders := context.WithCancel(context.WithoutCancel(ctx))
	var readers sync.WaitGroup
	for _, s := range subs {
		readers.Go(func() { s.read(rctx, epoch, index, &received) })
	}
	before := sampleCPU(cfg.pids)
	results, elapsed := publishPaced(ctx, fc, pubs, jobs, epoch)
	accepted := 0
	for _, r := range results {
		if r.ok {
			accepted++
		}
	}
	drainStart := time.Now()
	awaitDeliveries(ctx, &received, int64(accepted*len(subs)), fc.drain)
	line.DrainSeconds = round3(time.Since(drainStart).Seconds())
	line.CPU = cpuSince(cfg.pids, before)
	stopReaders()
	for _, s := range subs {
		s.close()
	}
	readers.Wait()

	line.Seconds = round3(elapsed.Seconds())
	line.Truncated = ctx.Err() != nil
	summarisePublished(&line, results, elapsed)
	summariseDeliveries(&line, results, subs)
	return line, nil
}

// dialPublishers connects publisher p, as author p, to relay p%len(relays).
func dialPublishers(ctx context.Context, relays []string, wl *workload) ([]*client.Conn, error) {
	var pubs []*client.Conn
	for p, sk := range wl.keys {
		relay := relayOf(relays, p)
		c, err := client.Dial(ctx, relay, sk)
		if err != nil {
			closeAll(pubs)
			return nil, fmt.Errorf("fanout: connect publisher %d to %s: %w", p, relay, err)
		}
		pubs = append(pubs, c)
	}
	return pubs, nil
}

func closeAll(conns []*client.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// dialSubscribers connects fc.subscribers sockets, each with a key of its
// own, fanoutDialers at a time, and returns once every one has its EOSE.
// Any failure closes them all: a phase with fewer subscribers than asked
// would report figures for another shape.
func dialSubscribers(ctx context.Context, fc fanoutConfig, channel string, events int) ([]*subscriber, error) {
	subs := make([]*subscriber, fc.subscribers)
	errs := make([]error, fc.subscribers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(fanoutDialers, fc.subscribers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(subs) || ctx.Err() != nil {
					return
				}
				subs[i], errs[i] = dialSubscriber(ctx, fc.subRelay, event.GenerateKey(), channel, events)
			}
		})
	}
	wg.Wait()
	failed, first := 0, error(nil)
	for i, err := range errs {
		if err != nil || subs[i] == nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == 0 {
		return subs, nil
	}
	for _, s := range subs {
		if s != nil {
			s.close()
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return nil, fmt.Errorf("fanout: %d of %d subscribers could not subscribe on %s, first: %w", failed, len(subs), fc.subRelay, first)
}

// publishPaced sends job i at epoch + i/rate on publisher i%len(pubs),
// with up to fanoutInflight EVENTs awaiting their OK, and returns every
// job's fate once all are answered, and the time from the first send to
// the last answer.
func publishPaced(ctx context.Context, fc fanoutConfig, pubs []*client.Conn, jobs []job, epoch time.Time) ([]published, time.Duration) {
	results := make([]published, len(jobs))
	interval := time.Duration(float64(time.Second) / fc.rate)
	sem := make(chan struct{}, fanoutInflight)
	var wg sync.WaitGroup
	for i := range jobs {
		if !sleepUntil(ctx, epoch.Add(time.Duration(i)*interval)) {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &results[i]
			r.sent = time.Since(epoch)
			r.ok, r.msg, r.err = pubs[i%len(pubs)].Publish(ctx, jobs[i].ev)
			r.answered = time.Since(epoch)
		})
	}
	wg.Wait()
	var last time.Duration
	for _, r := range results {
		last = max(last, r.answered)
	}
	return results, last - results[0].sent
}

// sleepUntil waits until t or until ctx ends; it reports whether ctx is
// still live.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitDeliveries returns once received reaches want, drain has passed,
// or ctx ends.
func awaitDeliveries(ctx context.Context, received *atomic.Int64, want int64, drain time.Duration) {
	deadline := time.Now().Add(drain)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for received.Load() < want && time.Now().Before(deadline) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// summarisePublished fills the publishers' side of line.
func summarisePublished(line *fanoutLine, results []published, elapsed time.Duration) {
	var rej rejections
	var okLat []time.Duration
	for _, r := range results {
		switch {
		case r.answered == 0: // never sent: the run was cut short
		case r.err != nil:
			line.Errors++
			if line.FirstError == "" {
				line.FirstError = r.err.Error()
			}
		case !r.ok:
			line.Events++
			rej.add(r.msg)
		default:
			line.Events++
			line.Accepted++
			okLat = append(okLat, r.answered-r.sent)
		}
	}
	line.Rejected, line.RejectedFirst = rej.n, rej.first
	s := summarise(okLat)
	line.OKP50, line.OKP99 = s.P50, s.P99
	if elapsed > 0 {
		line.SentPerSec = round1(float64(line.Events+line.Errors) / elapsed.Seconds())
	}
}

// summariseDeliveries fills the subscribers' side of line.
func summariseDeliveries(line *fanoutLine, results []published, subs []*subscriber) {
	var fromOK, fromSend []time.Duration
	var ended rejections
	for _, s := range subs {
		line.Duplicates += s.dups
		line.Unexpected += s.unknown
		if s.ended != "" {
			ended.add(s.ended)
		}
		for _, d := range s.recs {
			r := results[d.idx]
			if !r.ok {
				line.Unexpected++
				continue
			}
			line.Delivered++
			fromOK = append(fromOK, d.at-r.answered)
			fromSend = append(fromSend, d.at-r.sent)
			if d.at < r.answered {
				line.BeforeOK++
			}
		}
	}
	line.Ended, line.EndedFirst = ended.n, ended.first
	line.Expected = line.Accepted * len(subs)
	line.Missing = line.Expected - line.Delivered
	a, b := summarise(fromOK), summarise(fromSend)
	line.P50, line.P99, line.Max = a.P50, a.P99, a.Max
	line.SendP50, line.SendP99, line.SendMax = b.P50, b.P99, b.Max
}
