package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// partitionLockKey is the transaction-scoped advisory lock key taken while
// creating partitions ("buzzpart" in ASCII).
const partitionLockKey int64 = 0x62757a7a70617274

// DefaultPartitionsAhead is how many months after the current one
// EnsurePartitions keeps ready (docs/PROTOCOL.md §3.3).
const DefaultPartitionsAhead = 3

// PartitionError reports a monthly partition that could not be created.
// Current is true for the current UTC month: the caller must stop startup.
// A future month's failure is logged, counted and retried on the next run.
type PartitionError struct {
	// Month is the partition's name, e.g. "events_p2026_11".
	Month   string
	Current bool
	Err     error
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("create partition %s: %v", e.Month, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// partitionStatistics is the DDL of a partition's extended statistics on
// (community_id, channel_id): a channel belongs to one community, and the
// planner must know it to pick the community's smallest index for a search
// (migration 0004 explains; it creates them for partitions that predate it).
func partitionStatistics(partition string) string {
	return fmt.Sprintf("CREATE STATISTICS IF NOT EXISTS %s_community_channel (dependencies, ndistinct) ON community_id, channel_id FROM %s",
		partition, partition)
}

// DayKeyStatisticsSQL turns off the statistics of the day-key GIN's
// expression on idx_events_search_day_keys and, recursively, on every
// partition's copy of it. Its one reader, search_day_matches, runs with a
// generic plan whose keys are a parameter, so the planner never consults
// them, and computing them was about a third of every ANALYZE of an events
// partition (docs/PERFORMANCE.md "Statistics no plan reads"). A partition
// created later does not inherit the setting: createPartition sets it on
// the new partition's index (dayKeyPartitionSQL).
const DayKeyStatisticsSQL = "ALTER INDEX IF EXISTS idx_events_search_day_keys ALTER COLUMN 1 SET STATISTICS 0"

// dayKeyPartitionSQL names the day-key index of partition $1 when its
// expression still collects statistics (DayKeyStatisticsSQL).
const dayKeyPartitionSQL = `SELECT x.indexrelid::regclass::text
	FROM pg_catalog.pg_inherits AS i
	JOIN pg_catalog.pg_index AS x ON x.indexrelid = i.inhrelid
	JOIN pg_catalog.pg_attribute AS a ON a.attrelid = x.indexrelid AND a.attnum = 1
	WHERE i.inhparent = to_regclass('idx_events_search_day_keys')
	  AND x.indrelid = to_regclass($1) AND a.attstattarget <> 0`

// PartitionName is the name of the events partition holding month t (UTC).
func PartitionName(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("events_p%04d_%02d", t.Year(), int(t.Month()))
}

// EnsurePartitions creates the events partitions of now's UTC month and the
// next ahead months when missing, each in its own transaction under a
// transaction-scoped advisory lock so concurrent processes do not race.
// Names and bounds are computed from now only. A failure for the current
// month returns at once with a *PartitionError whose Current is true;
// failures for future months are all attempted and returned joined, each a
// *PartitionError with Current false. Safe to call any number of times.
func EnsurePartitions(ctx context.Context, pool *pgxpool.Pool, now time.Time, ahead int) error {
	now = now.UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	var errs []error
	for i := 0; i <= ahead; i++ {
		from := first.AddDate(0, i, 0)
		if err := createPartition(ctx, pool, from); err != nil {
			perr := &PartitionError{Month: PartitionName(from), Current: i == 0, Err: err}
			if i == 0 {
				return perr
			}
			errs = append(errs, perr)
		}
	}
	return errors.Join(errs...)
}

func createPartition(ctx context.Context, pool *pgxpool.Pool, from time.Time) error {
	to := from.AddDate(0, 1, 0)
	const layout = "2006-01-02 15:04:05-07"
	// The name and bounds come only from time arithmetic, never from input.
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF events FOR VALUES FROM ('%s') TO ('%s')",
		PartitionName(from), from.Format(layout), to.Format(layout))
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", partitionLockKey); err != nil {
		return fmt.Errorf("take advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, ddl); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, partitionStatistics(PartitionName(from))); err != nil {
		return fmt.Errorf("create statistics: %w", err)
	}
	var dayKeys []string
	rows, err := tx.Query(ctx, dayKeyPartitionSQL, PartitionName(from))
	if err == nil {
		dayKeys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("find day-key index: %w", err)
	}
	for _, idx := range dayKeys {
		// idx is a regclass's text: an identifier PostgreSQL quoted.
		if _, err := tx.Exec(ctx, "ALTER INDEX "+idx+" ALTER COLUMN 1 SET STATISTICS 0"); err != nil {
			return fmt.Errorf("day-key statistics: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
