// Package standbytest runs a real PostgreSQL primary and a streaming hot
// standby made from it with pg_basebackup -R, for tests of the read
// replica and of writer failover. TEST ONLY: import it from _test.go
// files, never from production code.
//
// It owns one pair per Start: a fresh primary (a pgcluster under a
// temporary directory, migrated), a replication slot, and a standby
// cloned from it, each on its own unix socket directory and port (5432 and
// 5433; no TCP port is opened), run from the machine's PostgreSQL binaries
// found as pgcluster finds them. Tests get a writer URL, a replica URL and
// a failover URL naming both (target_session_attrs=read-write, as an
// operator configures DATABASE_URL for a primary and its standby), and can
// pause and resume replay (pg_wal_replay_pause), stop and start the
// standby, make it synchronous (StartWith), kill the primary's postmaster
// with SIGKILL and promote the standby. When the test ends both servers
// stop and the directory is removed; a detached watchdog does the same if
// the test process dies first. Missing binaries fail the test with install
// steps.
//
// It does NOT share pairs between tests (a paused or stopped standby is
// one test's business), it does NOT use dbtest's cluster or
// TEST_DATABASE_URL, and it does NOT fake anything: both are real servers
// and replication is PostgreSQL's own.
package standbytest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/pgcluster"
)

const (
	// StandbyPort names the standby's socket file (.s.PGSQL.5433); the
	// primary uses pgcluster.Port.
	StandbyPort = 5433
	// slot is the replication slot that keeps the primary's WAL for the
	// standby while it is stopped.
	slot = "standbytest"
	// waitTimeout bounds every wait of this package.
	waitTimeout = 60 * time.Second
)

// settings make both servers small and fast; their data is disposable.
// synchronous_commit stays on, so a commit is in the WAL the standby
// receives when it returns, as in production.
var settings = map[string]string{
	"fsync":                "off",
	"shared_buffers":       "32MB",
	"effective_cache_size": "128MB",
	"max_connections":      "60",
	"wal_level":            "replica",
	"max_wal_senders":      "4",
	"hot_standby":          "on",
	"min_wal_size":         "80MB", // PostgreSQL's default WAL reserve (pgcluster.Start)
}

// Options choose how StartWith builds a pair.
type Options struct {
	// Synchronous makes the standby synchronous: once it streams, the
	// primary sets synchronous_standby_names = '*' (ALTER SYSTEM, after
	// pg_basebackup, so the standby does not inherit it), and a COMMIT
	// returns only once the standby has flushed its WAL. Otherwise the
	// standby is asynchronous: a COMMIT does not wait for it.
	Synchronous bool
}

// Pair is a running primary and its streaming standby.
type Pair struct {
	// WriterURL is the migrated "buzz" database on the primary.
	WriterURL string
	// ReplicaURL is the same database on the standby (the writer once
	// Promote returned).
	ReplicaURL string
	// FailoverURL names both servers, primary first, with
	// target_session_attrs=read-write: a connection goes to whichever of
	// them accepts writes.
	FailoverURL string

	primary     *pgcluster.Cluster
	root        string
	binDir      string
	owner       *syscall.Credential // nil: the current user
	standbyData string
	standbyLog  string
	standbySock string

	mu sync.Mutex // serialises stop and start of the standby
}

