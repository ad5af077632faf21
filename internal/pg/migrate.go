package pg

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_lock key every migration run holds
// ("buzzmig" in ASCII). Never change it: old and new binaries must exclude each other.
const migrationLockKey int64 = 0x62757a7a6d6967

// ledgerDDL creates the ledger. It is the one table not created by a
// migration file, because the runner needs it before any file runs.
const ledgerDDL = `CREATE TABLE IF NOT EXISTS buzz_schema_migrations (
	version    INT PRIMARY KEY,
	name       TEXT NOT NULL,
	checksum   TEXT NOT NULL,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// Migration is one embedded schema file.
type Migration struct {
	// Version is the file's four-digit number.
	Version int
	// Name is the file name, e.g. "0001_core.sql".
	Name string
	// SQL is the file content.
	SQL string
	// Checksum is the lowercase hex SHA-256 of the file bytes.
	Checksum string
}

// MigrateMode selects what Migrate does with pending files.
type MigrateMode int

const (
	// MigrateApply applies pending files.
	MigrateApply MigrateMode = iota
	// MigrateCheck applies nothing and fails when any file is pending.
	MigrateCheck
)

// MigrationState is one row of MigrationStatus.
type MigrationState struct {
	Version int
	Name    string
	// AppliedAt is nil for a pending file.
	AppliedAt *time.Time
}

// Sentinels matched by errors.Is on Migrate's errors; the messages themselves
// are the exact strings of docs/PROTOCOL.md §3.4.
var (
	ErrChecksumMismatch  = errors.New("migration checksum mismatch")
	ErrSchemaTooNew      = errors.New("database schema is newer than this binary")
	ErrPendingMigrations = errors.New("database has pending migrations")
	ErrMigrationFailed   = errors.New("migration failed")
)

// migrateError carries an exact operator-facing message, a sentinel kind and
// the underlying cause.
type migrateError struct {
	msg   string
	kind  error
	cause error
}

func (e *migrateError) Error() string        { return e.msg }
func (e *migrateError) Is(target error) bool { return target == e.kind }
func (e *migrateError) Unwrap() error        { return e.cause }

var fileName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// Migrations returns the embedded files sorted by version. It panics when an
// embedded file name is malformed, which TestMigrationFiles catches.
func Migrations() []Migration {
	list, err := loadMigrations(migrationFiles)
	if err != nil {
		panic(err)
	}
	return list
}

func loadMigrations(fsys fs.FS) ([]Migration, error) {
	paths, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	list := make([]Migration, 0, len(paths))
	for _, p := range paths {
		name := path.Base(p)
		m := fileName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_snake_name.sql", name)
		}
		version, _ := strconv.Atoi(m[1])
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		sum := sha256.Sum256(data)
		list = append(list, Migration{Version: version, Name: name, SQL: string(data),
			Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Version < list[j].Version })
	return list, nil
}

// checkSequence fails unless versions run 1, 2, 3, … without gaps or duplicates.
func checkSequence(list []Migration) error {
	for i, m := range list {
		if m.Version != i+1 {
			return fmt.Errorf("migration %s: expected version %04d (versions must run 1, 2, 3, … without gaps or duplicates)", m.Name, i+1)
		}
	}
	return nil
}

type ledgerRow struct {
	version   int
	name      string
	checksum  string
	appliedAt time.Time
}

// Migrate brings the schema up to date. It holds pg_advisory_lock on one
// dedicated connection for the whole run (concurrent runs wait, then find
// nothing to do), creates the ledger when absent, verifies the checksum of
// every applied file, and — in MigrateApply mode — applies each pending file
// in its own transaction together with its ledger row. It returns the names
// of the files it applied. Errors carry the exact messages of docs/PROTOCOL.md §3.4
// and match ErrChecksumMismatch, ErrSchemaTooNew, ErrPendingMigrations or
// ErrMigrationFailed. Safe to call any number of times.
func Migrate(ctx context.Context, pool *pgxpool.Pool, mode MigrateMode, log *slog.Logger) (applied []string, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	known := Migrations()
	if err := checkSequence(known); err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return nil, fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey); uerr != nil {
			// Closing the session is the only other way to drop the lock.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, ledgerDDL); err != nil {
		return nil, fmt.Errorf("migrate: create ledger: %w", err)
	}
	ledger, err := readLedger(ctx, conn)
	if err != nil {
		return nil, err
	}
	pending, err := verify(known, ledger)
	if err != nil {
		return nil, err
	}
	if len(pending) > 0 && mode == MigrateCheck {
		names := make([]string, len(pending))
		for i, m := range pending {
			names[i] = m.Name
		}
		return nil, &migrateError{kind: ErrPendingMigrations, msg: fmt.Sprintf(
			`database has pending migrations (%s); run "buzz-relay migrate" or set BUZZ_AUTO_MIGRATE=true`,
			strings.Join(names, ", "))}
	}
	for _, m := range pending {
		began := time.Now()
		if err := applyOne(ctx, conn, m); err != nil {
			return applied, err
		}
		applied = append(applied, m.Name)
		log.Info("applied migration", slog.String("file", m.Name), slog.Duration("took", time.Since(began)))
	}
	return applied, nil
}

// verify checks the ledger against the embedded files and returns the
// pending ones.
func verify(known []Migration, ledger map[int]ledgerRow) ([]Migration, error) {
	maxKnown := 0
	if len(known) > 0 {
		maxKnown = known[len(known)-1].Version
	}
	byVersion := make(map[int]Migration, len(known))
	for _, m := range known {
		byVersion[m.Version] = m
	}
	newest := 0
	for v := range ledger {
		if _, ok := byVersion[v]; !ok && v > newest {
			newest = v
		}
	}
	if newest > 0 {
		return nil, &migrateError{kind: ErrSchemaTooNew, msg: fmt.Sprintf(
			"database schema version %d is newer than this binary (knows up to %d)", newest, maxKnown)}
	}
	var pending []Migration
	for _, m := range known {
		row, ok := ledger[m.Version]
		if !ok {
			pending = append(pending, m)
			continue
		}
		if row.checksum != m.Checksum {
			return nil, &migrateError{kind: ErrChecksumMismatch, msg: fmt.Sprintf(
				"migration %s was modified after it was applied (checksum mismatch)", m.Name)}
		}
	}
	return pending, nil
}

func applyOne(ctx context.Context, conn *pgxpool.Conn, m Migration) error {
	fail := func(err error) error {
		msg := fmt.Sprintf("migration %s failed: %v", m.Name, err)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			msg = fmt.Sprintf("migration %s failed: %s %s", m.Name, pgErr.Code, pgErr.Message)
		}
		return &migrateError{kind: ErrMigrationFailed, msg: msg, cause: err}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// No arguments: pgx sends the file with the simple protocol, so it may
	// hold many statements.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return fail(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO buzz_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
		m.Version, m.Name, m.Checksum); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}

func readLedger(ctx context.Context, q Querier) (map[int]ledgerRow, error) {
	rows, err := q.Query(ctx, "SELECT version, name, checksum, applied_at FROM buzz_schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: read ledger: %w", err)
	}
	defer rows.Close()
	ledger := map[int]ledgerRow{}
	for rows.Next() {
		var r ledgerRow
		if err := rows.Scan(&r.version, &r.name, &r.checksum, &r.appliedAt); err != nil {
			return nil, fmt.Errorf("migrate: read ledger: %w", err)
		}
		ledger[r.version] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: read ledger: %w", err)
	}
	return ledger, nil
}

// MigrationStatus lists every embedded file with its applied time (nil when
// pending), plus any ledger row this binary does not know, sorted by
// version. It takes no lock and changes nothing; a database without a
// ledger lists every file as pending.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool) ([]MigrationState, error) {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('buzz_schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	ledger := map[int]ledgerRow{}
	if exists {
		var err error
		if ledger, err = readLedger(ctx, pool); err != nil {
			return nil, err
		}
	}
	var out []MigrationState
	for _, m := range Migrations() {
		st := MigrationState{Version: m.Version, Name: m.Name}
		if row, ok := ledger[m.Version]; ok {
			at := row.appliedAt
			st.AppliedAt = &at
			delete(ledger, m.Version)
		}
		out = append(out, st)
	}
	for _, row := range ledger {
		at := row.appliedAt
		out = append(out, MigrationState{Version: row.version, Name: row.name, AppliedAt: &at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
