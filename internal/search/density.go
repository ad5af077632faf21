package search

import (
	"context"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/pg"
)

// walkDensity is the share of a partition's rows above which a word is
// searched without day keys. A day-key branch reads every match of its
// days, so for a word in most rows the first span alone is many windows
// (two days of a busy community), while walking the community's events
// newest first, as the planner does for such a word when its statistics
// say it is in most rows, stops after about W / density rows. The two cost
// the same near density √(W / rows in two days): 0.3 for W = 1,000 and
// 11,000 events in two days (docs/PERFORMANCE.md, "Search: day keys").
const walkDensity = 0.3

// densityTTL is how long the statistics read from pg_stats are reused.
// ANALYZE (autovacuum) refreshes them on its own schedule; the choice they
// drive changes the cost of a search, never its result.
const densityTTL = 5 * time.Minute

// densities holds, per events partition, the share of rows that contain
// each of its most common lexemes (pg_stats.most_common_elems of
// search_tsv), as the planner sees them.
type densities struct {
	mu       sync.Mutex
	loadedAt time.Time
	byPart   map[string]map[string]float32
}

// of returns the density of lexeme in partition, and false when the
// statistics do not list it (it is not among the partition's most common
// lexemes, or the partition has not been analyzed). It reads pg_stats
// through db when the cached copy is older than densityTTL.
func (d *densities) of(ctx context.Context, db pg.Querier, partition, lexeme string) (float32, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byPart == nil || time.Since(d.loadedAt) > densityTTL {
		byPart, err := loadDensities(ctx, db)
		if err != nil {
			return 0, false, err
		}
		d.byPart, d.loadedAt = byPart, time.Now()
	}
	f, ok := d.byPart[partition][lexeme]
	return f, ok, nil
}

// loadDensities reads the most common lexemes of search_tsv in every
// events partition. most_common_elem_freqs holds one frequency per element,
// then the minimum, the maximum and the frequency of NULL.
func loadDensities(ctx context.Context, db pg.Querier) (map[string]map[string]float32, error) {
	rows, err := db.Query(ctx, `SELECT tablename::text, most_common_elems::text::text[], most_common_elem_freqs
		FROM pg_catalog.pg_stats
		WHERE schemaname = current_schema() AND attname = 'search_tsv' AND most_common_elems IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]float32{}
	for rows.Next() {
		var (
			table string
			elems []string
			freqs []float32
		)
		if err := rows.Scan(&table, &elems, &freqs); err != nil {
			return nil, err
		}
		m := make(map[string]float32, len(elems))
		for i, e := range elems {
			if i < len(freqs) {
				m[e] = freqs[i]
			}
		}
		out[table] = m
	}
	return out, rows.Err()
}
