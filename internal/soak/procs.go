package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// freePort returns a TCP port that was free on every interface a moment
// ago, chosen below the kernel's ephemeral range: a relay restarted after
// kill -9 binds its ports again, and a port in that range may meanwhile be
// the source port of an outgoing connection (the storm makes thousands,
// each then held 60 s in TIME_WAIT), which makes the bind fail.
func freePort() (int, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				low = n
			}
		}
	}
	for range 200 {
		port := 1024 + mrand.IntN(low-1024)
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, errors.New("find a free port: 200 tries below the ephemeral range failed")
}

// database is the soak's own PostgreSQL cluster (package pgcluster, unix
// socket only, durable settings), which the fault scenarios stop and start.
type database struct {
	cfg pgcluster.Config
	mu  sync.Mutex
	c   *pgcluster.Cluster
}

func startDatabase(ctx context.Context, dir string) (*database, error) {
	d := &database{cfg: pgcluster.Config{DataDir: dir, Settings: map[string]string{"max_connections": "300"}}}
	if err := d.start(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *database) start(ctx context.Context) error {
	c, err := pgcluster.Start(ctx, d.cfg)
	if err != nil {
		return fmt.Errorf("start the soak's database: %w", err)
	}
	d.mu.Lock()
	d.c = c
	d.mu.Unlock()
	return nil
}

// URL is the cluster's connection URL; it stays the same across restarts.
func (d *database) URL() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c.URL()
}

// postmasterPID reads the running postmaster's pid.
func (d *database) postmasterPID() (int, error) {
	d.mu.Lock()
	dataDir := d.c.DataDir()
	d.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// shutdown stops the server in PostgreSQL's fast mode (SIGINT: sessions
// rolled back, a checkpoint written) or immediate mode (SIGQUIT: no
// checkpoint, crash recovery at the next start), and waits until the
// postmaster is gone.
func (d *database) shutdown(ctx context.Context, immediate bool) error {
	pid, err := d.postmasterPID()
	if err != nil {
		return err
	}
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal postmaster %d: %w", pid, err)
	}
	gone := func() (bool, error) { return syscall.Kill(pid, 0) != nil, nil }
	if err := poll(ctx, 50*time.Millisecond, time.Time{}, gone); err != nil {
		return fmt.Errorf("postmaster %d still running: %w", pid, err)
	}
	return nil
}

// stop ends the cluster for good (fast mode).
func (d *database) stop(ctx context.Context) error {
	return pgcluster.StopDataDir(ctx, d.cfg)
}

// redisServer is a redis-server on a loopback port the soak owns, with
// persistence off, that a fault scenario kills and starts again on the
// same port.
type redisServer struct {
	bin, dir string
	port     int
	mu       sync.Mutex
	proc     *child // nil while killed
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (Debian: apt-get install -y redis-server): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{bin: bin, dir: dir, port: port}
	return r, r.start(ctx)
}

// URL is the server's redis:// URL.
func (r *redisServer) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) start(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("redis dir: %w", err)
	}
	proc, err := startChild(filepath.Join(r.dir, "redis.log"), nil, r.bin, "--bind", "127.0.0.1",
		"--port", strconv.Itoa(r.port), "--save", "", "--appendonly", "no", "--dir", r.dir)
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.mu.Lock()
	r.proc = proc
	r.mu.Unlock()
	err = poll(ctx, 50*time.Millisecond, time.Now().Add(15*time.Second), func() (bool, error) {
		if !proc.alive() {
			return false, fmt.Errorf("redis-server exited at start (log in %s)", r.dir)
		}
		return redisPing(r.port), nil
	})
	if errors.Is(err, errTimedOut) {
		return errors.New("redis-server did not answer PING within 15 s")
	}
	return err
}

// redisPing sends PING in the inline protocol and waits for +PONG.
func redisPing(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := io.ReadFull(c, buf)
	return strings.HasPrefix(string(buf[:n]), "+PONG")
}

// kill ends the server with SIGKILL and waits for it.
func (r *redisServer) kill() {
	r.mu.Lock()
	proc := r.proc
	r.proc = nil
	r.mu.Unlock()
	if proc != nil {
		proc.stop(syscall.SIGKILL, 0)
	}
}

// child is one run of a process the soak started, its output appended to
// a log file.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has ended
}

// startChild runs bin with args; env nil means this process's environment.
func startChild(logPath string, env []string, bin string, args ...string) (*child, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(c.exited)
	}()
	return c, nil
}

