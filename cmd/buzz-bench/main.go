// Command buzz-bench is the load tool of spec 80 §1 and §3 and of spec 70
// checks 20–21: it pre-signs a workload, then measures ingest (WebSocket
// EVENT→OK or POST /events), the REQ shapes kinds, authors, #e and #p
// (REQ→EOSE), live fan-out (publisher's OK → subscriber's EVENT) and idle
// authenticated connections (the relay's RSS around N idle sockets, and
// its heap profile when --pprof is given), printing one JSON object per
// line per phase and a summary line.
//
// The REQ shapes draw their authors, e and p values from the run's own
// ingest phases, or, with --req-targets, from a file that describes a
// dataset loaded beforehand (cmd/buzz-fixture writes one).
//
// --relay takes one relay URL or a comma-separated list of processes that
// serve the same community: publishing connections are spread round-robin
// over them, so one run can drive one, two or four processes. The fanout
// phase holds its subscribers on --sub-relay (default: the first relay), so
// the publisher and the subscribers may sit on different processes; both
// live in this process and share one clock.
//
// It only targets loopback hosts, and its run time is bounded by --duration.
// It does NOT load data directly into PostgreSQL, start a relay, or judge
// the figures against the targets.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/buzz-relay/buzz/internal/abuse"
)

type config struct {
	// relays are the --relay URLs; worker w publishes on relays[w%len].
	relays      []string
	conns       int
	inflight    int
	events      int
	authors     int
	duration    time.Duration
	phases      []string
	reqDuration time.Duration
	pids        []pidGroup
	// kind is the workload's kind: 9 (a channel message, searchable) or 1
	// (a note, which the search column leaves NULL).
	kind   int
	fanout fanoutConfig
	idle   idleConfig
	// targets, when set (--req-targets), are the values the REQ shapes
	// draw from instead of the run's own workload: a preloaded dataset's.
	targets *reqTargets
	// searchWords, when set (--search-words), add one NIP-50 REQ shape per
	// word to the req phase ("search:<word>").
	searchWords []string
	abuse       abuseConfig
}

// fanoutConfig is the fanout phase's shape (spec 80 P5).
type fanoutConfig struct {
	// subRelay holds the subscribers (--sub-relay, default relays[0]).
	subRelay string
	// subscribers is the number of subscriber sockets, each with one REQ.
	subscribers int
	// publishers publish in turn, publisher p on relays[p%len].
	publishers int
	// rate is the events per second all publishers send together.
	rate float64
	// duration is how long the publishers send.
	duration time.Duration
	// drain is how long, after the last OK, the phase waits for deliveries
	// still on their way before it counts the rest missing.
	drain time.Duration
}

