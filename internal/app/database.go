package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/maintenance"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/pgcluster"
	"github.com/buzz-relay/buzz/internal/replica"
)

// Database is an open pool and, when the relay runs its own, the private cluster.
type Database struct {
	Pool *pgxpool.Pool
	// URL is the connection string the pool uses; the audit pool opens it too.
	// It may hold a password: never log it.
	URL string
	// Applied names the migration files this open applied, in order; empty
	// when the schema was already up to date or migrations were not run.
	Applied []string
	// ReadPool is the read replica's pool (READ_DATABASE_URL), nil without
	// one or when its fence check failed (openReplica).
	ReadPool *pgxpool.Pool
	cluster  *pgcluster.Cluster
}

// Close closes the pool and stops the private cluster when we started it.
func (d *Database) Close() {
	if d.ReadPool != nil {
		d.ReadPool.Close()
	}
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.cluster.Stop(ctx)
	}
}

// Supervise keeps the private cluster running until ctx ends: it restarts
// a postmaster that died, with bounded attempts and backoff
// (pgcluster.Cluster.Supervise), and returns the error when they are
// exhausted. With DATABASE_URL there is nothing to look after and it
// returns nil at once. The pool needs nothing: it dials again on its own
// once the server is back.
func (d *Database) Supervise(ctx context.Context) error {
	if d.cluster == nil {
		return nil
	}
	return d.cluster.Supervise(ctx)
}

// OpenDatabase connects to DATABASE_URL, or starts the private cluster under
// BUZZ_DATA_DIR when it is unset, then applies or checks migrations: the
// private cluster always migrates; an external database migrates only with
// BUZZ_AUTO_MIGRATE (or when mode forces it).
//
// With skipMigrations an external database is opened as it is (migrate
// --status lists pending files that way).
func OpenDatabase(ctx context.Context, cfg config.Config, log *slog.Logger, mode pg.MigrateMode, skipMigrations ...bool) (*Database, error) {
	return openDatabase(ctx, cfg, log, mode, 0, skipMigrations...)
}

// openDatabase is OpenDatabase with the writer pool armed with the
// created_at floor (pg.PoolConfig.CreatedAtFloor; 0 leaves it unarmed, as
// operator commands need).
func openDatabase(ctx context.Context, cfg config.Config, log *slog.Logger, mode pg.MigrateMode, floor time.Duration, skipMigrations ...bool) (*Database, error) {
	db := &Database{}
	url := cfg.DatabaseURL
	if url == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: cfg.DataDir, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("start private postgres cluster: %w", err)
		}
		db.cluster = c
		url = c.URL()
		mode = pg.MigrateApply
	} else if cfg.AutoMigrate {
		mode = pg.MigrateApply
	}
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: int32(cfg.DBPoolSize), Logger: log, CreatedAtFloor: floor,
		GINPendingListKB: pg.WriterGINPendingListKB})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	db.Pool, db.URL = pool, url
	log.Info("postgres connected", slog.Bool("private_cluster", db.cluster != nil))
	if len(skipMigrations) > 0 && skipMigrations[0] && db.cluster == nil {
		return db, nil
	}
	applied, err := pg.Migrate(ctx, pool, mode, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	if len(applied) > 0 {
		log.Info("migrations applied", slog.Any("files", applied))
	}
	if slices.Contains(applied, readStatePurgeFile) {
		logReadStatePurges(ctx, pool, log)
	}
	db.Applied = applied
	return db, nil
}

// readStatePurgeFile is the migration that purges superseded read-state
// history (docs/PROTOCOL.md §14.4).
const readStatePurgeFile = "0007_read_state_purge_superseded.sql"

// logReadStatePurges logs, right after the purge migration was applied,
// one line per community that lost superseded read-state rows
// (docs/PROTOCOL.md §14.4). A failure to read them is a warning: the purge itself committed.
func logReadStatePurges(ctx context.Context, q pg.Querier, log *slog.Logger) {
	purges, err := maintenance.ReadStatePurges(ctx, q)
	if err != nil {
		log.Warn("read-state purge summary not read", slog.String("err", err.Error()))
		return
	}
	for _, p := range purges {
		log.Info("read-state history purged", slog.String("community", p.Host), slog.String("community_id", p.CommunityID),
			slog.Int64("rows", p.Rows), slog.Int64("bytes", p.Bytes))
	}
}

// writerFloor is the created_at floor of the relay's writer pool: armed
// when a read replica is configured (its proof needs every writer armed),
// unarmed otherwise, so fixtures and imports may still write old rows.
func writerFloor(cfg config.Config) time.Duration {
	if cfg.ReadDatabaseURL == "" {
		return 0
	}
	return replica.Floor
}

// noReplicaReason is why window pages read from the writer when rep is
// nil, in buzz_db_route_decision's terms: no READ_DATABASE_URL, or a
// replica whose start-time fence check failed.
func noReplicaReason(cfg config.Config, rep *replica.Replica) string {
	if cfg.ReadDatabaseURL != "" && rep == nil {
		return "floor_unverified"
	}
	return "not_configured"
}

// openReplica opens the read replica of READ_DATABASE_URL: its pool,
// dialled on first use, and its probe (Services.Replica). It returns nil
// when none is configured, and nil with a warning when the start-time
// fence check fails: every read then stays on the writer. Neither start
// nor readiness ever waits for the replica itself.
func openReplica(ctx context.Context, cfg config.Config, db *Database, m *metrics.Metrics, log *slog.Logger) *replica.Replica {
	if cfg.ReadDatabaseURL == "" {
		return nil
	}
	pool, err := replica.OpenPool(ctx, cfg.ReadDatabaseURL, cfg.DBReadPoolSize, log)
	if err != nil {
		log.Warn("read replica not used; every read stays on the writer", slog.String("err", err.Error()))
		return nil
	}
	rep := replica.New(replica.Config{Writer: db.Pool, Pool: pool, Metrics: m, Logger: log})
	if err := rep.Verify(ctx); err != nil {
		m.Replica.SetPoolStatsFunc(nil)
		pool.Close()
		log.Warn("read replica not used; every read stays on the writer", slog.String("err", err.Error()))
		return nil
	}
	db.ReadPool = pool
	log.Info("read replica configured", slog.Int("pool_size", cfg.DBReadPoolSize))
	return rep
}
