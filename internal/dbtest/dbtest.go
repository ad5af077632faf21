// Package dbtest gives tests a real PostgreSQL database. TEST ONLY: import it
// from _test.go files, never from production code.
//
// It owns the choice of test server and per-test databases: the server named
// by TEST_DATABASE_URL when set (make test starts one with cmd/buzz-testdb),
// otherwise ONE throwaway private cluster per test process, started with
// pgcluster under a temporary directory on first use. NewDB clones a fresh
// database from a migrated template (migrated once per server and schema,
// under a PostgreSQL advisory lock, because go test runs packages in
// parallel processes); NewEmptyDB creates one with no migrations applied.
// Databases are dropped when the test passes and kept, with their name
// logged, when it fails. Tx hands out a transaction on ONE shared database
// per test process (cloned from the same template on first use, dropped by
// Shutdown) and rolls it back when the test ends: the default for tests
// that neither commit nor need a database of their own. Missing PostgreSQL
// binaries fail the test with install steps; nothing is ever skipped.
//
// Packages that use dbtest must end the throwaway cluster with a TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// which also fails the package on leaked goroutines (or call
// dbtest.Shutdown after m.Run). A detached watchdog also stops the
// cluster if the test process dies without doing so.
//
// It does NOT provide fixtures or factories (fixture and eventtest do), and
// NewDB does NOT roll back: each such database is the test's own.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// EnvURL names the variable that points tests at an existing server. Its
// role must be allowed to create databases.
const EnvURL = "TEST_DATABASE_URL"

// templateLockKey serialises template creation across test processes ("buzztmpl").
const templateLockKey int64 = 0x62757a7a746d706c

// testSettings make the throwaway cluster fast; its data is disposable.
var testSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "300",
	"shared_buffers":     "64MB",
	// PostgreSQL's default WAL reserve (five files) rather than the
	// private cluster's 512MB: Start makes it at a new cluster's first
	// start, and test data is small.
	"min_wal_size": "80MB",
}

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
	clusterDir string
	cluster    *pgcluster.Cluster

	templateOnce sync.Once
	templateName string
	templateErr  error

	// cloneMu serialises CREATE DATABASE … TEMPLATE inside this process.
	cloneMu sync.Mutex

	// The shared database of Tx: created on first use, dropped by Shutdown.
	sharedMu   sync.Mutex
	sharedPool *pgxpool.Pool
	sharedName string
	sharedErr  error
)

// openTimeout bounds the first connection of a fixture's pool. The first
// backend of a database just cloned builds its catalog caches, which on a
// machine loaded by the whole test command took more than pg.Open's default
// (3 s) once; a fixture waits longer than the relay would.
const openTimeout = 30 * time.Second

// sharedConns bounds the shared database's pool: one connection per open
// Tx, so it is sized for every parallel test of a package at once.
const sharedConns = 32

// Main runs the package's tests, stops the throwaway cluster, fails the run
// when goroutines leaked (goleak; opts add exceptions) and exits with the
// tests' status. Use it as the whole body of TestMain.
func Main(m *testing.M, opts ...goleak.Option) {
	os.Exit(run(m, opts...))
}

// MainWithBinary is Main for a command's package whose tests run the real
// binary: it first builds the package in the current directory as name
// into a temporary directory, stores the path in *binary, and removes the
// directory when the tests are done. A failed build exits with status 1.
func MainWithBinary(m *testing.M, name string, binary *string, opts ...goleak.Option) {
	dir, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "create build dir: %v\n", err)
		os.Exit(1)
	}
	*binary = filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", *binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "build %s: %v\n", name, err)
		os.Exit(1)
	}
	code := run(m, opts...)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// run runs the tests, stops the cluster and checks for leaked goroutines.
func run(m *testing.M, opts ...goleak.Option) int {
	code := m.Run()
	Shutdown()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// Shutdown stops the throwaway cluster, if this process started one, and
// removes its directory. Safe to call when none was started, and twice.
func Shutdown() {
	dropShared()
	if cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: stop test cluster: %v\n", err)
		return
	}
	cluster = nil
	_ = os.RemoveAll(clusterDir)
}

// URL returns the admin URL of the test server (its maintenance database).
func URL(t testing.TB) string {
	t.Helper()
	serverOnce.Do(startServer)
	if serverErr != nil {
		t.Fatalf("dbtest: no PostgreSQL for tests: %v\n"+
			"Install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install -y postgresql) "+
			"or set %s to a server whose role may create databases.", serverErr, EnvURL)
	}
	return serverURL
}

// NewDB creates a database cloned from the migrated template and returns a
// pool on it and its URL. The pool is closed and the database dropped when
// the test passes; on failure the database is kept and its name logged.
func NewDB(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	admin := URL(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("dbtest: prepare template database: %v", templateErr)
	}
	name := createDB(t, admin, templateName)
	dbURL := withDatabase(admin, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, dbURL, pg.PoolConfig{MaxConns: 10, AcquireTimeout: openTimeout})
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", name, err)
	}
	t.Cleanup(pool.Close) // runs before the drop registered by createDB
	return pool, dbURL
}

// Tx begins a transaction on the process's shared migrated database and
// rolls it back when the test ends (t.Cleanup), so nothing it writes is
// ever seen by another test. Use it for every test that neither commits,
// LISTENs, takes session-level locks nor runs a whole server; those use
// NewDB. A row written under a unique key blocks another open Tx that
// writes the same key until the first rolls back, so fixtures use random
// keys. Each Tx holds one of the shared pool's connections for the test's
// lifetime; do not call it more than a few times per test.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	pool := shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("dbtest: begin on the shared database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("dbtest: roll back: %v", err)
		}
	})
	return tx
}

