package main

// The tests of this package run the real binary: TestMain builds it once,
// and each test starts it with exec.Command and an explicit environment
// (never the test process's DATABASE_URL or BUZZ_* variables), on free
// loopback ports, against a dbtest database or a private cluster under
// t.TempDir().

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// binary is the buzz-relay built by TestMain.
var binary string

func TestMain(m *testing.M) { dbtest.MainWithBinary(m, "buzz-relay", &binary) }

// baseEnv is the environment every run starts from: PATH and HOME only.
func baseEnv() map[string]string {
	return map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
}

// environ turns vars into a sorted KEY=value list.
func environ(vars map[string]string) []string {
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// freePorts returns n TCP ports that were free a moment ago on every
// interface (the relay binds its health and metrics ports on all of them)
// and that no other test of this process was given: all n are held open
// together, and every port handed out is remembered. They are drawn below
// the kernel's ephemeral range (32768 and up here), which the many
// loopback connections of parallel tests keep taking source ports from.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		require.Less(t, tries, 10000, "no free port below the ephemeral range")
		p := 1024 + mrand.IntN(32768-1024)
		if _, taken := handedOut.LoadOrStore(p, struct{}{}); taken {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		defer l.Close()
		ports = append(ports, p)
	}
	return ports
}

// handedOut holds every port freePorts returned in this test process.
var handedOut sync.Map

// result is a finished command.
type result struct {
	Code   int
	Stdout string
	Stderr string
}

// lines returns the JSON objects printed on stdout, one per line.
func (r result) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "stdout line %q", line)
		out = append(out, m)
	}
	return out
}

// runBinary runs buzz-relay with args and env to completion (1 min at most).
func runBinary(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runBinaryInput(t, env, nil, args...)
}

// runBinaryInput is runBinary with stdin read from in (nil: no input).
func runBinaryInput(t *testing.T, env map[string]string, in io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = environ(env)
	cmd.Stdin = in
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.Exited():
		res.Code = exitErr.ExitCode()
	default:
		t.Fatalf("run buzz-relay %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, res.Stdout, res.Stderr)
	}
	return res
}

// relayProc is a running `buzz-relay serve`.
type relayProc struct {
	t   *testing.T
	cmd *exec.Cmd
	// Env is the environment it was started with; operator commands reuse it.
	Env       map[string]string
	AppAddr   string // 127.0.0.1:<port>
	HealthURL string // http://127.0.0.1:<port>
	Stdout    *logtest.Buffer
	Stderr    *logtest.Buffer
	done      chan struct{}
	waitErr   error
}

// relayEnv returns the environment of a relay on fresh loopback ports, with
// JSON logs. Callers add DATABASE_URL or BUZZ_DATA_DIR and overrides.
func relayEnv(t *testing.T) map[string]string {
	t.Helper()
	env := baseEnv()
	ports := freePorts(t, 3)
	env["BUZZ_BIND_ADDR"] = "127.0.0.1:" + strconv.Itoa(ports[0])
	env["BUZZ_HEALTH_PORT"] = strconv.Itoa(ports[1])
	env["BUZZ_METRICS_PORT"] = strconv.Itoa(ports[2])
	env["BUZZ_LOG_FORMAT"] = "json"
	env["BUZZ_DB_POOL_SIZE"] = "5"
	// Per-user quotas and the read-time budget off, as relaytest does: these tests are about
	// other things and some publish faster than a person.
	for _, name := range []string{"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN", "BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN",
		"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC", "BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN",
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN", "BUZZ_CHANNEL_CREATES_PER_HOUR",
		"BUZZ_READ_TIME_PER_SECOND_MS"} {
		env[name] = "0"
	}
	return env
}

// externalEnv is relayEnv on a fresh migrated database of its own.
func externalEnv(t *testing.T) map[string]string {
	t.Helper()
	_, url := dbtest.NewDB(t)
	env := relayEnv(t)
	env["DATABASE_URL"] = url
	return env
}

// privateEnv is relayEnv with no DATABASE_URL: a private cluster under a
// temporary BUZZ_DATA_DIR, stopped when the test ends.
func privateEnv(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	env := relayEnv(t)
	env["BUZZ_DATA_DIR"] = dir
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(func() { stopCluster(t, dir) })
	return env
}

// stopCluster stops the postmaster under dataDir, whoever started it.
func stopCluster(t *testing.T, dataDir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgcluster.StopDataDir(ctx, pgcluster.Config{DataDir: dataDir}); err != nil {
		t.Errorf("stop private cluster under %s: %v", dataDir, err)
	}
}

// startRelay starts `buzz-relay serve` with env and returns without
// waiting. The process is stopped (SIGTERM, then SIGKILL) when the test
// ends, and its output is logged when the test failed.
func startRelay(t *testing.T, env map[string]string) *relayProc {
	t.Helper()
	cmd := exec.Command(binary, "serve")
	cmd.Env = environ(env)
	cmd.WaitDelay = 5 * time.Second
	p := &relayProc{t: t, cmd: cmd, Env: env, AppAddr: env["BUZZ_BIND_ADDR"],
		HealthURL: "http://127.0.0.1:" + env["BUZZ_HEALTH_PORT"],
		Stdout:    &logtest.Buffer{}, Stderr: &logtest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	require.NoError(t, cmd.Start())
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("buzz-relay stdout:\n%s\nbuzz-relay stderr:\n%s", p.Stdout, p.Stderr)
		}
	})
	return p
}

// startReady starts the relay and waits until /_readiness answers 200.
func startReady(t *testing.T, env map[string]string) *relayProc {
	t.Helper()
	p := startRelay(t, env)
	p.waitReady()
	return p
}

// stop ends the process: SIGTERM, then SIGKILL after 30 s. Safe to call twice.
func (p *relayProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has ended.
func (p *relayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit and returns its exit status.
func (p *relayProc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("buzz-relay still running after %s", d)
	}
	var exitErr *exec.ExitError
	if errors.As(p.waitErr, &exitErr) {
		return exitErr.ExitCode()
	}
	require.NoError(p.t, p.waitErr)
	return 0
}

// waitReady polls /_readiness until it answers 200, for up to 2 minutes
// (a first start runs initdb), failing early when the process exits.
func (p *relayProc) waitReady() {
	p.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if p.exited() {
			p.t.Fatalf("buzz-relay exited before it was ready: %v\nstdout:\n%s\nstderr:\n%s", p.waitErr, p.Stdout, p.Stderr)
		}
		if code, _, err := httpGet(p.HealthURL + "/_readiness"); err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("buzz-relay not ready after 2 minutes\nstdout:\n%s\nstderr:\n%s", p.Stdout, p.Stderr)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// pollHealth polls path on the health listener until match accepts the
// answer, failing after d.
func (p *relayProc) pollHealth(path string, d time.Duration, match func(code int, body string) bool) (int, string) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	var code int
	var body string
	var err error
	for {
		code, body, err = httpGet(p.HealthURL + path)
		if err == nil && match(code, body) {
			return code, body
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("GET %s: no matching answer within %s (last: %d %q, %v)", path, d, code, body, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// logRecords parses the JSON log lines written on stdout so far.
func (p *relayProc) logRecords() []map[string]any {
	return parseLog(p.Stdout.String())
}

func parseLog(s string) []map[string]any {
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			recs = append(recs, m)
		}
	}
	return recs
}

// httpGet fetches url on a connection that is not kept alive (nothing is
// left running for goleak) and returns status and body.
func httpGet(url string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
