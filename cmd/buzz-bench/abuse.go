package main

// The abuse phase (docs/PERFORMANCE.md "Abuse benchmark"): honest clients
// publish and query in the community of --relay while one attacker key
// runs the attacks of internal/abuse, one at a time, against the community
// of --abuse-host on the same relay. Each attack gets a baseline window
// without it and a window with it, so one run compares the honest
// latencies with and without every attack.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/abuse"
	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// abuseConfig is the abuse phase's shape.
type abuseConfig struct {
	// host is the attacked community's host (--abuse-host), reached over
	// the first --relay with client.DialHost.
	host string
	// window is the length of each baseline and attack window.
	window time.Duration
	// honest is the number of honest sockets, each its own key.
	honest int
	// rate is each honest socket's publish+REQ pairs per second.
	rate float64
	// seed is how many kind 1 notes the attacked community gets first.
	seed    int
	attacks []string
	opts    abuse.Options
}

// parseAbuse checks the abuse flags.
func parseAbuse(a *abuseConfig, windowSecs float64, attacks string) error {
	if a.honest < 1 || a.rate <= 0 || windowSecs <= 0 || a.seed < 0 || a.opts.Scale <= 0 || a.opts.Concurrency < 1 || a.opts.FrameBytes < 1 {
		return errf("--abuse-honest, --abuse-rate, --abuse-seconds, --abuse-scale, --abuse-conc and --abuse-frame must be positive, --abuse-seed not negative")
	}
	a.window = time.Duration(windowSecs * float64(time.Second))
	if attacks == "all" {
		a.attacks = abuse.Names()
		return nil
	}
	for name := range strings.SplitSeq(attacks, ",") {
		name = strings.TrimSpace(name)
		if _, ok := abuse.Lookup(name); !ok {
			return errf("--abuse-attacks: unknown attack %q (%s, all)", name, strings.Join(abuse.Names(), ", "))
		}
		a.attacks = append(a.attacks, name)
	}
	return nil
}

// abuseSetupLine reports the abuse phase's set-up.
type abuseSetupLine struct {
	Phase         string  `json:"phase"`
	Relay         string  `json:"relay"`
	AttackedHost  string  `json:"attacked_host"`
	Honest        int     `json:"honest_sockets"`
	HonestRate    float64 `json:"honest_pairs_per_sec_each"`
	Channel       string  `json:"channel,omitempty"`
	Note          string  `json:"note,omitempty"`
	Scale         float64 `json:"scale"`
	WindowSeconds float64 `json:"window_seconds"`
	Seeded        int     `json:"seeded"`
	SeedRefused   int     `json:"seed_refused"`
	SeedSeconds   float64 `json:"seed_seconds"`
}

// opFigures are one kind of honest operation in one window.
type opFigures struct {
	Ops     int     `json:"ops"`
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
	Refused int     `json:"refused"`
	Errors  int     `json:"errors"`
}

// windowFigures are the honest figures of one window.
type windowFigures struct {
	Seconds float64   `json:"seconds"`
	Publish opFigures `json:"publish"`
	Req     opFigures `json:"req"`
	// CPU is what the --pids processes used in the window.
	CPU map[string]cpuUse `json:"cpu,omitempty"`
	// Slowest are the window's slowest answered operations, slowest
	// first, with when they began: a p99 made by a stall at the attack's
	// start shows there, one made by a steady cost is spread out.
	Slowest []slowOp `json:"slowest,omitempty"`
}

// slowOp is one slow honest operation.
type slowOp struct {
	// At is the seconds from the window's start to the operation's.
	At float64 `json:"at_s"`
	Ms float64 `json:"ms"`
	Op string  `json:"op"`
}

// slowestKept is how many of a window's slowest operations its figures
// keep.
const slowestKept = 5

// abuseLine is one attack's figures.
type abuseLine struct {
	Phase    string        `json:"phase"`
	Attack   string        `json:"attack"`
	What     string        `json:"what"`
	Baseline windowFigures `json:"baseline"`
	During   windowFigures `json:"during"`
	// Ratio is during ÷ baseline of each honest percentile (0 when the
	// baseline has no operation).
	Ratio         map[string]float64 `json:"ratio"`
	Attacker      map[string]int     `json:"attacker"`
	AttackerFirst []string           `json:"attacker_messages,omitempty"`
	AttackSeconds float64            `json:"attack_seconds"`
	Error         string             `json:"error,omitempty"`
	HonestRefused []string           `json:"honest_refused_messages,omitempty"`
}

// abuseSummary is one attack's headline in the summary line.
type abuseSummary struct {
	PublishP99Ratio float64 `json:"publish_p99_ratio"`
	ReqP99Ratio     float64 `json:"req_p99_ratio"`
	AttackerOK      int     `json:"attacker_ok"`
	AttackerTotal   int     `json:"attacker_answers"`
}