// Start runs a fresh primary with every migration applied and an
// asynchronous standby streaming from it, and returns once the standby
// accepts connections. Both stop, and every file goes, when the test ends.
func Start(t testing.TB) *Pair {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with opts; with opts.Synchronous it returns once the
// primary reports the standby as synchronous.
func StartWith(t testing.TB, opts Options) *Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	binDir, err := findBinDir()
	if err != nil {
		t.Fatalf("standbytest: %v", err)
	}
	root, err := os.MkdirTemp("", "buzz-standby-")
	if err != nil {
		t.Fatalf("standbytest: create directory: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })

	primary, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: filepath.Join(root, "p"), BinDir: binDir, Settings: settings})
	if err != nil {
		t.Fatalf("standbytest: start primary: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := primary.Stop(sctx); err != nil {
			t.Errorf("standbytest: stop primary: %v", err)
		}
	})
	p := &Pair{WriterURL: primary.URL(), primary: primary, root: root, binDir: binDir}
	if p.owner, err = clusterOwner(); err != nil {
		t.Fatalf("standbytest: %v", err)
	}
	if err := migrate(ctx, p.WriterURL); err != nil {
		t.Fatalf("standbytest: %v", err)
	}

	dir := filepath.Join(root, "s")
	sock := filepath.Join(dir, "run")
	p.standbyData, p.standbyLog = filepath.Join(dir, "data"), filepath.Join(dir, "standby.log")
	for _, d := range []string{dir, sock} {
		if err := p.mkdirOwned(d); err != nil {
			t.Fatalf("standbytest: %v", err)
		}
	}
	startWatchdog(root, primary.DataDir(), p.standbyData)
	if out, err := p.run(ctx, dir, "pg_basebackup", "-D", p.standbyData, "-R", "-X", "stream", "-c", "fast",
		"-C", "-S", slot, "-h", primary.SocketDir(), "-p", strconv.Itoa(pgcluster.Port), "-U", pgcluster.Role); err != nil {
		t.Fatalf("standbytest: pg_basebackup: %v: %s", err, out)
	}
	p.standbySock = sock
	if err := p.writeSettings(p.standbyData, StandbyPort, sock); err != nil {
		t.Fatalf("standbytest: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := p.stop(sctx); err != nil {
			t.Errorf("standbytest: stop standby: %v", err)
		}
	})
	if err := p.start(ctx); err != nil {
		t.Fatalf("standbytest: start standby: %v", err)
	}
	p.ReplicaURL = socketURL(sock, StandbyPort)
	p.FailoverURL = failoverURL([]string{primary.SocketDir(), sock}, []int{pgcluster.Port, StandbyPort})
	if opts.Synchronous {
		p.exec(t, p.WriterURL, "ALTER SYSTEM SET synchronous_standby_names = '*'")
		p.exec(t, p.WriterURL, "SELECT pg_reload_conf()")
		p.waitFor(t, "standby synchronous", p.WriterURL, "SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync')")
	}
	return p
}

// KillPrimary sends the primary's postmaster SIGKILL, as a crashed host
// would stop it: no shutdown checkpoint, no goodbye to the standby or to
// clients; its backends notice the postmaster's death and exit. It returns
// once the postmaster is gone, its postmaster.pid removed (so nothing
// signals the pid once it is reused). Its System V shared memory segment is
// marked for removal (it goes when the last backend exits), so nothing
// outlives the test.
func (p *Pair) KillPrimary(t testing.TB) {
	t.Helper()
	pidFile := filepath.Join(p.primary.DataDir(), "postmaster.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("standbytest: kill primary: %v", err)
	}
	// Lines: pid, data dir, start time, port, socket dir, listen addr,
	// "shmem key  shmem id", status.
	lines := strings.Split(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		t.Fatalf("standbytest: kill primary: bad %s: %q", pidFile, lines[0])
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("standbytest: kill primary %d: %v", pid, err)
	}
	if len(lines) > 6 {
		if f := strings.Fields(lines[6]); len(f) == 2 {
			if id, err := strconv.Atoi(f[1]); err == nil {
				_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
			}
		}
	}
	deadline := time.Now().Add(waitTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("standbytest: primary %d still alive %s after SIGKILL", pid, waitTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The pid is free for reuse now: neither the cleanup nor the watchdog
	// may signal it.
	if err := os.Remove(pidFile); err != nil {
		t.Fatalf("standbytest: remove %s: %v", pidFile, err)
	}
}

// Promote ends recovery on the standby (pg_ctl promote) and returns once it
// accepts writes: it is then the primary of ReplicaURL and FailoverURL.
func (p *Pair) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if out, err := p.run(ctx, filepath.Dir(p.standbyData), "pg_ctl", "promote", "-D", p.standbyData,
		"-w", "-t", strconv.Itoa(int(waitTimeout/time.Second))); err != nil {
		t.Fatalf("standbytest: pg_ctl promote: %v: %s", err, out)
	}
	p.waitFor(t, "standby promoted", p.ReplicaURL, "SELECT NOT pg_is_in_recovery()")
}

// RejoinPrimary brings the killed primary back as a standby of the
// promoted one, as an operator returns a failed primary to service: its
// data directory is replaced by a base backup of the new primary
// (pg_basebackup with its own replication slot), from which it then
// streams, asynchronously, on its old address (WriterURL). It returns once
// the server accepts connections. Call it after KillPrimary and Promote.
func (p *Pair) RejoinPrimary(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	data := p.primary.DataDir()
	if err := os.RemoveAll(data); err != nil {
		t.Fatalf("standbytest: remove the old primary's data: %v", err)
	}
	dir := filepath.Dir(data)
	if out, err := p.run(ctx, dir, "pg_basebackup", "-D", data, "-R", "-X", "stream", "-c", "fast",
		"-C", "-S", "rejoined", "-h", p.standbySock, "-p", strconv.Itoa(StandbyPort), "-U", pgcluster.Role); err != nil {
		t.Fatalf("standbytest: pg_basebackup of the new primary: %v: %s", err, out)
	}
	if err := p.writeSettings(data, pgcluster.Port, p.primary.SocketDir()); err != nil {
		t.Fatalf("standbytest: %v", err)
	}
	// The killed postmaster can linger as a zombie until its parent reaps
	// it, and PostgreSQL's stale-lock check takes a zombie's pid for a
	// running server: its socket and lock file, stale since KillPrimary
	// saw it dead, go first.
	sock := filepath.Join(p.primary.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", pgcluster.Port))
	for _, f := range []string{sock + ".lock", sock} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("standbytest: remove the killed primary's %s: %v", f, err)
		}
	}
	logFile := filepath.Join(dir, "rejoined.log")
	if out, err := p.run(ctx, dir, "pg_ctl", "start", "-D", data, "-l", logFile,
		"-w", "-t", strconv.Itoa(int(waitTimeout/time.Second))); err != nil {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("standbytest: start the rejoined primary: %v: %s\nlog:\n%s", err, out, log)
	}
	p.waitFor(t, "rejoined as a standby", p.WriterURL, "SELECT pg_is_in_recovery()")
}