// shared returns the pool on the shared database, creating the database
// from the template on first use. A failure is remembered: every later
// Tx fails the same way.
func shared(t testing.TB) *pgxpool.Pool {
	t.Helper()
	admin := URL(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("dbtest: prepare template database: %v", templateErr)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedPool == nil && sharedErr == nil {
		sharedPool, sharedName, sharedErr = createShared(admin)
	}
	if sharedErr != nil {
		t.Fatalf("dbtest: shared database: %v", sharedErr)
	}
	return sharedPool
}

func createShared(admin string) (*pgxpool.Pool, string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "buzz_shared_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := execAdmin(ctx, admin, "CREATE DATABASE "+name+" TEMPLATE "+templateName, true); err != nil {
		return nil, "", fmt.Errorf("create %s: %w", name, err)
	}
	pool, err := pg.Open(ctx, withDatabase(admin, name), pg.PoolConfig{MaxConns: sharedConns, AcquireTimeout: openTimeout})
	if err != nil {
		_ = execAdmin(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)", false)
		return nil, "", fmt.Errorf("open %s: %w", name, err)
	}
	return pool, name, nil
}

// dropShared closes the shared pool and drops its database (on a
// TEST_DATABASE_URL server; a throwaway cluster goes whole right after).
func dropShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedPool == nil {
		return
	}
	sharedPool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := execAdmin(ctx, serverURL, "DROP DATABASE IF EXISTS "+sharedName+" WITH (FORCE)", false); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: drop %s: %v\n", sharedName, err)
	}
	sharedPool, sharedName = nil, ""
}

// NewEmptyDB creates a database with no migrations applied and returns its
// URL, for migration tests. It is dropped when the test passes.
func NewEmptyDB(t testing.TB) string {
	t.Helper()
	admin := URL(t)
	return withDatabase(admin, createDB(t, admin, ""))
}

func startServer() {
	if u := os.Getenv(EnvURL); u != "" {
		if _, err := url.Parse(u); err != nil {
			serverErr = fmt.Errorf("%s must be a postgres:// URL", EnvURL)
			return
		}
		serverURL = withDatabase(u, "postgres")
		return
	}
	dir, err := os.MkdirTemp("", "buzz-dbtest-")
	if err != nil {
		serverErr = fmt.Errorf("create cluster dir: %w", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: dir, Settings: testSettings})
	if err != nil {
		_ = os.RemoveAll(dir)
		serverErr = err
		return
	}
	cluster, clusterDir = c, dir
	serverURL = withDatabase(c.URL(), "postgres")
	startWatchdog(c.DataDir(), dir)
}

// startWatchdog launches a detached shell that, once this process has
// exited, sends the postmaster SIGQUIT (immediate shutdown) and removes the
// cluster directory. It covers test binaries that die or skip Shutdown.
func startWatchdog(dataDir, dir string) {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done
if [ -f "$2/postmaster.pid" ]; then kill -QUIT "$(head -n 1 "$2/postmaster.pid")" 2>/dev/null; sleep 2; fi
rm -rf "$3"`
	cmd := exec.Command("/bin/sh", "-c", script, "buzz-dbtest-watchdog",
		strconv.Itoa(os.Getpid()), dataDir, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// It outlives this process by design, so nobody waits for it.
	if err := cmd.Start(); err == nil {
		_ = cmd.Process.Release()
	}
}

// ensureTemplate creates, once per server and schema, a database with every
// migration applied and marked as a template. Its name carries a hash of the
// migration checksums, so a changed schema gets a new template.
func ensureTemplate(admin string) (string, error) {
	h := sha256.New()
	for _, m := range pg.Migrations() {
		h.Write([]byte(m.Name + m.Checksum))
	}
	name := "buzz_template_" + hex.EncodeToString(h.Sum(nil))[:12]

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) //nolint:errcheck // the session ends right after

	var ready *bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("look up %s: %w", name, err)
	}
	if ready != nil && *ready {
		return name, nil
	}
	// Absent, or left half-built by a process that died: build it afresh.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop stale %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	pool, err := pg.Open(ctx, withDatabase(admin, name), pg.PoolConfig{MaxConns: 2, AcquireTimeout: openTimeout})
	if err != nil {
		return "", err
	}
	_, err = pg.Migrate(ctx, pool, pg.MigrateApply, nil)
	pool.Close() // a template must have no open connections
	if err != nil {
		return "", fmt.Errorf("migrate %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true"); err != nil {
		return "", fmt.Errorf("mark %s as template: %w", name, err)
	}
	return name, nil
}

// createDB creates a uniquely named database (from template when set) and
// registers its drop.
func createDB(t testing.TB, admin, template string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "buzz_test_" + hex.EncodeToString(b[:])
	stmt := "CREATE DATABASE " + name
	if template != "" {
		stmt += " TEMPLATE " + template
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := execAdmin(ctx, admin, stmt, template != ""); err != nil {
		t.Fatalf("dbtest: %s: %v", stmt, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dbtest: kept database %s for inspection: %s", name, withDatabase(admin, name))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := execAdmin(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)", false); err != nil {
			t.Errorf("dbtest: drop %s: %v", name, err)
		}
	})
	return name
}

// execAdmin runs one statement on a short admin connection. Clones are
// serialised in this process and retried while the template is briefly in
// use (a closing connection, or another process cloning).
func execAdmin(ctx context.Context, admin, stmt string, clone bool) error {
	if clone {
		cloneMu.Lock()
		defer cloneMu.Unlock()
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	for {
		_, err := conn.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if err == nil || !clone || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select { // 55006: source database is being accessed by other users
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// withDatabase returns u with its database replaced by db.
func withDatabase(u, db string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + db
	return parsed.String()
}
