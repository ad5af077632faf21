package pgcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// Port only names the socket file (.s.PGSQL.5432); no TCP port is opened.
	Port = 5432
	// Database is the database created on first run and named by URL.
	Database = "buzz"
	// Role is the superuser initdb creates and URL connects as.
	Role = "buzz"

	// maxSocketPath keeps "<dir>/.s.PGSQL.5432.lock" under the ~107-byte
	// limit of unix socket paths.
	maxSocketPath = 100
	// socketFallbackRoot holds the socket directory of a cluster whose
	// data dir path is too long for a unix socket path.
	socketFallbackRoot = "/tmp"
	startTimeout       = 60 * time.Second
)

// DefaultSettings are written to buzz.conf in the cluster before every start,
// with the memory settings of MemorySettings on top. fsync stays on: the
// private cluster holds real data. min_wal_size is the WAL reserve Start
// keeps ahead of the writes (reserveWAL).
var DefaultSettings = map[string]string{
	"max_connections": "200",
	"min_wal_size":    "512MB",
}

// MemorySettings sizes the private cluster's memory from the machine's
// total memory (0 when unknown): shared_buffers a quarter of it, between
// 128MB and 8GB, and effective_cache_size half of it (a planner estimate of
// the page cache, at least 512MB). A relay's hot set is the recent
// partitions of events and their indexes; PostgreSQL's 128MB default holds
// only a few hundred thousand events, and every search or REQ past that
// reads from the kernel's cache. Operators override either with ALTER
// SYSTEM (postgresql.auto.conf is read after buzz.conf).
func MemorySettings(total uint64) map[string]string {
	const mb = 1 << 20
	shared := min(max(total/4, 128*mb), 8192*mb)
	cache := max(total/2, 512*mb)
	return map[string]string{
		"shared_buffers":       strconv.FormatUint(shared/mb, 10) + "MB",
		"effective_cache_size": strconv.FormatUint(cache/mb, 10) + "MB",
	}
}