// runAbuse runs the phase and writes its lines; the summary gets each
// attack's headline.
func runAbuse(ctx context.Context, cfg config, out io.Writer, sum map[string]abuseSummary) error {
	a := cfg.abuse
	relay := cfg.relays[0]
	h, setup, err := startHonest(ctx, relay, a)
	if err != nil {
		return err
	}
	hctx, stopHonest := context.WithCancel(ctx)
	var honestDone sync.WaitGroup
	honestDone.Go(func() { h.run(hctx) })
	defer func() { stopHonest(); honestDone.Wait(); h.close() }()

	target := abuse.Target{URL: relay, Host: a.host}
	t0 := time.Now()
	setup.Seeded, setup.SeedRefused = abuse.Seed(ctx, target, a.seed)
	setup.SeedSeconds = round3(time.Since(t0).Seconds())
	writeLine(out, setup)

	for _, name := range a.attacks {
		if ctx.Err() != nil {
			break
		}
		at, _ := abuse.Lookup(name)
		line := abuseLine{Phase: "abuse", Attack: at.Name, What: at.What}
		// The attacker's process is started and prepared before both
		// windows: its start-up and its Prepare are in neither.
		att, err := startAttacker(ctx, attackerSpec{Attack: at.Name, URL: target.URL, Host: target.Host, Opts: a.opts, Window: a.window})
		if err != nil {
			return fmt.Errorf("%s: %w", at.Name, err)
		}
		b0, cpu0 := time.Now(), sampleCPU(cfg.pids)
		sleepCtx(ctx, a.window)
		b1, cpu1 := time.Now(), sampleCPU(cfg.pids)
		baselineCPU := cpuSince(cfg.pids, cpu0)
		if err := att.begin(); err != nil {
			_, _ = att.finish()
			return fmt.Errorf("%s: abuse: attacker process: %w", at.Name, err)
		}
		sleepCtx(ctx, a.window)
		// The child is still this process's, live or not yet reaped, so
		// the bench group's CPU counts it.
		d1, duringCPU := time.Now(), cpuSince(cfg.pids, cpu1)
		res, err := att.finish()
		if err != nil {
			return fmt.Errorf("%s: %w", at.Name, err)
		}
		line.AttackSeconds = round3(time.Since(b1).Seconds())
		line.Error = res.Error
		var refusedMsgs []string
		line.Baseline, refusedMsgs = h.window(b0, b1)
		line.During, line.HonestRefused = h.window(b1, d1)
		line.HonestRefused = append(refusedMsgs, line.HonestRefused...)
		line.Baseline.CPU, line.During.CPU = baselineCPU, duringCPU
		line.Ratio = map[string]float64{
			"publish_p50": ratio(line.During.Publish.P50, line.Baseline.Publish.P50),
			"publish_p99": ratio(line.During.Publish.P99, line.Baseline.Publish.P99),
			"req_p50":     ratio(line.During.Req.P50, line.Baseline.Req.P50),
			"req_p99":     ratio(line.During.Req.P99, line.Baseline.Req.P99),
		}
		line.Attacker, line.AttackerFirst = res.Counts, res.First
		total := 0
		for _, n := range res.Counts {
			total += n
		}
		sum[at.Name] = abuseSummary{PublishP99Ratio: line.Ratio["publish_p99"], ReqP99Ratio: line.Ratio["req_p99"],
			AttackerOK: line.Attacker[abuse.OK], AttackerTotal: total}
		writeLine(out, line)
	}
	return nil
}

func ratio(during, baseline float64) float64 {
	if baseline <= 0 {
		return 0
	}
	return round3(during / baseline)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// honestOp is one honest operation: when it began, how long it took and
// how it ended.
type honestOp struct {
	at      time.Time
	lat     time.Duration
	req     bool
	refused string // the refusal text, "" when answered
	err     bool
}

// honestLoad is the honest clients of community A: each socket its own
// key, publishing a kind 9 in one open channel then asking for the
// channel's last 50, rate times a second.
type honestLoad struct {
	relay   string
	rate    float64
	keys    [][]byte
	conns   []*client.Conn
	channel string
	kind    int

	mu  sync.Mutex
	ops []honestOp
}

// honestOpTimeout bounds one honest operation.
const honestOpTimeout = 10 * time.Second

// startHonest dials the honest sockets and creates their channel.
func startHonest(ctx context.Context, relay string, a abuseConfig) (*honestLoad, abuseSetupLine, error) {
	setup := abuseSetupLine{Phase: "abuse-setup", Relay: relay, AttackedHost: a.host, Honest: a.honest, HonestRate: a.rate,
		Scale: a.opts.Scale, WindowSeconds: round3(a.window.Seconds())}
	h := &honestLoad{relay: relay, rate: a.rate, kind: event.KindStreamMessage}
	for range a.honest {
		sk := event.GenerateKey()
		c, err := client.Dial(ctx, relay, sk)
		if err != nil {
			h.close()
			return nil, setup, errf("abuse: honest socket: %v", err)
		}
		h.keys, h.conns = append(h.keys, sk), append(h.conns, c)
	}
	id, refusal, err := publishChannel(ctx, h.conns[0], h.keys[0])
	if err != nil {
		h.close()
		return nil, setup, err
	}
	if refusal != "" {
		h.kind = event.KindNote
		setup.Note = "relay refused kind 9007 (" + refusal + "); the honest clients publish kind 1"
	}
	h.channel, setup.Channel = id, id
	return h, setup, nil
}

func (h *honestLoad) close() {
	for _, c := range h.conns {
		_ = c.Close()
	}
}

// run drives every honest socket until ctx ends.
func (h *honestLoad) run(ctx context.Context) {
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) / h.rate)
	for i := range h.conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			pause := time.Duration(rng.Int64N(int64(every))) // spread the sockets over the period
			for ctx.Err() == nil {
				sleepCtx(ctx, pause)
				start := time.Now()
				h.pair(ctx, i, rng)
				pause = max(0, every-time.Since(start))
			}
		})
	}
	wg.Wait()
}