// alive reports whether the process has not ended yet.
func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop sends sig and waits up to d for the process to end, then sends
// SIGKILL and waits for that. It does nothing when the process has ended.
func (c *child) stop(sig syscall.Signal, d time.Duration) {
	if !c.alive() {
		return
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(d):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// relayProc is one buzz-relay serve process the soak started.
type relayProc struct {
	name       string
	bin        string
	env        []string
	logPath    string
	wsURL      string // ws://127.0.0.1:port
	httpURL    string // http://127.0.0.1:port
	healthURL  string // http://127.0.0.1:port
	metricsURL string // http://127.0.0.1:port

	mu   sync.Mutex
	proc *child // nil before the first start
}

// newRelay prepares a relay on fresh loopback ports; extra is added to
// its environment.
func newRelay(name, bin, dir string, extra map[string]string) (*relayProc, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"),
		"BUZZ_BIND_ADDR":    "127.0.0.1:" + strconv.Itoa(ports[0]),
		"BUZZ_HEALTH_PORT":  strconv.Itoa(ports[1]),
		"BUZZ_METRICS_PORT": strconv.Itoa(ports[2]),
		"BUZZ_LOG_FORMAT":   "json",
	}
	for k, v := range extra {
		env[k] = v
	}
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	return &relayProc{name: name, bin: bin, env: list, logPath: filepath.Join(dir, name+".log"),
		wsURL: "ws://" + env["BUZZ_BIND_ADDR"], httpURL: "http://" + env["BUZZ_BIND_ADDR"],
		healthURL: "http://127.0.0.1:" + env["BUZZ_HEALTH_PORT"], metricsURL: "http://127.0.0.1:" + env["BUZZ_METRICS_PORT"]}, nil
}

// start runs the process and waits until /_readiness answers 200.
func (p *relayProc) start(ctx context.Context) error {
	proc, err := startChild(p.logPath, p.env, p.bin, "serve")
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.mu.Lock()
	p.proc = proc
	p.mu.Unlock()
	return p.waitReadiness(ctx, http.StatusOK, 2*time.Minute)
}

// pid is the running process's pid, 0 when none runs.
func (p *relayProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || !p.proc.alive() {
		return 0
	}
	return p.proc.cmd.Process.Pid
}

// running reports whether the process is alive.
func (p *relayProc) running() bool { return p.pid() != 0 }

// readiness is the status /_readiness answers now, 0 when it does not answer.
func (p *relayProc) readiness() int {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(p.healthURL + "/_readiness")
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// waitReadiness polls /_readiness until it answers want, for up to d.
func (p *relayProc) waitReadiness(ctx context.Context, want int, d time.Duration) error {
	err := poll(ctx, 50*time.Millisecond, time.Now().Add(d), func() (bool, error) {
		if p.readiness() == want {
			return true, nil
		}
		if want == http.StatusOK && !p.running() {
			return false, fmt.Errorf("%s exited (log: %s): %s", p.name, p.logPath, logTail(p.logPath, 3))
		}
		return false, nil
	})
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("%s: /_readiness did not answer %d within %s (log: %s)", p.name, want, d, p.logPath)
	}
	return err
}

// errTimedOut is poll's answer when its deadline passed.
var errTimedOut = errors.New("timed out")

// poll calls check every interval until it reports done or fails, ctx ends,
// or deadline passes (errTimedOut; a zero deadline never passes).
func poll(ctx context.Context, every time.Duration, deadline time.Time, check func() (bool, error)) error {
	for {
		done, err := check()
		if done || err != nil {
			return err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return errTimedOut
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every): // polling interval
		}
	}
}

// signal sends sig and waits up to d for the process to end; after d it
// sends SIGKILL. It does nothing when the process is not running.
func (p *relayProc) signal(sig syscall.Signal, d time.Duration) {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		proc.stop(sig, d)
	}
}

// procFile reads /proc/<pid>/<name>; nil when pid is 0 or gone.
func procFile(pid int, name string) []byte {
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		return nil
	}
	return b
}

// rssBytes is the resident set of pid from /proc, 0 when unknown.
func rssBytes(pid int) int64 {
	b := procFile(pid, "status")
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// cpuSeconds is the user and system CPU time pid has used, from
// /proc/<pid>/stat (in clock ticks of 1/100 s, the value Linux reports to
// user space on every architecture the relay runs on); 0 when pid is 0
// or gone.
func cpuSeconds(pid int) float64 {
	b := procFile(pid, "stat")
	if b == nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after it (state is the first, utime the 12th, stime the 13th).
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// runRelayCommand runs `buzz-relay args…` with env to completion.
func runRelayCommand(ctx context.Context, bin string, env []string, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(out), exitErr.ExitCode(), nil
	}
	if err != nil {
		return string(out), -1, fmt.Errorf("run buzz-relay %s: %w", strings.Join(args, " "), err)
	}
	return string(out), 0, nil
}

// logTail is the last n lines of the log at path: the work directory is
// removed at the end, so an error that points at a log quotes it.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
