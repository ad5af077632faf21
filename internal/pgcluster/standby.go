package pgcluster

// A standby is a second cluster cloned from a running one with
// pg_basebackup and streaming its WAL, the topology of docs/OPERATIONS.md
// "High availability": a primary, a synchronous standby, and a relay whose
// DATABASE_URL names both. buzz-relay never runs one; the soak's failover
// fault does (internal/soak).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// standbyName is what a standby's name may hold: it is both its
// application_name and the name of its replication slot on the primary,
// and slot names allow only these characters.
var standbyName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// StartStandby clones the running primary into cfg.DataDir/pg and starts
// the clone as its streaming hot standby. name is the standby's
// application_name (what synchronous_standby_names on the primary names,
// see SetSynchronousStandby) and the replication slot it is given on the
// primary, which keeps the primary's WAL while the standby is away;
// lowercase letters, digits and underscores only.
//
// The clone is made by pg_basebackup (a fast checkpoint, WAL streamed
// during the copy), so every commit the primary made before is in it. A
// cluster already at cfg.DataDir/pg (a primary that died, say) is removed
// first; one with a live postmaster is refused. The standby gets
// standby.signal and, in buzz.conf, primary_conninfo (the primary's socket
// and port, name as application_name) and primary_slot_name, on top of
// cfg.Settings; it then starts as Start starts a cluster, on its own
// socket directory, and StartStandby returns once it accepts read-only
// connections. A slot of the same name left on the primary by an earlier
// standby is dropped first.
//
// StartStandby does not make the standby synchronous:
// SetSynchronousStandby on the primary does, once the standby streams.
func StartStandby(ctx context.Context, cfg Config, primary *Cluster, name string) (*Cluster, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("start standby: data dir is empty")
	}
	if !standbyName.MatchString(name) {
		return nil, fmt.Errorf("start standby: name %q: want 1 to 63 lowercase letters, digits or underscores", name)
	}
	binDir, err := findBinDir(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(filepath.Join(binDir, "pg_basebackup")); err != nil || st.IsDir() {
		return nil, fmt.Errorf("start standby: pg_basebackup not found in %s (it comes with the PostgreSQL server, e.g. on Debian/Ubuntu: apt-get install -y postgresql)", binDir)
	}
	root, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start standby: resolve data dir %s: %w", cfg.DataDir, err)
	}
	own, err := resolveOwner(primary.log)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("start standby: create data dir %s: %w", root, err)
	}
	clone := &Cluster{log: primary.log, binDir: binDir, dataDir: filepath.Join(root, "pg", "data"),
		sockDir: socketDir(filepath.Join(root, "pg")), port: Port, owner: own}
	if err := clone.cloneFrom(ctx, root, primary, name); err != nil {
		return nil, err
	}
	settings := maps.Clone(cfg.Settings)
	if settings == nil {
		settings = map[string]string{}
	}
	settings["primary_conninfo"] = quoteConf(fmt.Sprintf("host=%s port=%d user=%s application_name=%s",
		quoteConninfo(primary.sockDir), primary.port, Role, name))
	settings["primary_slot_name"] = quoteConf(name)
	cfg.Settings = settings
	c, err := Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	return c, nil
}

