package soak

// The connection storm runs in a process of its own ("buzz-bench soak storm"),
// started by the storm fault at a lower CPU priority and dialling from a
// loopback address of its own. Run inside the soak, its goroutines would
// queue with the honest clients' and its CPU would be counted in their
// latencies; as its own process the honest figures measure the relay.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/buzz-relay/buzz/internal/event"
)

// stormNice is the storm process's niceness: the relay, PostgreSQL and the
// honest clients come first for the CPU, and the storm takes the rest.
const stormNice = 10

// stormFrom is the loopback address the storm dials from, so the relay
// sees it as a peer distinct from the honest clients (127.0.0.1).
const stormFrom = "127.0.0.2"

// stormResult is what the storm process prints, one JSON line.
type stormResult struct {
	Connections int64   `json:"connections"`
	PerSecond   float64 `json:"per_second"`
	AuthRefused int64   `json:"auth_refused"`
	AuthTimeout int64   `json:"auth_timeout"`
	Limit503    int64   `json:"connection_limit_503"`
	RateLimited int64   `json:"rate_limited_429"`
	Other       int64   `json:"other"`
	FirstOther  string  `json:"first_other,omitempty"`
}

// stormQuiet is how long the storm fault measures the relays' CPU before
// it starts the storm, the baseline of relay_cpu_cores.
const stormQuiet = 5 * time.Second

// stormArgs are the arguments before the storm's own flags with which the
// storm fault starts this executable again: "buzz-bench soak storm" runs
// RunStorm.
var stormArgs = []string{"soak", "storm"}