var knownPhases = map[string]bool{"ingest": true, "http-ingest": true, "req": true, "fanout": true, "idle": true, "abuse": true}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("buzz-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	relays := fs.String("relay", "ws://localhost:3000", "relay URL, or a comma-separated list of processes serving one community (loopback only)")
	fs.IntVar(&c.conns, "conns", 8, "connections (each with its own authors)")
	fs.IntVar(&c.inflight, "inflight", 1, "EVENTs in flight per connection")
	fs.IntVar(&c.events, "events", 20000, "events per ingest phase")
	fs.IntVar(&c.authors, "authors", 64, "distinct authors")
	fs.DurationVar(&c.duration, "duration", 120*time.Second, "cap on the whole run")
	phases := fs.String("phase", "ingest,req", "phases in order: ingest, http-ingest, req, fanout, idle, abuse")
	reqSecs := fs.Float64("req-seconds", 10, "seconds per REQ shape")
	fs.IntVar(&c.kind, "kind", 9, "event kind: 9 (channel message, indexed for search) or 1 (note, not indexed)")
	pids := fs.String("pids", "", "CPU to report: name=PID[+PID…],… e.g. relay=123,postgres=456")
	fs.StringVar(&c.fanout.subRelay, "sub-relay", "", "fanout: relay URL of the subscribers (default: the first --relay)")
	fs.IntVar(&c.fanout.subscribers, "subscribers", 1000, "fanout: subscriber sockets")
	fs.IntVar(&c.fanout.publishers, "publishers", 1, "fanout: publisher sockets, spread round-robin over --relay")
	fs.Float64Var(&c.fanout.rate, "rate", 100, "fanout: events per second, all publishers together")
	fanSecs := fs.Float64("fanout-seconds", 10, "fanout: seconds of publishing")
	fs.DurationVar(&c.fanout.drain, "fanout-drain", 5*time.Second, "fanout: wait after the last OK for deliveries still on their way")
	fs.IntVar(&c.idle.conns, "idle-conns", 10000, "idle: authenticated sockets held open on the first --relay")
	idleSecs := fs.Float64("idle-seconds", 5, "idle: seconds the sockets stay idle once all are open")
	fs.StringVar(&c.idle.pprof, "pprof", "", "idle: the relay's heap profile URL (loopback), e.g. http://127.0.0.1:9102/debug/pprof/heap")
	fs.StringVar(&c.idle.heapProfile, "heap-profile", "", "idle: file the --pprof profile is saved to, for go tool pprof")
	searchWords := fs.String("search-words", "", "req: comma-separated words, each measured as a NIP-50 search shape after the four REQ shapes")
	targets := fs.String("req-targets", "", "req: JSON file of a preloaded dataset's authors, e and p values (cmd/buzz-fixture --targets)")
	fs.StringVar(&c.abuse.host, "abuse-host", "", "abuse: host of the attacked community, served by the first --relay (the honest clients stay in --relay's own)")
	abuseSecs := fs.Float64("abuse-seconds", 15, "abuse: seconds of each window, the baseline and the attack")
	fs.IntVar(&c.abuse.honest, "abuse-honest", 16, "abuse: honest sockets, each its own key")
	fs.Float64Var(&c.abuse.rate, "abuse-rate", 0.8, "abuse: publish+REQ pairs per second of each honest socket (within the default per-user quotas)")
	fs.IntVar(&c.abuse.seed, "abuse-seed", 5000, "abuse: kind 1 notes stored in the attacked community before the first window")
	fs.Float64Var(&c.abuse.opts.Scale, "abuse-scale", 1, "abuse: size of the attacks (1: full size; below 1 against an undefended relay, whose wide REQ otherwise holds a core for hours)")
	fs.IntVar(&c.abuse.opts.Concurrency, "abuse-conc", 64, "abuse: the attacker's requests in flight in the read flood")
	fs.IntVar(&c.abuse.opts.FrameBytes, "abuse-frame", 524288, "abuse: the relay's frame limit (BUZZ_MAX_FRAME_BYTES), which the big events are sized to")
	fs.DurationVar(&c.abuse.opts.OpTimeout, "abuse-op-timeout", 5*time.Second, "abuse: cap on one attacker request")
	abuseAttacks := fs.String("abuse-attacks", "all", "abuse: comma-separated attacks, in order: "+strings.Join(abuse.Names(), ", ")+", or all")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, errf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if c.relays, err = parseRelays(*relays); err != nil {
		return c, err
	}
	if err := parseFanout(&c.fanout, c.relays, *fanSecs); err != nil {
		return c, err
	}
	if err := parseIdle(&c.idle, *idleSecs); err != nil {
		return c, err
	}
	for _, w := range strings.Split(*searchWords, ",") {
		if w = strings.TrimSpace(w); w != "" {
			c.searchWords = append(c.searchWords, w)
		}
	}
	if err := parseAbuse(&c.abuse, *abuseSecs, *abuseAttacks); err != nil {
		return c, err
	}
	if *targets != "" {
		if c.targets, err = loadTargets(*targets); err != nil {
			return c, err
		}
	}
	if c.conns < 1 || c.inflight < 1 || c.events < 1 || c.authors < 1 || c.duration <= 0 || *reqSecs <= 0 {
		return c, errf("--conns, --inflight, --events, --authors, --duration and --req-seconds must be positive")
	}
	if c.kind != 9 && c.kind != 1 {
		return c, errf("--kind must be 9 or 1")
	}
	c.reqDuration = time.Duration(*reqSecs * float64(time.Second))
	for p := range strings.SplitSeq(*phases, ",") {
		if !knownPhases[p] {
			return c, errf("--phase: unknown phase %q (ingest, http-ingest, req, fanout, idle, abuse)", p)
		}
		if p == "abuse" && (c.abuse.host == "" || strings.EqualFold(c.abuse.host, hostOf(c.relays[0]))) {
			return c, errf("--phase abuse needs --abuse-host, a community other than --relay's")
		}
		c.phases = append(c.phases, p)
	}
	if c.pids, err = parsePIDs(*pids); err != nil {
		return c, err
	}
	if c.pids != nil { // the load tool shares the machine: report its own CPU next to the others
		c.pids = append(c.pids, pidGroup{Name: "bench", PIDs: []int{os.Getpid()}})
	}
	return c, nil
}

// parseRelays splits the --relay list and checks that every URL is on
// loopback. Empty items and repeats are refused: a repeat would skew the
// round-robin.
func parseRelays(list string) ([]string, error) {
	var out []string
	for r := range strings.SplitSeq(list, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			return nil, errf("--relay %q: empty item in the list", list)
		}
		if err := checkLoopback(r); err != nil {
			return nil, err
		}
		if containsString(out, r) {
			return nil, errf("--relay: %q is listed twice", r)
		}
		out = append(out, r)
	}
	return out, nil
}

// parseFanout checks the fanout flags and defaults --sub-relay.
func parseFanout(f *fanoutConfig, relays []string, seconds float64) error {
	if f.subRelay == "" {
		f.subRelay = relays[0]
	} else if err := checkLoopbackFlag("--sub-relay", f.subRelay); err != nil {
		return err
	}
	if f.subscribers < 1 || f.publishers < 1 || f.rate <= 0 || seconds <= 0 || f.drain <= 0 {
		return errf("--subscribers, --publishers, --rate, --fanout-seconds and --fanout-drain must be positive")
	}
	f.duration = time.Duration(seconds * float64(time.Second))
	if n := fanoutEvents(*f); n < 1 {
		return errf("--rate × --fanout-seconds must be at least one event")
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		writeLine(stderr, map[string]string{"error": err.Error()})
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	if err := bench(ctx, cfg, stdout); err != nil {
		writeLine(stderr, map[string]string{"error": err.Error()})
		return 2
	}
	return 0
}

func writeLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func round1(x float64) float64 { return math.Round(x*10) / 10 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// rejections counts non-accepted answers and keeps the first few messages.
type rejections struct {
	n     int
	first []string
}

func (r *rejections) add(msg string) {
	r.n++
	if len(r.first) < 5 && !containsString(r.first, msg) {
		r.first = append(r.first, msg)
	}
}

func (r *rejections) merge(o rejections) {
	r.n += o.n
	for _, m := range o.first {
		if len(r.first) < 5 && !containsString(r.first, m) {
			r.first = append(r.first, m)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