// TotalMemory is the memory the cluster may use: MemTotal of /proc/meminfo,
// or the cgroup memory limit when one is set below it (a container); 0 when
// neither can be read.
func TotalMemory() uint64 {
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	return memoryLimit(read("/proc/meminfo"), read("/sys/fs/cgroup/memory.max"),
		read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
}

// memoryLimit is TotalMemory over the contents of /proc/meminfo and of the
// cgroup v2 and v1 limit files ("" for a file that cannot be read).
func memoryLimit(meminfo, cgroupV2, cgroupV1 string) uint64 {
	total := uint64(max(procField(meminfo, "MemTotal:"), 0)) << 10 // kB
	for _, limit := range []string{cgroupV2, cgroupV1} {
		// "max" (v2) or a huge number (v1) means no limit.
		n, err := strconv.ParseUint(strings.TrimSpace(limit), 10, 64)
		if err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}

// Config configures Start.
type Config struct {
	// DataDir is BUZZ_DATA_DIR (default "./buzz-data" is applied by config,
	// not here). The cluster lives in DataDir/pg. Required.
	DataDir string
	// Logger receives progress messages. Nil discards them.
	Logger *slog.Logger
	// BinDir, when set, is the only directory searched for initdb, pg_ctl and
	// postgres. Otherwise initdb is looked up on PATH, then in the newest
	// /usr/lib/postgresql/*/bin.
	BinDir string
	// Settings are extra server settings (name → value) applied on top of
	// DefaultSettings at every start; tests use it to turn fsync off.
	Settings map[string]string
}

// Cluster is a running private cluster. Its methods are safe for concurrent use.
type Cluster struct {
	log     *slog.Logger
	binDir  string
	dataDir string // PGDATA: DataDir/pg/data
	sockDir string
	port    int
	owner   owner
	started bool // this Cluster started the postmaster, so Stop stops it

	mu      sync.Mutex
	stopped bool
}

// Start makes the cluster under cfg.DataDir/pg ready and returns it: initdb
// on first run, removal of a stale postmaster.pid left by a crash, pg_ctl
// start, and creation of the "buzz" database. A postmaster already running
// on the directory is reused (and Stop will not stop it). Start may be
// called again after Stop.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("start private cluster: data dir is empty")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "pgcluster")
	binDir, err := findBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve data dir %s: %w", cfg.DataDir, err)
	}
	own, err := resolveOwner(log)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", root, err)
	}
	// Serialize Start/Stop across processes sharing the data dir.
	unlock, err := lockFile(filepath.Join(root, ".pgcluster.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	c := &Cluster{
		log:     log,
		binDir:  binDir,
		dataDir: filepath.Join(root, "pg", "data"),
		sockDir: socketDir(filepath.Join(root, "pg")),
		port:    Port,
		owner:   own,
	}
	if err := own.makeTraversable(root); err != nil {
		return nil, err
	}
	if err := own.mkdirOwned(filepath.Join(root, "pg"), 0o700); err != nil {
		return nil, err
	}
	if err := own.mkdirOwned(c.sockDir, 0o700); err != nil {
		return nil, err
	}
	if sock, port, reused, err := c.reuse(ctx); reused || err != nil {
		c.sockDir, c.port = sock, port
		return c, err
	}
	created, err := c.initdb(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.writeSettings(cfg.Settings); err != nil {
		return nil, err
	}
	need := c.hugePagesNeeded(ctx)
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	c.started = true
	c.reportHugePages(ctx, need)
	if err := c.ensureDatabase(ctx, c.urlFor("postgres"), 0); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	if created {
		if err := c.reserveWAL(ctx); err != nil {
			// The cluster works without the reserve; its first writes
			// pay for making their WAL files.
			log.Warn("could not reserve WAL files", slog.String("err", err.Error()))
		}
	}
	return c, nil
}

// reserveWAL puts min_wal_size of WAL files ahead of a new cluster's write
// position (docs/OPERATIONS.md "Private cluster or DATABASE_URL"). A new
// cluster has none: the transaction that first writes into a new WAL file
// waits while the server creates it and fills it with zeros (16 ms for
// 16 MB on a cloud disk), a stall every 16 MB of writes, about every 2,000
// short messages. A used cluster renames old files ahead of its writes at
// each checkpoint, up to min_wal_size, so only the start that ran initdb
// makes the reserve: it switches WAL files as many times and checkpoints
// once, which renames the files it passed ahead. Later starts leave the
// WAL alone, so a replication slot or an archiver that holds old files
// never makes them switch again.
func (c *Cluster) reserveWAL(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.urlFor("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var want int64
	if err := conn.QueryRow(ctx, `SELECT pg_size_bytes(current_setting('min_wal_size'))
		/ pg_size_bytes(current_setting('wal_segment_size'))`).Scan(&want); err != nil {
		return fmt.Errorf("read min_wal_size: %w", err)
	}
	start := time.Now()
	// Each switch needs a record in the file it ends; the message is
	// written to the WAL only (no table, no transaction).
	loop := fmt.Sprintf(`DO $$
		BEGIN
			FOR i IN 1..%d LOOP
				PERFORM pg_logical_emit_message(false, 'buzz', 'reserve WAL');
				PERFORM pg_switch_wal();
			END LOOP;
		END $$`, want)
	if _, err := conn.Exec(ctx, loop); err != nil {
		return fmt.Errorf("switch WAL files: %w", err)
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	var ahead int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_ls_waldir()
		WHERE name ~ '^[0-9A-F]{24}$' AND name > pg_walfile_name(pg_current_wal_lsn())`).Scan(&ahead); err != nil {
		return fmt.Errorf("count WAL files: %w", err)
	}
	c.log.Info("reserved WAL files ahead of the writes", slog.Int64("files", ahead),
		slog.Int64("min_wal_size_files", want), slog.Duration("took", time.Since(start)))
	return nil
}

// URL is the connection URL of the "buzz" database over the unix socket.
func (c *Cluster) URL() string {
	return c.urlFor(Database)
}

// SocketDir is the directory holding the server's unix socket.
func (c *Cluster) SocketDir() string { return c.sockDir }

// DataDir is PGDATA, the directory initdb created.
func (c *Cluster) DataDir() string { return c.dataDir }

func (c *Cluster) urlFor(db string) string {
	return socketURL(c.sockDir, c.port, db)
}

func socketURL(sockDir string, port int, db string) string {
	q := url.Values{"host": {sockDir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(Role), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// Stop shuts the server down with pg_ctl's fast mode (open sessions are
// rolled back, nothing committed is lost) and waits for it. It is safe to
// call twice. A postmaster that Start reused, rather than started, keeps
// running.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || !c.started {
		c.stopped = true
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		c.stopped = true // already gone (killed, or stopped by someone else)
		c.removeSocketFallback()
		return nil
	}
	if out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", "60"); err != nil {
		if _, _, _, alive := c.runningPostmaster(); alive {
			return fmt.Errorf("stop private cluster: %w: %s", err, out)
		}
	}
	c.stopped = true
	c.removeSocketFallback()
	c.log.Info("stopped")
	return nil
}

// removeSocketFallback removes the socket directory when it is the short
// one under /tmp that socketDir chose for a long data dir path, so a
// stopped cluster leaves nothing behind outside its data dir. The server
// removed its socket and lock file when it stopped; a directory that still
// holds something (another postmaster) is kept.
func (c *Cluster) removeSocketFallback() {
	if filepath.Dir(c.sockDir) != socketFallbackRoot {
		return
	}
	if err := os.Remove(c.sockDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Warn("socket directory left behind", slog.String("socket_dir", c.sockDir), slog.String("err", err.Error()))
	}
}

// reuse adopts a postmaster that is already running on the data directory
// and returns its socket directory and port. It reports false when there
// is none, or when it dies while we wait for it (a postmaster that was just
// killed is still visible for a moment).
func (c *Cluster) reuse(ctx context.Context) (sockDir string, port int, reused bool, err error) {
	pid, sock, port, alive := c.runningPostmaster()
	if !alive {
		return c.sockDir, c.port, false, nil
	}
	err = c.ensureDatabase(ctx, socketURL(sock, port, "postgres"), 10*time.Second)
	if err != nil {
		if _, _, _, alive := c.runningPostmaster(); !alive {
			return c.sockDir, c.port, false, nil
		}
		return c.sockDir, c.port, false, fmt.Errorf("reuse running postmaster %d: %w", pid, err)
	}
	c.log.Info("reusing running postmaster", slog.Int("pid", pid), slog.String("socket_dir", sock))
	return sock, port, true, nil
}

// socketDir is clusterDir/run, or a short per-cluster dir under /tmp when
// that path would exceed the unix socket path limit.
func socketDir(clusterDir string) string {
	dir := filepath.Join(clusterDir, "run")
	if len(dir)+len("/.s.PGSQL.5432.lock") <= maxSocketPath {
		return dir
	}
	sum := sha256.Sum256([]byte(clusterDir))
	return filepath.Join(socketFallbackRoot, "buzz-pg-"+hex.EncodeToString(sum[:6]))
}

// initdb creates the cluster unless it exists, and reports whether it did.
func (c *Cluster) initdb(ctx context.Context) (created bool, err error) {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return false, nil
	}
	// A directory without PG_VERSION is an interrupted initdb: start over.
	if err := os.RemoveAll(c.dataDir); err != nil {
		return false, fmt.Errorf("remove incomplete cluster %s: %w", c.dataDir, err)
	}
	c.log.Info("initdb", slog.String("data_dir", c.dataDir))
	began := time.Now()
	out, err := c.run(ctx, "initdb", "-D", c.dataDir, "-U", Role, "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if err != nil {
		return false, fmt.Errorf("initdb %s: %w: %s", c.dataDir, err, out)
	}
	conf := filepath.Join(c.dataDir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", conf, err)
	}
	_, err = f.WriteString("\n# Written by buzz-relay at every start.\ninclude_if_exists = 'buzz.conf'\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("append to %s: %w", conf, err)
	}
	c.log.Info("initdb done", slog.Duration("took", time.Since(began)))
	return true, nil
}

// writeSettings rewrites PGDATA/buzz.conf: socket-only listening plus the
// server settings.
func (c *Cluster) writeSettings(extra map[string]string) error {
	settings := map[string]string{
		"listen_addresses":        "''",
		"port":                    strconv.Itoa(c.port),
		"unix_socket_directories": quoteConf(c.sockDir),
	}
	maps.Copy(settings, MemorySettings(TotalMemory()))
	maps.Copy(settings, DefaultSettings)
	maps.Copy(settings, extra)
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, settings[k])
	}
	return c.owner.writeOwned(filepath.Join(c.dataDir, "buzz.conf"), b.Bytes())
}

func quoteConf(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// start runs pg_ctl start, retrying while the shared memory of a killed
// postmaster is still held by its exiting children.
func (c *Cluster) start(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	for attempt := 1; ; attempt++ {
		out, err := c.startOnce(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return c.startError(err, out)
		}
		c.log.Warn("start failed, retrying", slog.Int("attempt", attempt), slog.String("output", string(out)))
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// startOnce removes a stale postmaster.pid and runs pg_ctl start once,
// returning pg_ctl's output when it failed.
func (c *Cluster) startOnce(ctx context.Context) ([]byte, error) {
	c.removeStalePid()
	began := time.Now()
	out, err := c.run(ctx, "pg_ctl", "start", "-D", c.dataDir, "-l", c.logFile(), "-w", "-t", "60")
	if err != nil {
		return out, err
	}
	c.log.Info("started", slog.String("socket_dir", c.sockDir), slog.Duration("took", time.Since(began)))
	return nil, nil
}

// startError is the error of a failed pg_ctl start: its output and the
// tail of the server log.
func (c *Cluster) startError(err error, out []byte) error {
	return fmt.Errorf("start private cluster (log: %s): %w: %s%s", c.logFile(), err, out, tail(c.logFile()))
}

// logFile is the server log, next to PGDATA.
func (c *Cluster) logFile() string {
	return filepath.Join(filepath.Dir(c.dataDir), "postgres.log")
}

// removeStalePid deletes postmaster.pid when the process it names is gone.
func (c *Cluster) removeStalePid() {
	pidFile := filepath.Join(c.dataDir, "postmaster.pid")
	if _, err := os.Stat(pidFile); err != nil {
		return
	}
	if pid, _, _, alive := c.runningPostmaster(); !alive {
		c.log.Warn("removing stale postmaster.pid", slog.Int("pid", pid))
		_ = os.Remove(pidFile)
	}
}

// runningPostmaster reads postmaster.pid and reports whether the postmaster
// it names is alive, with its socket directory and port.
func (c *Cluster) runningPostmaster() (pid int, sockDir string, port int, alive bool) {
	data, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, "", 0, false
	}
	// Lines: pid, data dir, start time, port, socket dir, listen addr, shmem key, status.
	lines := strings.Split(string(data), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return 0, "", 0, false
	}
	if len(lines) > 4 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
		sockDir = strings.TrimSpace(lines[4])
	}
	if sockDir == "" || port == 0 {
		sockDir, port = c.sockDir, c.port
	}
	return pid, sockDir, port, isPostgres(pid)
}

// isPostgres reports whether pid is a live (not zombie) postgres process.
func isPostgres(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // no procfs: trust kill(0)
	}
	// "pid (comm) state ..."; comm may contain spaces, so split after ')'.
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return false
	}
	comm, state := s[open+1:end], s[end+2]
	return state != 'Z' && state != 'X' && strings.HasPrefix(comm, "postgres")
}

// ensureDatabase creates the "buzz" database when missing. wait > 0 retries
// the connection for that long (a reused postmaster may still be starting).
func (c *Cluster) ensureDatabase(ctx context.Context, adminURL string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var conn *pgx.Conn
	var err error
	for {
		conn, err = pgx.Connect(ctx, adminURL)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if _, _, _, alive := c.runningPostmaster(); !alive {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("connect to private cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", Database).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", Database, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+Database); err != nil {
		var pgErr interface{ SQLState() string }
		if errors.As(err, &pgErr) && pgErr.SQLState() == "42P04" { // created concurrently
			return nil
		}
		return fmt.Errorf("create database %s: %w", Database, err)
	}
	c.log.Info("created database", slog.String("database", Database))
	return nil
}

// run executes a PostgreSQL binary as the cluster owner, in its own process
// group (so a terminal's Ctrl-C reaches buzz-relay, which then stops the
// server cleanly) and without inherited PG* variables.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = filepath.Dir(c.dataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.owner.cred}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	return cmd.CombinedOutput()
}

// tail returns the last lines of the server log, for error messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "\nserver log tail:\n" + string(data)
}

// lockFile takes an exclusive flock on path; the returned func releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// StopDataDir stops the postmaster running on cfg.DataDir/pg, whoever
// started it (fast shutdown), and waits for it. It does nothing when no
// postmaster is running there. cmd/buzz-testdb uses it to end a cluster
// another process started.
func StopDataDir(ctx context.Context, cfg Config) error {
	if cfg.DataDir == "" {
		return errors.New("stop private cluster: data dir is empty")
	}
	binDir, err := findBinDir(cfg.BinDir)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data dir %s: %w", cfg.DataDir, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	own, err := resolveOwner(log)
	if err != nil {
		return err
	}
	c := &Cluster{
		log: log.With("component", "pgcluster"), binDir: binDir, owner: own, started: true,
		dataDir: filepath.Join(root, "pg", "data"), sockDir: socketDir(filepath.Join(root, "pg")), port: Port,
	}
	if _, _, _, alive := c.runningPostmaster(); !alive {
		return nil
	}
	return c.Stop(ctx)
}