// cloneFrom replaces c's data directory by a pg_basebackup of primary with
// a slot named name, and marks it a standby. It holds the data directory's
// lock while it works.
func (c *Cluster) cloneFrom(ctx context.Context, root string, primary *Cluster, name string) error {
	unlock, err := lockFile(filepath.Join(root, ".pgcluster.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if pid, _, _, alive := c.runningPostmaster(); alive {
		return fmt.Errorf("start standby: postmaster %d is running on %s", pid, c.dataDir)
	}
	if err := c.owner.makeTraversable(root); err != nil {
		return err
	}
	if err := c.owner.mkdirOwned(filepath.Join(root, "pg"), 0o700); err != nil {
		return err
	}
	if err := c.owner.mkdirOwned(c.sockDir, 0o700); err != nil {
		return err
	}
	if err := os.RemoveAll(c.dataDir); err != nil {
		return fmt.Errorf("start standby: remove %s: %w", c.dataDir, err)
	}
	if err := primary.dropSlot(ctx, name); err != nil {
		return err
	}
	began := time.Now()
	out, err := c.run(ctx, "pg_basebackup", "-D", c.dataDir, "-X", "stream", "-c", "fast", "-C", "-S", name,
		"-h", primary.sockDir, "-p", strconv.Itoa(primary.port), "-U", Role)
	if err != nil {
		return fmt.Errorf("start standby: pg_basebackup from %s: %w: %s", primary.dataDir, err, out)
	}
	c.log.Info("cloned primary", slog.String("data_dir", c.dataDir), slog.String("from", primary.dataDir),
		slog.Duration("took", time.Since(began)))
	return c.owner.writeOwned(filepath.Join(c.dataDir, "standby.signal"), nil)
}

// dropSlot drops the replication slot name on c when it exists and no
// standby uses it.
func (c *Cluster) dropSlot(ctx context.Context, name string) error {
	return c.exec(ctx, "drop replication slot "+name,
		`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, name)
}

// SetSynchronousStandby makes the standby called name synchronous (ALTER
// SYSTEM SET synchronous_standby_names, then a reload) and returns once c
// reports it streaming as such: from then on a COMMIT on c returns only
// once that standby has flushed its WAL (docs/OPERATIONS.md "High
// availability"), and waits while it is away. The setting is in c's
// postgresql.auto.conf, so it survives restarts.
func (c *Cluster) SetSynchronousStandby(ctx context.Context, name string) error {
	if !standbyName.MatchString(name) {
		return fmt.Errorf("set synchronous standby: name %q: want 1 to 63 lowercase letters, digits or underscores", name)
	}
	if err := c.exec(ctx, "set synchronous_standby_names", "ALTER SYSTEM SET synchronous_standby_names = '"+name+"'"); err != nil {
		return err
	}
	if err := c.exec(ctx, "reload configuration", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return c.waitTrue(ctx, "standby "+name+" synchronous",
		`SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE application_name = $1 AND sync_state = 'sync')`, name)
}

// Promote ends recovery on the standby c (pg_ctl promote) and returns once
// it accepts writes. The promoted server has no standby of its own, so
// Promote also clears any synchronous_standby_names it inherited, with
// which every COMMIT would wait for a standby that does not exist.
func (c *Cluster) Promote(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "promote", "-D", c.dataDir, "-w", "-t", strconv.Itoa(int(startTimeout/time.Second)))
	if err != nil {
		return fmt.Errorf("promote %s: pg_ctl promote: %w: %s", c.dataDir, err, out)
	}
	if err := c.waitTrue(ctx, "promotion of "+c.dataDir, "SELECT NOT pg_is_in_recovery()"); err != nil {
		return err
	}
	if err := c.exec(ctx, "reset synchronous_standby_names", "ALTER SYSTEM RESET synchronous_standby_names"); err != nil {
		return err
	}
	return c.exec(ctx, "reload configuration", "SELECT pg_reload_conf()")
}

// exec runs one statement on c's "postgres" database.
func (c *Cluster) exec(ctx context.Context, what, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.urlFor("postgres"))
	if err != nil {
		return fmt.Errorf("%s on %s: connect: %w", what, c.dataDir, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s on %s: %w", what, c.dataDir, err)
	}
	return nil
}

// waitTrue polls sql (one boolean) on c's "postgres" database every 20 ms
// until it is true, for up to startTimeout.
func (c *Cluster) waitTrue(ctx context.Context, what, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.urlFor("postgres"))
	if err != nil {
		return fmt.Errorf("wait for %s: connect: %w", what, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		var done bool
		if err := conn.QueryRow(ctx, sql, args...).Scan(&done); err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: not within %s: %w", what, startTimeout, ctx.Err())
		case <-time.After(20 * time.Millisecond): // polling interval
		}
	}
}

// quoteConninfo quotes a value of a libpq keyword/value connection string.
func quoteConninfo(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
