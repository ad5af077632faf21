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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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

// database is the soak's PostgreSQL (package pgcluster: unix sockets only,
// durable settings), which the fault scenarios stop, start and kill. It is
// one cluster, or, when the run's faults include failover, a primary and a
// synchronous streaming standby cloned from it (docs/OPERATIONS.md "High
// availability"), which the relays reach through one multi-host URL.
//
// The pair's two members keep their places (directories, sockets, and so
// their order in the URL) while their roles change: after a failover the
// promoted standby is the primary, and a new standby is cloned from it
// into the dead primary's place. Whatever the order of the faults, a stop
// or start of "the database" acts on the current primary.
type database struct {
	url string // what the relays' DATABASE_URL is; it never changes

	mu      sync.Mutex
	members []*dbMember // one, or two in URL order
	primary int         // index of the writer in members
	standby bool        // the other member streams as a synchronous standby
}

// dbMember is one cluster of the soak's database, in its own place.
type dbMember struct {
	name string // "a" or "b"; as a standby its application_name and slot are "soak_"+name
	cfg  pgcluster.Config
	c    *pgcluster.Cluster
}

// standbyName is the application_name and replication slot of m as a standby.
func (m *dbMember) standbyName() string { return "soak_" + m.name }

// dbSettings are the server settings of every member: the relays' pools
// and the soak's own connections need more than the default 200
// connections, and a standby has to have at least the primary's. A
// standby whose primary restarted (pg-fast, pg-immediate) connects again
// within a second, so a commit waits for it at most about that long.
var dbSettings = map[string]string{"max_connections": "300", "wal_retrieve_retry_interval": "1s"}

// startDatabase starts the soak's cluster in dir, and with withStandby a
// synchronous standby of it in dir+"-b".
func startDatabase(ctx context.Context, dir string, withStandby bool) (*database, error) {
	a := &dbMember{name: "a", cfg: pgcluster.Config{DataDir: dir, Settings: dbSettings}}
	c, err := pgcluster.Start(ctx, a.cfg)
	if err != nil {
		return nil, fmt.Errorf("start the soak's database: %w", err)
	}
	a.c = c
	d := &database{url: c.URL(), members: []*dbMember{a}}
	if !withStandby {
		return d, nil
	}
	b := &dbMember{name: "b", cfg: pgcluster.Config{DataDir: dir + "-b", Settings: dbSettings}}
	d.members = append(d.members, b)
	if err := d.cloneStandby(ctx, b, a); err != nil {
		return d, err
	}
	d.url = failoverURL(a.c.SocketDir(), b.c.SocketDir())
	return d, nil
}

// cloneStandby makes m a synchronous standby of primary: a clone with
// pg_basebackup, started, and named in the primary's
// synchronous_standby_names.
func (d *database) cloneStandby(ctx context.Context, m, primary *dbMember) error {
	c, err := pgcluster.StartStandby(ctx, m.cfg, primary.c, m.standbyName())
	if err != nil {
		return fmt.Errorf("start the soak's standby: %w", err)
	}
	d.mu.Lock()
	m.c = c
	d.mu.Unlock()
	if err := primary.c.SetSynchronousStandby(ctx, m.standbyName()); err != nil {
		return fmt.Errorf("make the soak's standby synchronous: %w", err)
	}
	d.mu.Lock()
	d.standby = true
	d.mu.Unlock()
	return nil
}

// failoverURL names both members' sockets, with target_session_attrs=
// read-write: each new connection goes to whichever of them accepts
// writes (docs/OPERATIONS.md "High availability").
func failoverURL(sockA, sockB string) string {
	port := strconv.Itoa(pgcluster.Port)
	q := url.Values{"host": {sockA + "," + sockB}, "port": {port + "," + port}, "sslmode": {"disable"},
		"target_session_attrs": {"read-write"}}
	return (&url.URL{Scheme: "postgres", User: url.User(pgcluster.Role), Path: "/" + pgcluster.Database, RawQuery: q.Encode()}).String()
}

// URL is the database's connection URL: the cluster's, or the pair's
// multi-host URL, which reaches the current primary. It stays the same
// across restarts and failovers.
func (d *database) URL() string { return d.url }

// hasStandby reports whether a synchronous standby streams from the primary.
func (d *database) hasStandby() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.standby
}

// current is the member that is the primary now.
func (d *database) current() *dbMember {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.members[d.primary]
}

// start starts the current primary again after shutdown.
func (d *database) start(ctx context.Context) error {
	m := d.current()
	c, err := pgcluster.Start(ctx, m.cfg)
	if err != nil {
		return fmt.Errorf("start the soak's database: %w", err)
	}
	d.mu.Lock()
	m.c = c
	d.mu.Unlock()
	return nil
}

