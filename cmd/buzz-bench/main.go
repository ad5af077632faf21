// Command buzz-bench is the project's one benchmark and load tool. Each
// benchmark is a subcommand (docs/PERFORMANCE.md has their figures):
//
//	buzz-bench run          the phases of --phase against a running relay (default ingest,req)
//	buzz-bench ingest       WebSocket EVENT→OK throughput and latency (P1)
//	buzz-bench http-ingest  POST /events throughput and latency
//	buzz-bench req          REQ→EOSE of the kinds, authors, #e, #p and search shapes (P3, P4)
//	buzz-bench fanout       publisher's OK → subscriber's EVENT (P5)
//	buzz-bench idle         relay RSS around idle authenticated sockets (P6)
//	buzz-bench abuse        honest p50/p99 without and with each attack
//	buzz-bench windows      thread windows on a 100k-reply thread (P7), own cluster and relay
//	buzz-bench fixture      load the 1M-event REQ dataset into a relay's database
//	buzz-bench soak         a whole deployment under mixed traffic and faults, then a ledger check
//
// The relay benchmarks (run … abuse) pre-sign a workload and measure a
// relay they did not start, on loopback only, and print one JSON object
// per line per phase and a summary line. --relay takes one relay URL or a
// comma-separated list of processes that serve the same community:
// publishing connections are spread round-robin over them. The fanout
// phase holds its subscribers on --sub-relay (default: the first relay);
// publisher and subscribers live in this process and share one clock.
//
// windows and soak start what they measure themselves (internal/windowbench,
// internal/soak); fixture loads a dataset through the store's batch insert
// (internal/benchdata, internal/benchload). Every latency figure is a
// nearest-rank percentile (internal/benchstat).
//
// Errors go to stderr as {"error": …} JSON lines, with exit status 2; soak
// and windows exit 1 when a check or pass rule failed. None of them judges
// the relay benchmarks' figures against targets.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the process's exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := cli.Execute(ctx, newRoot(), args, os.Stdin, stdout, stderr)
	if err == nil {
		return 0
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st) // the command has printed what it had to
	}
	writeLine(stderr, map[string]string{"error": err.Error()})
	return 2
}

// exitStatus is a non-zero exit status whose reason the command has
// already printed.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitWith turns a benchmark's exit status into RunE's error.
func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return exitStatus(code)
}

// newRoot builds the command tree.
func newRoot() *cobra.Command {
	root := cli.Root(&cobra.Command{
		Use:   "buzz-bench",
		Short: "the benchmarks and load tools of the Buzz relay",
		Long: `buzz-bench runs the benchmarks of docs/PERFORMANCE.md, one subcommand each.
The relay benchmarks (run, ingest, http-ingest, req, fanout, idle, abuse)
measure a relay already running on loopback; windows and soak start their
own PostgreSQL and relays; fixture loads the 1M-event REQ dataset into a
relay's database. Each prints JSON lines on stdout; errors go to stderr
as {"error": …} lines with exit status 2.`,
		Example: `  buzz-bench ingest --relay ws://localhost:3390 --events 20000
  buzz-bench run --relay ws://localhost:3390 --phase ingest,req
  buzz-bench windows --small
  buzz-bench help soak`,
	})
	return cli.Group(root, append(relayCommands(), windowsCommand(), fixtureCommand(), soakCommand(), newAttackerCommand())...)
}

// runRelay runs the relay benchmark of cfg, bounded by --duration.
func runRelay(ctx context.Context, cfg config, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	return bench(ctx, cfg, stdout)
}

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

// fanoutConfig is the fanout phase's shape (P5, docs/PERFORMANCE.md).
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
