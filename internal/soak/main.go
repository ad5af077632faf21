// Package soak is "buzz-bench soak", the relay's soak: it starts a whole deployment on
// loopback (its own PostgreSQL cluster, with a synchronous standby when
// the failover fault is chosen, one or more buzz-relay processes, a Redis
// server when there are several, and an HTTPS operator-listener endpoint), drives N connections of mixed traffic across three
// communities for a set time while the chosen faults are injected, and
// then checks the database against a ledger of every acknowledged write:
//
//   - every event answered OK true is stored exactly once (a read-state
//     version may be superseded by a newer acknowledged one, never lost);
//   - every stored event has exactly one audit chain entry, and
//     `buzz-relay audit verify` passes for each community;
//   - every mention of a registered listener target was delivered to the
//     endpoint or still has its outbox row;
//   - every read-state coordinate has exactly one live row.
//
// It prints one JSON summary (operations by type with p50/p99, errors by
// prefix, relay RSS at start, peak and end, the faults and how the relay
// came back, the checks and "lost") and exits 1 when anything was lost or
// a check failed, 2 when the soak itself could not run.
//
// Every loop is bounded in count and time, and every address is on
// loopback. It does NOT target a deployment it did not start: the faults
// need to own the processes.
package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Config is one soak run, made by Flags.
type Config struct {
	relayBin     string
	dir          string // work directory: database, logs, ledger
	keep         bool   // keep dir after the run
	relays       int
	conns        int
	duration     time.Duration
	maxOps       int
	pace         time.Duration // least time from the start of one connection's operation to its next
	opWait       time.Duration // how long one operation may take before it counts as a hang
	faults       []string
	pgDown       time.Duration
	redisOff     time.Duration
	listenerDown time.Duration
	stormConns   int
	stormFor     time.Duration
	abuseFor     time.Duration // the abuse fault's attacks together
	abuseScale   float64
	settle       time.Duration // how long the end checks wait for queues to drain
	seed         uint64
	// relayEnv are extra KEY=value settings of every relay (--relay-env),
	// applied over the soak's own.
	relayEnv map[string]string
}

// faultNames lists the scenarios in the order a run with "all" injects them.
var faultNames = []string{"kill-relay", "pg-fast", "pg-immediate", "failover", "redis", "listener", "slow-client", "storm", "abuse"}

// Flags registers the soak's flags on fs and returns the function that
// checks them once fs is parsed.
func Flags(fs *pflag.FlagSet) func() (Config, error) {
	var c Config
	fs.StringVar(&c.relayBin, "relay-bin", "", "buzz-relay binary (default: next to buzz-bench, then PATH)")
	fs.StringVar(&c.dir, "dir", "", "work directory for the database, logs and ledger (default: a new one under the temp dir, removed at the end)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory")
	fs.IntVar(&c.relays, "relays", 1, "relay processes (2 or more share a Redis server)")
	fs.IntVar(&c.conns, "conns", 12, "client connections, spread over the three communities and the relays")
	fs.DurationVar(&c.duration, "duration", 30*time.Second, "how long the traffic runs")
	fs.IntVar(&c.maxOps, "max-ops", 1_000_000, "cap on operations, all connections together")
	fs.DurationVar(&c.pace, "pace", 0, "least time from the start of one connection's operation to the start of its next (0: the next starts when the last is answered)")
	fs.DurationVar(&c.opWait, "op-timeout", 30*time.Second, "one operation's limit; a longer one counts as a hang")
	faults := fs.String("faults", "", "comma-separated faults, spread over the run: "+strings.Join(faultNames, ", ")+", or all")
	fs.DurationVar(&c.pgDown, "pg-down", 10*time.Second, "how long PostgreSQL stays down in pg-fast and pg-immediate")
	fs.DurationVar(&c.redisOff, "redis-down", 10*time.Second, "how long Redis stays down in redis")
	fs.DurationVar(&c.listenerDown, "listener-down", time.Minute, "how long the listener endpoint fails in listener")
	fs.IntVar(&c.stormConns, "storm-conns", 3000, "storm: connections opened, each sending a failed AUTH")
	fs.DurationVar(&c.stormFor, "storm-time", 10*time.Second, "storm: cap on its duration")
	fs.DurationVar(&c.abuseFor, "abuse-time", 45*time.Second, "abuse: how long the attacks run, all together (each gets an equal share)")
	fs.Float64Var(&c.abuseScale, "abuse-scale", 1, "abuse: size of the attacks (1: full size, see docs/PERFORMANCE.md \"Abuse benchmark\")")
	fs.DurationVar(&c.settle, "settle", 2*time.Minute, "cap on the wait for the audit and listener queues to drain at the end")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the operation mix")
	c.relayEnv = map[string]string{}
	fs.Func("relay-env", "KEY=value added to every relay's environment (repeatable), e.g. BUZZ_SEND_BUFFER=5000", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want KEY=value, got %q", kv)
		}
		c.relayEnv[k] = v
		return nil
	})
	return func() (Config, error) {
		if fs.NArg() > 0 {
			return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if c.relays < 1 || c.conns < 3 || c.duration <= 0 || c.maxOps < 1 || c.opWait <= 0 || c.settle <= 0 {
			return c, errors.New("--relays ≥ 1, --conns ≥ 3 (one per community), --duration, --max-ops, --op-timeout and --settle must be positive")
		}
		if c.pace < 0 {
			return c, errors.New("--pace must not be negative")
		}
		if c.pgDown <= 0 || c.redisOff <= 0 || c.listenerDown <= 0 || c.stormConns < 1 || c.stormFor <= 0 || c.abuseFor <= 0 || c.abuseScale <= 0 {
			return c, errors.New("--pg-down, --redis-down, --listener-down, --storm-conns, --storm-time, --abuse-time and --abuse-scale must be positive")
		}
		for f := range strings.SplitSeq(*faults, ",") {
			switch f = strings.TrimSpace(f); {
			case f == "":
			case f == "all":
				c.faults = append(c.faults, faultNames...)
			case containsString(faultNames, f):
				c.faults = append(c.faults, f)
			default:
				return c, fmt.Errorf("--faults: unknown fault %q (%s, all)", f, strings.Join(faultNames, ", "))
			}
		}
		if containsString(c.faults, "redis") && c.relays < 2 {
			return c, errors.New("--faults redis needs --relays 2 or more (Redis joins several processes)")
		}
		if c.relayBin == "" {
			bin, err := findRelayBin()
			if err != nil {
				return c, err
			}
			c.relayBin = bin
		}
		return c, nil
	}
}

// findRelayBin looks for buzz-relay next to this executable, then on PATH.
func findRelayBin() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "buzz-relay")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("buzz-relay")
	if err != nil {
		return "", errors.New("buzz-relay not found next to buzz-bench or on PATH: build it (make build) or pass --relay-bin")
	}
	return p, nil
}

// Run runs the soak of cfg, with its progress on stderr, and prints its
// summary on stdout. It returns 0 when nothing was lost and every check
// passed, 1 when not, 2 after printing {"error": …} on stderr when the
// soak could not run.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	sum, err := soak(ctx, cfg, stderr)
	if err != nil {
		writeLine(stderr, map[string]string{"error": err.Error()})
		return 2
	}
	writeLine(stdout, sum)
	if !sum.Passed() {
		return 1
	}
	return 0
}

func writeLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