// alive reports whether pid is a live, not zombie, process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	return end < 0 || end+2 >= len(s) || (s[end+2] != 'Z' && s[end+2] != 'X')
}

// PauseReplay pauses WAL replay on the standby and returns once it is
// paused: the standby keeps receiving WAL but its snapshots stop moving.
func (p *Pair) PauseReplay(t testing.TB) {
	t.Helper()
	p.exec(t, p.ReplicaURL, "SELECT pg_wal_replay_pause()")
	p.waitFor(t, "replay paused", p.ReplicaURL, "SELECT pg_get_wal_replay_pause_state() = 'paused'")
}

// ResumeReplay resumes WAL replay on the standby.
func (p *Pair) ResumeReplay(t testing.TB) {
	t.Helper()
	p.exec(t, p.ReplicaURL, "SELECT pg_wal_replay_resume()")
}

// WaitReplayed returns once the standby has replayed everything the primary
// had written when it was called.
func (p *Pair) WaitReplayed(t testing.TB) {
	t.Helper()
	var lsn string
	p.query(t, p.WriterURL, "SELECT pg_current_wal_insert_lsn()::text", &lsn)
	p.waitFor(t, "standby replayed "+lsn, p.ReplicaURL, "SELECT pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn")
}

// StopStandby shuts the standby down (fast mode) and waits for it.
func (p *Pair) StopStandby(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.stop(ctx); err != nil {
		t.Fatalf("standbytest: stop standby: %v", err)
	}
}

// StartStandby starts the stopped standby again and returns once it
// accepts connections; it catches up from the replication slot.
func (p *Pair) StartStandby(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.start(ctx); err != nil {
		t.Fatalf("standbytest: start standby: %v", err)
	}
}

func (p *Pair) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out, err := p.run(ctx, filepath.Dir(p.standbyData), "pg_ctl", "start", "-D", p.standbyData, "-l", p.standbyLog,
		"-w", "-t", strconv.Itoa(int(waitTimeout/time.Second)))
	if err != nil {
		log, _ := os.ReadFile(p.standbyLog)
		return fmt.Errorf("pg_ctl start: %w: %s\nstandby log:\n%s", err, out, log)
	}
	return nil
}

func (p *Pair) stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := os.Stat(filepath.Join(p.standbyData, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		return nil // not running
	}
	out, err := p.run(ctx, filepath.Dir(p.standbyData), "pg_ctl", "stop", "-D", p.standbyData, "-m", "fast",
		"-w", "-t", strconv.Itoa(int(waitTimeout/time.Second)))
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// writeSettings replaces the buzz.conf pg_basebackup copied into dataDir
// from its source (the source's port and socket directory) with the
// server's own.
func (p *Pair) writeSettings(dataDir string, port int, sock string) error {
	all := map[string]string{
		"listen_addresses":        "''",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": "'" + strings.ReplaceAll(sock, "'", "''") + "'",
	}
	for k, v := range settings {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, all[k])
	}
	path := filepath.Join(dataDir, "buzz.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.chown(path)
}

// run executes a PostgreSQL binary as the cluster's owner, without
// inherited PG* variables.
func (p *Pair) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.binDir, name), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.owner}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	return cmd.CombinedOutput()
}