// postmasterPID reads the current primary's postmaster.pid: the pid, and
// the whole file's lines.
func (d *database) postmasterPID() (int, []string, error) {
	m := d.current()
	d.mu.Lock()
	dataDir := m.c.DataDir()
	d.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, nil, fmt.Errorf("read postmaster.pid: %w", err)
	}
	// Lines: pid, data dir, start time, port, socket dir, listen address,
	// "shmem key  shmem id", status.
	lines := strings.Split(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return 0, nil, fmt.Errorf("read postmaster.pid of %s: bad pid %q", dataDir, lines[0])
	}
	return pid, lines, nil
}

// shutdown stops the current primary in PostgreSQL's fast mode (SIGINT:
// sessions rolled back, a checkpoint written) or immediate mode (SIGQUIT:
// no checkpoint, crash recovery at the next start), and waits until the
// postmaster is gone. A standby stays up and streams again once the
// primary is back.
func (d *database) shutdown(ctx context.Context, immediate bool) error {
	pid, _, err := d.postmasterPID()
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

// killPrimary ends the current primary as a crashed host would: SIGKILL
// to its postmaster and to every process the postmaster started (each
// backend leads a process group of its own), so no backend goes on
// answering its open connection, and none commits, after the kill. The
// postmaster is stopped (SIGSTOP) first, so it forks nothing while its
// children are listed. It returns the postmaster's pid once every one of
// them is gone, with the postmaster.pid, the socket and the System V shared
// memory segment they leave removed: this cluster never starts again (a
// new standby is cloned into its place).
func (d *database) killPrimary(ctx context.Context) (int, error) {
	pid, lines, err := d.postmasterPID()
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("stop postmaster %d: %w", pid, err)
	}
	procs := append([]int{pid}, childrenOf(pid)...)
	for _, p := range procs {
		_ = syscall.Kill(-p, syscall.SIGKILL) // its process group, when it leads one
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if len(lines) > 6 {
		if f := strings.Fields(lines[6]); len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil {
				_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
			}
		}
	}
	err = poll(ctx, 10*time.Millisecond, time.Now().Add(time.Minute), func() (bool, error) {
		for _, p := range procs {
			if processAlive(p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return pid, fmt.Errorf("postmaster %d or a backend of it still alive after SIGKILL: %w", pid, err)
	}
	// The pids are free for reuse now: nothing may signal them, and the
	// server's files must not make a later one there look alive.
	m := d.current()
	d.mu.Lock()
	dataDir := m.c.DataDir()
	d.mu.Unlock()
	_ = os.Remove(filepath.Join(dataDir, "postmaster.pid"))
	if len(lines) > 4 {
		sock := filepath.Join(strings.TrimSpace(lines[4]), ".s.PGSQL."+strings.TrimSpace(lines[3]))
		_ = os.Remove(sock)
		_ = os.Remove(sock + ".lock")
	}
	return pid, nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …"; comm may hold spaces.
		b := procFile(p, "stat")
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, p)
		}
	}
	return kids
}

// processAlive reports whether pid is a live process (a zombie is not).
func processAlive(pid int) bool {
	b := procFile(pid, "stat")
	if b == nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// promote promotes the standby: it is the primary from then on, without
// a standby until rebuildStandby.
func (d *database) promote(ctx context.Context) error {
	d.mu.Lock()
	if !d.standby {
		d.mu.Unlock()
		return errors.New("promote: the soak's database has no standby")
	}
	next := 1 - d.primary
	m := d.members[next]
	d.mu.Unlock()
	if err := m.c.Promote(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	d.primary, d.standby = next, false
	d.mu.Unlock()
	return nil
}

// rebuildStandby clones a new synchronous standby from the primary into
// the other member's place (where the killed primary was), so the pair
// has its topology again.
func (d *database) rebuildStandby(ctx context.Context) error {
	d.mu.Lock()
	if len(d.members) != 2 || d.standby {
		d.mu.Unlock()
		return errors.New("rebuild the standby: the soak's database is not a pair without a standby")
	}
	primary, m := d.members[d.primary], d.members[1-d.primary]
	old := m.c
	d.mu.Unlock()
	if err := old.Stop(ctx); err != nil { // it is gone already: this only marks it stopped
		return fmt.Errorf("rebuild the standby: %w", err)
	}
	return d.cloneStandby(ctx, m, primary)
}

// stop ends every member for good (fast mode). A member killed by the
// failover and not rebuilt is only marked stopped, which also removes a
// socket directory pgcluster made for it under /tmp.
func (d *database) stop(ctx context.Context) error {
	var errs []error
	for _, m := range d.members {
		d.mu.Lock()
		c := m.c
		d.mu.Unlock()
		if c != nil {
			if err := c.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if err := pgcluster.StopDataDir(ctx, m.cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
