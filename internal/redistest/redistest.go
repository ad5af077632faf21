// Package redistest runs a real, throwaway redis-server for tests. TEST
// ONLY: import it from _test.go files, never from production code.
//
// It owns the server process: Start picks a free loopback port, runs
// redis-server from PATH on it with persistence off (--save "" and
// --appendonly no) and its working directory under t.TempDir(), and kills
// it when the test ends. Stop and Restart let a test cause an outage and
// end it on the same port, with fresh, empty state; Pause and Resume
// freeze the server without closing anything; Client gives a
// go-redis client for assertions (PUBSUB CHANNELS, PUBSUB NUMPAT, TTL) and
// Monitor a MONITOR connection that shows every command the server ran. A missing redis-server fails the test with the install step;
// nothing is ever skipped.
//
// It does NOT mock Redis, share a server between tests, or wrap the relay's
// pub/sub adapter (package pubsub does that work; its tests use this one).
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// reserved holds the ports of every Server of this test process, running or
// stopped, so Start never hands a stopped server's port to another test.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Server is one redis-server process on a loopback port that belongs to it
// for the whole test. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of redis-server.
type process struct {
	cmd    *exec.Cmd
	output *buffer
	exited chan struct{} // closed when the process has ended
}

// Start runs a fresh redis-server for t and waits until it answers PING.
// The server is killed, and its port released, when t ends; on failure its
// output is logged.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found on PATH: %v\n"+
			"Install it (Debian/Ubuntu: apt-get install -y redis-server).", err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.cleanup)
	// A port that was free a moment ago may be taken by the time
	// redis-server binds it; try a few before giving up.
	for attempt := 1; ; attempt++ {
		s.port = reservePort(t)
		err := s.start()
		if err == nil {
			return s
		}
		releasePort(s.port)
		if attempt == 3 {
			t.Fatalf("redistest: start redis-server: %v", err)
		}
	}
}

// URL is the server's redis:// URL. It stays the same across Stop and
// Restart.
func (s *Server) URL() string {
	return "redis://" + s.Addr()
}

// Addr is the server's host:port on loopback.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Stop kills the server and waits until it has ended: clients see their
// connections drop and new ones refused. The port stays reserved for
// Restart. Safe to call when already stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Restart stops the server if it runs and starts a new one on the same port
// with empty state, waiting until it answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	s.stopLocked()
	s.mu.Unlock()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open and the
// kernel still accepts new ones, but nothing is answered, as with a hung
// server or a black-holed route. Resume ends it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("redistest: %s: the server is stopped", sig)
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %s: %v", sig, err)
	}
}

// Client returns a new go-redis client on the server for assertions; it is
// closed when the test ends. It keeps working across Restart (it redials),
// never retries, and honours the deadlines of the contexts it is given.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// start runs redis-server on s.port and waits for PING.
func (s *Server) start() error {
	p := &process{output: &buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	)
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	if err := s.waitReady(p); err != nil {
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%w\nredis-server output:\n%s", err, p.output.String())
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// waitReady polls until the server answers PING, the process exits, or
// startTimeout passes. It speaks RESP on a plain connection, so a refused
// dial is just another poll.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(s.Addr())
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return errors.New("redis-server exited before answering PING")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PING answer within %s: %w", startTimeout, err)
		}
	}
}

// ping sends one PING on a new connection and expects +PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// stopLocked kills the running process, if any, and waits for it.
func (s *Server) stopLocked() {
	if s.proc == nil {
		return
	}
	_ = s.proc.cmd.Process.Kill()
	<-s.proc.exited
	s.proc = nil
}

// cleanup stops the server, logs its output when the test failed, and
// releases the port.
func (s *Server) cleanup() {
	s.mu.Lock()
	p := s.proc
	s.stopLocked()
	s.mu.Unlock()
	if p != nil && s.t.Failed() {
		if out := p.output.String(); out != "" {
			s.t.Logf("redistest: redis-server output:\n%s", out)
		}
	}
	if s.port != 0 {
		releasePort(s.port)
	}
}

// reservePort returns a loopback port that is free now and not reserved by
// another Server of this process, and reserves it.
func reservePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		reserved.Lock()
		taken := reserved.ports[port]
		if !taken {
			reserved.ports[port] = true
		}
		reserved.Unlock()
		if !taken {
			return port
		}
	}
	t.Fatalf("redistest: no free loopback port found")
	return 0
}

func releasePort(port int) {
	reserved.Lock()
	delete(reserved.ports, port)
	reserved.Unlock()
}

// buffer collects a process's output; safe for concurrent use.
type buffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Monitor is a MONITOR connection to the server: every command the server
// runs, from any client, as one line each in execution order.
type Monitor struct {
	s     *Server
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	grew  chan struct{} // signalled (non-blocking) on each new line
	done  chan struct{}
}

// Monitor opens a MONITOR connection; it is closed when the test ends or
// the server stops. Call Sync before reading Lines to be sure every command
// run so far is in.
func (s *Server) Monitor() *Monitor {
	s.t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		s.t.Fatalf("redistest: monitor: %v", err)
	}
	m := &Monitor{s: s, conn: conn, grew: make(chan struct{}, 1), done: make(chan struct{})}
	if _, err := conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		s.t.Fatalf("redistest: monitor: %v", err)
	}
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "+OK" {
		s.t.Fatalf("redistest: monitor: answer %q, %v", line, err)
	}
	go m.read(rd)
	s.t.Cleanup(func() {
		_ = conn.Close()
		<-m.done
	})
	return m
}

func (m *Monitor) read(rd *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		m.mu.Lock()
		m.lines = append(m.lines, strings.TrimSpace(strings.TrimPrefix(line, "+")))
		m.mu.Unlock()
		select {
		case m.grew <- struct{}{}:
		default:
		}
	}
}

// Lines returns the commands seen so far, each as the server prints them:
// `1700000000.123456 [0 127.0.0.1:50000] "SUBSCRIBE" "topic"`.
func (m *Monitor) Lines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// Sync runs a unique ECHO on the server and waits until the monitor shows
// it, so every command the server ran before is in Lines.
func (m *Monitor) Sync() {
	m.s.t.Helper()
	marker := fmt.Sprintf("redistest-sync-%d", time.Now().UnixNano())
	c := redis.NewClient(&redis.Options{Addr: m.s.Addr(), DialerRetries: 1, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Echo(context.Background(), marker).Err(); err != nil {
		m.s.t.Fatalf("redistest: monitor sync: %v", err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		for _, l := range m.Lines() {
			if strings.Contains(l, marker) {
				return
			}
		}
		select {
		case <-m.grew:
		case <-m.done:
			m.s.t.Fatalf("redistest: monitor closed before the sync marker")
		case <-deadline.C:
			m.s.t.Fatalf("redistest: monitor sync marker not seen within 10s")
		}
	}
}
