package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AnalyzeHot runs ANALYZE on the events partitions and the read-path side
// tables whose rows changed by more than max(minRows, 5 % of their size)
// since their last analyze, and returns their names.
//
// Autovacuum does the same eventually, but only after its naptime and
// thresholds: a new month's partition, or a burst of inserts into a young
// one, is planned from missing statistics until then, and the planner then
// picks the wrong index for lookups by id or author. The relay runs this
// every few seconds so plans follow the data.
func AnalyzeHot(ctx context.Context, pool *pgxpool.Pool, minRows int64) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT relname FROM pg_stat_user_tables
		WHERE schemaname = current_schema()
		  AND (relname LIKE 'events\_p%' OR relname IN ('event_mentions', 'thread_metadata', 'reactions'))
		  AND n_mod_since_analyze > GREATEST($1, n_live_tup / 20)
		ORDER BY n_mod_since_analyze DESC`, minRows)
	if err != nil {
		return nil, fmt.Errorf("find tables to analyze: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find tables to analyze: %w", err)
	}
	for _, n := range names {
		if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{n}.Sanitize()); err != nil {
			return nil, fmt.Errorf("analyze %s: %w", n, err)
		}
	}
	return names, nil
}