// storm is the fault: it starts "buzz-bench soak storm" against every relay and
// community, lowers its priority, and reports what it saw, with the CPU
// the relays used before and during the storm and the CPU of the storm
// process itself. The fault's window (and its honest p99) begins with the
// storm, after the quiet measurement.
func (s *soakRun) storm(ctx context.Context, r *faultReport) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("storm: %w", err)
	}
	relayCPU := func() float64 {
		var sum float64
		for _, p := range s.relays {
			sum += cpuSeconds(p.pid())
		}
		return sum
	}
	c0, t0 := relayCPU(), time.Now()
	sleepCtx(ctx, stormQuiet)
	c1, t1 := relayCPU(), time.Now()
	r.AtS += t1.Sub(r.began).Seconds()
	r.began = t1
	args := append(slices.Clone(stormArgs), "--conns", strconv.Itoa(s.cfg.stormConns), "--time", s.cfg.stormFor.String(), "--from", stormFrom)
	for _, p := range s.relays {
		args = append(args, "--url", p.wsURL)
	}
	for _, c := range s.comms {
		args = append(args, "--host", c.host)
	}
	// The process's own cap is --storm-time; this one covers a hang.
	cctx, cancel := context.WithTimeout(ctx, s.cfg.stormFor+30*time.Second)
	defer cancel()
	// nice(1) lowers the priority before the storm's runtime starts any
	// thread (threads inherit it; renicing the started process would
	// race with the threads it is creating).
	cmd := exec.CommandContext(cctx, "nice", append([]string{"-n", strconv.Itoa(stormNice), self}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("storm: start: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("storm: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	c2, t2 := relayCPU(), time.Now()
	r.Observed["relay_cpu_cores_before"] = round2((c1 - c0) / t1.Sub(t0).Seconds())
	r.Observed["relay_cpu_cores_during"] = round2((c2 - c1) / t2.Sub(t1).Seconds())
	r.Observed["storm_cpu_cores"] = round2((cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds() / t2.Sub(t1).Seconds())
	// The result's fields go into the report under their JSON names.
	var res stormResult
	if err := errors.Join(json.Unmarshal(stdout.Bytes(), &res), json.Unmarshal(stdout.Bytes(), &r.Observed)); err != nil {
		return fmt.Errorf("storm: its result: %w (%q)", err, stdout.String())
	}
	if res.Other > 0 {
		return fmt.Errorf("storm: %d connections ended otherwise than refused (first: %s)", res.Other, res.FirstOther)
	}
	return nil
}

// RunStorm is "buzz-bench soak storm", the storm fault's own process:
// 64 goroutines open --conns connections in
// all, round robin over the --url relays and --host communities, each
// answering its challenge with a forged AUTH and closing once refused, for
// at most --time. It prints a stormResult and returns 0, or 2 on a bad
// flag. args are the flags alone.
func RunStorm(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("buzz-bench soak storm", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var urls, hosts []string
	fs.Func("url", "relay WebSocket URL (repeatable)", func(v string) error { urls = append(urls, v); return nil })
	fs.Func("host", "community host sent as Host (repeatable)", func(v string) error { hosts = append(hosts, v); return nil })
	conns := fs.Int("conns", 3000, "connections opened")
	limit := fs.Duration("time", 10*time.Second, "cap on the duration")
	from := fs.String("from", "", "local address to dial from (default: any)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(urls) == 0 || len(hosts) == 0 || *conns < 1 || *limit <= 0 {
		fmt.Fprintln(stderr, "buzz-bench soak storm: want --url, --host, --conns ≥ 1 and --time > 0")
		return 2
	}
	dialer := &net.Dialer{}
	if *from != "" {
		ip := net.ParseIP(*from)
		if ip == nil {
			fmt.Fprintf(stderr, "buzz-bench soak storm: --from %q is not an IP address\n", *from)
			return 2
		}
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
		// Without this, bind() picks the source port alone, so each port
		// serves one connection at a time and thousands held in TIME_WAIT
		// make the search for a free one slow; with it, connect() picks the
		// port per destination, as an unbound socket does.
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
			})
			return errors.Join(err, serr)
		}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	sctx, cancel := context.WithTimeout(ctx, *limit)
	defer cancel()
	var next, done, refusedAuth, timedOut, refusedConn, limited, other atomic.Int64
	var firstOther atomic.Value
	began := time.Now()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for sctx.Err() == nil && next.Add(1) <= int64(*conns) {
				c, err := rawAuth(sctx, urls[g%len(urls)], hosts[g%len(hosts)], hc, nil)
				switch {
				case err == nil:
					other.Add(1) // a forged AUTH accepted
					firstOther.CompareAndSwap(nil, "forged AUTH accepted")
					c.CloseNow()
				case errors.Is(err, errAuthRefused):
					refusedAuth.Add(1)
				case errors.Is(err, errAuthTimeout):
					timedOut.Add(1)
				case strings.Contains(err.Error(), "HTTP 503"):
					refusedConn.Add(1)
				case strings.Contains(err.Error(), "HTTP 429"):
					limited.Add(1)
				case sctx.Err() != nil:
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	res := stormResult{
		Connections: done.Load(),
		PerSecond:   round1(float64(done.Load()) / time.Since(began).Seconds()),
		AuthRefused: refusedAuth.Load(),
		AuthTimeout: timedOut.Load(),
		Limit503:    refusedConn.Load(),
		RateLimited: limited.Load(),
		Other:       other.Load(),
	}
	if v, ok := firstOther.Load().(string); ok {
		res.FirstOther = v
	}
	w := bufio.NewWriter(stdout)
	writeLine(w, res)
	_ = w.Flush()
	return 0
}

// errAuthRefused is an AUTH the relay answered OK false.
var errAuthRefused = errors.New("auth refused")

// errAuthTimeout is a connection the relay closed for want of a valid AUTH
// within its auth timeout (1008 "auth timeout"): a refusal too, seen when the
// machine is so loaded that the storm's AUTH, or the relay's reading of it,
// comes after the timer.
var errAuthTimeout = errors.New("auth timeout")

// rawAuth opens a WebSocket to url with Host host, reads the challenge and
// answers it. With a key it signs a valid AUTH. Without one it forges the
// AUTH a flood costs the relay most for: this connection's challenge and
// the right relay tag, a correct id, and a signature of random bytes, so
// the relay must run the Schnorr check to refuse it (errAuthRefused).
func rawAuth(ctx context.Context, url, host string, hc *http.Client, sk []byte) (*websocket.Conn, error) {
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{Host: host, HTTPClient: hc})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial: HTTP %d", resp.StatusCode)
		}
		return nil, fmt.Errorf("dial: %w", err)
	}
	c.SetReadLimit(8 << 20)
	var challenge string
	for challenge == "" {
		_, b, err := c.Read(ctx)
		if err != nil {
			c.CloseNow()
			return nil, fmt.Errorf("read challenge: %w", err)
		}
		var f []any
		if json.Unmarshal(b, &f) == nil && len(f) == 2 && f[0] == "AUTH" {
			challenge, _ = f[1].(string)
		}
	}
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindAuth,
		Tags: event.Tags{{"relay", "ws://" + host}, {"challenge", challenge}}}
	if sk != nil {
		if err := ev.Sign(sk); err != nil {
			c.CloseNow()
			return nil, err
		}
	} else {
		var junk [96]byte
		_, _ = rand.Read(junk[:])
		ev.PubKey = hex.EncodeToString(junk[:32])
		ev.ID = ev.ComputeID()
		ev.Sig = hex.EncodeToString(junk[32:])
	}
	b, _ := json.Marshal([]any{"AUTH", ev})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		c.CloseNow()
		return nil, fmt.Errorf("send auth: %w", err)
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			c.CloseNow()
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusPolicyViolation && ce.Reason == "auth timeout" {
				return nil, errAuthTimeout
			}
			return nil, fmt.Errorf("read auth answer: %w", err)
		}
		var f []any
		if json.Unmarshal(b, &f) != nil || len(f) < 3 || f[0] != "OK" || f[1] != ev.ID {
			continue
		}
		if f[2] != true {
			c.CloseNow()
			return nil, errAuthRefused
		}
		return c, nil
	}
}