// pair is one publish and one REQ of socket i.
func (h *honestLoad) pair(ctx context.Context, i int, rng *rand.Rand) {
	vocab := vocabulary()
	words := make([]string, wordsPerEvent)
	for k := range words {
		words[k] = vocab[rng.IntN(len(vocab))]
	}
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: h.kind, Content: strings.Join(words, " ")}
	if h.kind == event.KindStreamMessage {
		ev.Tags = event.Tags{{"h", h.channel}}
	}
	if ev.Sign(h.keys[i]) != nil {
		return
	}
	c := h.conns[i]
	octx, cancel := context.WithTimeout(ctx, honestOpTimeout)
	t := time.Now()
	ok, msg, err := c.Publish(octx, ev)
	h.record(ctx, honestOp{at: t, lat: time.Since(t)}, ok, msg, err)
	cancel()
	if h.lost(ctx, i, err) {
		return
	}

	limit := reqLimit
	f := event.Filter{Kinds: []int{h.kind}, Limit: &limit}
	if h.kind == event.KindStreamMessage {
		f.Tags = map[string][]string{"h": {h.channel}}
	}
	octx, cancel = context.WithTimeout(ctx, honestOpTimeout)
	t = time.Now()
	_, err = c.Query(octx, f)
	h.record(ctx, honestOp{at: t, lat: time.Since(t), req: true}, err == nil, "", err)
	cancel()
	h.lost(ctx, i, err)
}

// lost reports whether err was the end of socket i (not a refusal), and
// then dials it again for the next pair.
func (h *honestLoad) lost(ctx context.Context, i int, err error) bool {
	var refused *client.RefusedError
	if err == nil || errors.As(err, &refused) || ctx.Err() != nil {
		return false
	}
	_ = h.conns[i].Close()
	dctx, cancel := context.WithTimeout(ctx, honestOpTimeout)
	defer cancel()
	if c, derr := client.Dial(dctx, h.relay, h.keys[i]); derr == nil {
		h.conns[i] = c
	}
	return true
}

// record keeps one operation unless the phase's end cut it short.
func (h *honestLoad) record(ctx context.Context, op honestOp, ok bool, msg string, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	var refused *client.RefusedError
	switch {
	case errors.As(err, &refused):
		op.refused = refused.Message
	case err != nil:
		op.err = true
	case !ok:
		op.refused = msg
	}
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// window sums the operations that began in [from, to) and returns the
// honest refusal texts seen.
func (h *honestLoad) window(from, to time.Time) (windowFigures, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := windowFigures{Seconds: round3(to.Sub(from).Seconds())}
	var pubLat, reqLat []time.Duration
	var msgs rejections
	for _, op := range h.ops {
		if op.at.Before(from) || !op.at.Before(to) {
			continue
		}
		fig, lat := &w.Publish, &pubLat
		if op.req {
			fig, lat = &w.Req, &reqLat
		}
		fig.Ops++
		switch {
		case op.err:
			fig.Errors++
		case op.refused != "":
			fig.Refused++
			msgs.add(op.refused)
		default:
			*lat = append(*lat, op.lat)
			name := "publish"
			if op.req {
				name = "req"
			}
			w.Slowest = append(w.Slowest, slowOp{At: round3(op.at.Sub(from).Seconds()),
				Ms: round3(float64(op.lat) / float64(time.Millisecond)), Op: name})
		}
	}
	sort.Slice(w.Slowest, func(i, j int) bool { return w.Slowest[i].Ms > w.Slowest[j].Ms })
	w.Slowest = w.Slowest[:min(len(w.Slowest), slowestKept)]
	for _, x := range []struct {
		fig *opFigures
		lat []time.Duration
	}{{&w.Publish, pubLat}, {&w.Req, reqLat}} {
		s := summarise(x.lat)
		x.fig.P50, x.fig.P99, x.fig.Max = s.P50, s.P99, s.Max
	}
	return w, msgs.first
}
