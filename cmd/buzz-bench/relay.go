package main

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/abuse"
)

// phaseNames are the relay benchmark's phases, in the order --phase lists
// them in its help.
var phaseNames = []string{"ingest", "http-ingest", "req", "fanout", "idle", "abuse"}

// relayFlags registers the flags of the relay benchmarks on fs and returns
// the function that checks them once fs is parsed. With phase "" the
// command runs the phases of --phase (default ingest,req); otherwise it
// runs that one phase and has no --phase flag. Every relay benchmark takes
// every flag, so one command line fits all of them (scripts/bench-scale.sh
// passes the same flags to ingest and fanout).
func relayFlags(fs *pflag.FlagSet, phase string) func() (config, error) {
	var c config
	relays := fs.String("relay", "ws://localhost:3000", "relay URL, or a comma-separated list of processes serving one community (loopback only)")
	fs.IntVar(&c.conns, "conns", 8, "connections (each with its own authors)")
	fs.IntVar(&c.inflight, "inflight", 1, "EVENTs in flight per connection")
	fs.IntVar(&c.events, "events", 20000, "events per ingest phase")
	fs.IntVar(&c.authors, "authors", 64, "distinct authors")
	fs.DurationVar(&c.duration, "duration", 120*time.Second, "cap on the whole run")
	phases := &phase
	if phase == "" {
		phases = fs.String("phase", "ingest,req", "phases in order: "+strings.Join(phaseNames, ", "))
	}
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
	targets := fs.String("req-targets", "", "req: JSON file of a preloaded dataset's authors, e and p values (buzz-bench fixture --targets)")
	fs.StringVar(&c.abuse.host, "abuse-host", "", "abuse: host of the attacked community, served by the first --relay (the honest clients stay in --relay's own)")
	abuseSecs := fs.Float64("abuse-seconds", 60, "abuse: seconds of each window, the baseline and the attack (60: 768 honest operations of each kind, so a p99 is the eighth-slowest)")
	fs.IntVar(&c.abuse.honest, "abuse-honest", 16, "abuse: honest sockets, each its own key")
	fs.Float64Var(&c.abuse.rate, "abuse-rate", 0.8, "abuse: publish+REQ pairs per second of each honest socket (within the default per-user quotas)")
	fs.IntVar(&c.abuse.seed, "abuse-seed", 5000, "abuse: kind 1 notes stored in the attacked community before the first window")
	fs.Float64Var(&c.abuse.opts.Scale, "abuse-scale", 1, "abuse: size of the attacks (1: full size; below 1 against an undefended relay, whose wide REQ otherwise holds a core for hours)")
	fs.IntVar(&c.abuse.opts.Concurrency, "abuse-conc", 64, "abuse: the attacker's requests in flight in the read flood")
	fs.IntVar(&c.abuse.opts.FrameBytes, "abuse-frame", 524288, "abuse: the relay's frame limit (BUZZ_MAX_FRAME_BYTES), which the big events are sized to")
	fs.DurationVar(&c.abuse.opts.OpTimeout, "abuse-op-timeout", 5*time.Second, "abuse: cap on one attacker request")
	abuseAttacks := fs.String("abuse-attacks", "all", "abuse: comma-separated attacks, in order: "+strings.Join(abuse.Names(), ", ")+", or all")
	return func() (config, error) {
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
			if !containsString(phaseNames, p) {
				return c, errf("--phase: unknown phase %q (%s)", p, strings.Join(phaseNames, ", "))
			}
			if p == "abuse" && (c.abuse.host == "" || strings.EqualFold(c.abuse.host, hostOf(c.relays[0]))) {
				return c, errf("abuse needs --abuse-host, a community other than --relay's")
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
}

// relayCommand is a command that measures a running relay: the phases of
// --phase when phase is "" (run), else that one phase.
func relayCommand(cmd *cobra.Command, phase string) *cobra.Command {
	done := relayFlags(cmd.Flags(), phase)
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := done()
		if err != nil {
			return err
		}
		return runRelay(c.Context(), cfg, c.OutOrStdout())
	}
	return cmd
}

// relayLong is the part of every relay benchmark's help that they share.
const relayLong = `
It only targets loopback hosts and measures a relay it did not start
(scripts/bench.sh starts one); its run time is bounded by --duration. It
prints one JSON object per line: a setup line, the phase's lines, and a
summary line. Every relay benchmark takes every flag below; the ones
named for another phase do nothing here. --pids adds the CPU each named
process used to the phase lines.`

// relayCommands are the relay benchmarks: run and one command per phase.
func relayCommands() []*cobra.Command {
	return []*cobra.Command{
		relayCommand(&cobra.Command{Use: "run", Short: "the phases of --phase in order (default ingest,req)",
			Long: `run measures the phases listed in --phase, in order, against one relay or
a comma-separated list of processes serving one community. The req
phase draws its authors, e and p values from the run's own ingest phases
unless --req-targets names a preloaded dataset's.` + relayLong,
			Example: `  buzz-bench run --relay ws://localhost:3390 --phase ingest,req --events 20000
  buzz-bench run --relay ws://localhost:3390 --phase ingest,http-ingest --pids relay=123,postgres=456`}, ""),
		relayCommand(&cobra.Command{Use: "ingest", Short: "WebSocket EVENT→OK throughput and latency (P1)",
			Long: `ingest publishes --events pre-signed events over --conns authenticated
sockets with --inflight EVENTs in flight each, spread round-robin over the
--relay processes, and reports events per second and OK latency.` + relayLong,
			Example: `  buzz-bench ingest --relay ws://localhost:3390 --events 20000 --conns 8
  buzz-bench ingest --relay ws://localhost:3390,ws://localhost:3400 --inflight 4`}, "ingest"),
		relayCommand(&cobra.Command{Use: "http-ingest", Short: "POST /events throughput and latency (P1 over HTTP)",
			Long: `http-ingest is ingest over the HTTP bridge: each event is one NIP-98
signed POST /events.` + relayLong,
			Example: `  buzz-bench http-ingest --relay ws://localhost:3390 --events 5000`}, "http-ingest"),
		relayCommand(&cobra.Command{Use: "req", Short: "REQ→EOSE latency of the kinds, authors, #e and #p shapes (P3, P4)",
			Long: `req runs each REQ shape for --req-seconds over --conns sockets and
reports queries per second and EOSE latency. Its authors, e and p values
come from --req-targets (buzz-bench fixture writes them); without it,
from the run's own ingest phases, so "run --phase ingest,req" is the way
to measure REQ on the events it publishes. --search-words adds one NIP-50
search shape per word.` + relayLong,
			Example: `  buzz-bench req --relay ws://localhost:3390 --req-targets /tmp/targets.json
  buzz-bench req --relay ws://localhost:3390 --req-targets /tmp/targets.json --search-words kanom,quixotically`}, "req"),
		relayCommand(&cobra.Command{Use: "fanout", Short: "publisher OK → subscriber EVENT latency and deliveries (P5)",
			Long: `fanout holds --subscribers sockets with one REQ each on --sub-relay,
publishes --rate events per second for --fanout-seconds from --publishers
sockets on --relay, and reports delivery latency and missing deliveries.` + relayLong,
			Example: `  buzz-bench fanout --relay ws://localhost:3390 --subscribers 1000 --rate 100 --fanout-seconds 10
  buzz-bench fanout --relay ws://localhost:3390 --sub-relay ws://localhost:3400`}, "fanout"),
		relayCommand(&cobra.Command{Use: "idle", Short: "relay RSS around idle authenticated sockets (P6)",
			Long: `idle opens --idle-conns authenticated sockets on the first --relay, holds
them for --idle-seconds and reports the relay's RSS before, with and after
them (--pids relay=PID), and its heap profile when --pprof is given.` + relayLong,
			Example: `  buzz-bench idle --relay ws://localhost:3390 --idle-conns 10000 --pids relay=123 \
    --pprof http://127.0.0.1:3392/debug/pprof/heap --heap-profile /tmp/heap.pb.gz`}, "idle"),
		relayCommand(&cobra.Command{Use: "abuse", Short: "honest p50/p99 without and with each attack (docs/PERFORMANCE.md)",
			Long: `abuse measures --abuse-honest honest sockets publishing and querying in
--relay's community, first alone and then while each attack of
--abuse-attacks runs against --abuse-host, another community of the same
relay, and reports each window's honest percentiles and what the attacker
saw.` + relayLong,
			Example: `  buzz-bench abuse --relay ws://localhost:3390 --abuse-host attacked.localhost:3390 --duration 40m
  buzz-bench abuse --relay ws://localhost:3390 --abuse-host b.test:3390 --abuse-attacks read-flood --abuse-scale 0.1`}, "abuse"),
	}
}