func (p *Pair) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return p.chown(dir)
}

func (p *Pair) chown(path string) error {
	if p.owner == nil {
		return nil
	}
	if err := os.Lchown(path, int(p.owner.Uid), int(p.owner.Gid)); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, pgcluster.SystemUser, err)
	}
	return nil
}

func (p *Pair) exec(t testing.TB, dbURL, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("standbytest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("standbytest: %s: %v", sql, err)
	}
}

func (p *Pair) query(t testing.TB, dbURL, sql string, dest any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("standbytest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql).Scan(dest); err != nil {
		t.Fatalf("standbytest: %s: %v", sql, err)
	}
}

// waitFor polls sql (one boolean) on dbURL every 10 ms until it is true.
func (p *Pair) waitFor(t testing.TB, what, dbURL, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("standbytest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var done bool
		if err := conn.QueryRow(ctx, sql).Scan(&done); err != nil {
			t.Fatalf("standbytest: wait for %s: %v", what, err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("standbytest: %s not within %s", what, waitTimeout)
		case <-tick.C:
		}
	}
}

func migrate(ctx context.Context, writerURL string) error {
	pool, err := pg.Open(ctx, writerURL, pg.PoolConfig{MaxConns: 2})
	if err != nil {
		return fmt.Errorf("open primary: %w", err)
	}
	defer pool.Close()
	if _, err := pg.Migrate(ctx, pool, pg.MigrateApply, nil); err != nil {
		return fmt.Errorf("migrate primary: %w", err)
	}
	return nil
}

// clusterOwner is the account pgcluster runs the server as: the current
// user, or pgcluster.SystemUser (which pgcluster.Start created) as root.
func clusterOwner() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(pgcluster.SystemUser)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", pgcluster.SystemUser, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("uid of %s: %w", pgcluster.SystemUser, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("gid of %s: %w", pgcluster.SystemUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// binaries are the programs a pair needs, side by side in one directory.
var binaries = []string{"initdb", "pg_ctl", "postgres", "pg_basebackup"}

// findBinDir returns the directory holding every binary: the one of initdb
// on PATH (symlinks resolved) first, then the newest
// /usr/lib/postgresql/*/bin, as pgcluster looks.
func findBinDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versioned, func(i, j int) bool { return majorOf(versioned[i]) > majorOf(versioned[j]) })
	dirs = append(dirs, versioned...)
	for _, dir := range dirs {
		if hasAll(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%s not found side by side (looked in %s); install the PostgreSQL server "+
		"(15 or newer), e.g. on Debian/Ubuntu: apt-get install -y postgresql", strings.Join(binaries, ", "), strings.Join(dirs, ", "))
}

func majorOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func hasAll(dir string) bool {
	for _, name := range binaries {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func socketURL(sockDir string, port int) string {
	q := url.Values{"host": {sockDir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(pgcluster.Role), Path: "/" + pgcluster.Database, RawQuery: q.Encode()}).String()
}

// failoverURL is the multi-host form of socketURL: hosts and ports
// comma-separated in order, and target_session_attrs=read-write.
func failoverURL(sockDirs []string, ports []int) string {
	ps := make([]string, len(ports))
	for i, port := range ports {
		ps[i] = strconv.Itoa(port)
	}
	q := url.Values{"host": {strings.Join(sockDirs, ",")}, "port": {strings.Join(ps, ",")}, "sslmode": {"disable"},
		"target_session_attrs": {"read-write"}}
	return (&url.URL{Scheme: "postgres", User: url.User(pgcluster.Role), Path: "/" + pgcluster.Database, RawQuery: q.Encode()}).String()
}

// startWatchdog launches a detached shell that, once this process has
// exited, sends both postmasters SIGQUIT (immediate shutdown) and removes
// root: it covers a test binary that dies before its cleanups run.
func startWatchdog(root, primaryData, standbyData string) {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done
for d in "$2" "$3"; do
  if [ -f "$d/postmaster.pid" ]; then kill -QUIT "$(head -n 1 "$d/postmaster.pid")" 2>/dev/null; fi
done
sleep 2
rm -rf "$4"`
	cmd := exec.Command("/bin/sh", "-c", script, "buzz-standbytest-watchdog",
		strconv.Itoa(os.Getpid()), primaryData, standbyData, root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// It outlives this process by design, so nobody waits for it.
	if err := cmd.Start(); err == nil {
		_ = cmd.Process.Release()
	}
}
