package search

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// PrivacyKinds are the privacy-excluded kinds of docs/PROTOCOL.md §12.1, sorted: NULL
// under every policy, forever. It has the members of event.NeverIndexed (a
// test compares them); every wrap migration adds its kind to both.
var PrivacyKinds = []int{1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200}

// FreshKinds is the allowlist of a fresh installation (the first migration
// plus 0002's 40003). UpgradedKinds is the allowlist of an installation
// whose events table was populated when 0002 ran.
var (
	FreshKinds    = []int{0, 9, 40002, 40003, 45001, 45003}
	UpgradedKinds = []int{0, 9, 40002, 45001, 45003}
)

// Policy names returned by Classify.
const (
	PolicyFresh    = "fresh"
	PolicyUpgraded = "upgraded, maintenance not run"
	PolicyCustom   = "custom"
)

// ErrNoExpression means events.search_tsv has no generated expression.
var ErrNoExpression = errors.New("events.search_tsv generated expression not found")

// ErrLockTimeout means Rewrite could not lock events within its lock timeout.
var ErrLockTimeout = errors.New("could not lock events within 5s (readers or writers are active); nothing changed")

// StoredExpression returns the generated expression of events.search_tsv as
// PostgreSQL stores it (docs/PROTOCOL.md §12.1, catalog form).
func StoredExpression(ctx context.Context, q pg.Querier) (string, error) {
	var expr string
	err := q.QueryRow(ctx, `
		SELECT pg_get_expr(d.adbin, d.adrelid)
		  FROM pg_attrdef d
		  JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
		 WHERE d.adrelid = 'events'::regclass AND a.attname = 'search_tsv' AND NOT a.attisdropped`).Scan(&expr)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNoExpression
	}
	if err != nil {
		return "", fmt.Errorf("read search_tsv expression: %w", err)
	}
	return expr, nil
}

// ProbeKinds are the kinds EffectiveKinds evaluates: every kind the relay
// accepts plus every privacy-excluded kind, sorted.
func ProbeKinds() []int {
	var out []int
	for k := 0; k <= 65535; k++ {
		if event.IsAccepted(k) || slices.Contains(PrivacyKinds, k) {
			out = append(out, k)
		}
	}
	return out
}

// EffectiveKinds evaluates expr (a stored search_tsv expression) for each
// of kinds with a probe content and returns those that give a non-NULL
// tsvector, sorted: what is searchable, found by running the expression,
// never by parsing it.
func EffectiveKinds(ctx context.Context, q pg.Querier, expr string, kinds []int) ([]int, error) {
	rows, err := q.Query(ctx, `SELECT kind FROM unnest($1::int[]) AS v(kind), LATERAL (SELECT 'probe'::text AS content) c
		WHERE (`+expr+`) IS NOT NULL ORDER BY kind`, kinds)
	if err != nil {
		return nil, fmt.Errorf("evaluate search_tsv expression: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("evaluate search_tsv expression: %w", err)
	}
	return out, nil
}

// Classify names an effective policy: PolicyFresh, PolicyUpgraded or
// PolicyCustom.
func Classify(kinds []int) string {
	switch {
	case slices.Equal(kinds, FreshKinds):
		return PolicyFresh
	case slices.Equal(kinds, UpgradedKinds):
		return PolicyUpgraded
	}
	return PolicyCustom
}

// PrivacyViolations returns the privacy-excluded kinds among kinds.
func PrivacyViolations(kinds []int) []int {
	var out []int
	for _, k := range kinds {
		if slices.Contains(PrivacyKinds, k) {
			out = append(out, k)
		}
	}
	return out
}

// ParseKinds parses a --set list ("0,9,40002"): de-duplicated and sorted.
// It refuses an empty list, a value outside 0..65535, a privacy-excluded
// kind and an ephemeral kind, with the messages of docs/PROTOCOL.md §12.10.
func ParseKinds(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, err := strconv.Atoi(f)
		if err != nil || k < 0 || k > 65535 {
			return nil, fmt.Errorf("kind %q is not an integer in 0..65535", f)
		}
		if slices.Contains(PrivacyKinds, k) {
			return nil, fmt.Errorf("kind %d is privacy-excluded and can never be searchable", k)
		}
		if event.IsEphemeral(k) {
			return nil, fmt.Errorf("kind %d is ephemeral and never stored", k)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the kind list is empty")
	}
	slices.Sort(out)
	return out, nil
}

// CanonicalExpression is the generated expression `--set` installs: this
// binary's privacy list, then the allowlist.
func CanonicalExpression(kinds []int) string {
	return "CASE WHEN kind IN (" + joinInts(PrivacyKinds) + ") THEN NULL::tsvector\n" +
		"         WHEN kind IN (" + joinInts(kinds) + ") THEN to_tsvector('simple', content)\n" +
		"         ELSE NULL::tsvector END"
}

func joinInts(ks []int) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ", ")
}

// PartitionSize is the on-disk size of one partition of events, in bytes.
// Heap + TOAST + SearchGIN + OtherIndexes = Total = pg_total_relation_size.
type PartitionSize struct {
	Name         string
	Heap         int64
	TOAST        int64
	SearchGIN    int64
	OtherIndexes int64
	Total        int64
}

// Sizes returns the size of every partition of events, largest first
// (children from pg_inherits; the search GIN is the partition's child of
// idx_events_search_tsv), and their sum.
func Sizes(ctx context.Context, q pg.Querier) ([]PartitionSize, PartitionSize, error) {
	rows, err := q.Query(ctx, `
		SELECT c.relname,
		       pg_table_size(c.oid) - COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),
		       COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),
		       COALESCE((SELECT sum(pg_relation_size(ix.indexrelid))
		                   FROM pg_index ix JOIN pg_inherits ii ON ii.inhrelid = ix.indexrelid
		                  WHERE ix.indrelid = c.oid AND ii.inhparent = 'idx_events_search_tsv'::regclass), 0)::bigint,
		       pg_indexes_size(c.oid),
		       pg_total_relation_size(c.oid)
		  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events'::regclass
		 ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`)
	if err != nil {
		return nil, PartitionSize{}, fmt.Errorf("read partition sizes: %w", err)
	}
	defer rows.Close()
	var (
		out []PartitionSize
		sum = PartitionSize{Name: "total"}
	)
	for rows.Next() {
		var p PartitionSize
		var idx int64
		if err := rows.Scan(&p.Name, &p.Heap, &p.TOAST, &p.SearchGIN, &idx, &p.Total); err != nil {
			return nil, sum, fmt.Errorf("read partition sizes: %w", err)
		}
		p.OtherIndexes = idx - p.SearchGIN
		sum.Heap += p.Heap
		sum.TOAST += p.TOAST
		sum.SearchGIN += p.SearchGIN
		sum.OtherIndexes += p.OtherIndexes
		sum.Total += p.Total
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, sum, fmt.Errorf("read partition sizes: %w", err)
	}
	return out, sum, nil
}

// Headroom is the free space a rewrite needs: about twice heap, TOAST and
// every index of events, because the rewrite copies heap and TOAST, rebuilds
// every index and logs about as much WAL.
func Headroom(total PartitionSize) int64 { return 2 * total.Total }

// RewriteConfig configures Rewrite.
type RewriteConfig struct {
	Pool  *pgxpool.Pool
	Kinds []int
	// LockTimeout bounds the wait for ACCESS EXCLUSIVE. Default 5 s.
	LockTimeout time.Duration
	// Heartbeat is the interval of "still rewriting" lines. Default 5 s.
	Heartbeat time.Duration
	// ProgressFunc receives one human-readable line per step, heartbeat and
	// index-build poll. Nil discards them.
	ProgressFunc func(line string)
}

// Rewrite installs CanonicalExpression(Kinds) in one transaction on one
// connection: lock_timeout, ACCESS EXCLUSIVE on events, drop the column, add
// it back (this rewrites every partition), recreate the GIN, commit. Every
// read and write of events blocks until it commits. If the lock is not
// obtained in time it rolls back and returns ErrLockTimeout; on any error
// nothing changes. It never runs from migrations or startup.
func Rewrite(ctx context.Context, cfg RewriteConfig) error {
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = 5 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	say := cfg.ProgressFunc
	if say == nil {
		say = func(string) {}
	}
	began := time.Now()
	step := func(name string, fn func() error) error {
		t := time.Now()
		if err := fn(); err != nil {
			return err
		}
		say(fmt.Sprintf("%s done in %s (elapsed %s)", name, time.Since(t).Round(time.Millisecond), time.Since(began).Round(time.Millisecond)))
		return nil
	}
	conn, err := cfg.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	exec := func(sql string) func() error {
		return func() error { _, err := tx.Exec(ctx, sql); return err }
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = 0", cfg.LockTimeout.Milliseconds())); err != nil {
		return fmt.Errorf("set timeouts: %w", err)
	}
	if err := step("lock", exec("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")); err != nil {
		if pg.IsLockNotAvailable(err) {
			return ErrLockTimeout
		}
		return fmt.Errorf("lock events: %w", err)
	}
	if err := step("drop", exec("ALTER TABLE events DROP COLUMN search_tsv")); err != nil {
		return fmt.Errorf("drop search_tsv: %w", err)
	}
	stop := ticker(cfg.Heartbeat, func(d time.Duration) {
		say(fmt.Sprintf("rewrite: still running after %s (PostgreSQL reports no progress for a table rewrite)", d.Round(time.Second)))
	})
	err = step("rewrite", exec("ALTER TABLE events ADD COLUMN search_tsv TSVECTOR GENERATED ALWAYS AS (\n  "+
		CanonicalExpression(cfg.Kinds)+") STORED"))
	stop()
	if err != nil {
		return fmt.Errorf("add search_tsv: %w", err)
	}
	pid := conn.Conn().PgConn().PID()
	stop = ticker(time.Second, func(time.Duration) {
		var parts, partsDone, blocks, blocksDone int64
		err := cfg.Pool.QueryRow(ctx, `SELECT partitions_total, partitions_done, blocks_total, blocks_done
			FROM pg_stat_progress_create_index WHERE pid = $1`, pid).Scan(&parts, &partsDone, &blocks, &blocksDone)
		if err == nil {
			say(fmt.Sprintf("index: partitions %d/%d, blocks %d/%d", partsDone, parts, blocksDone, blocks))
		}
	})
	// Dropping the column dropped both indexes over it: the search GIN
	// and the day-key GIN of migration 0010.
	err = step("index", func() error {
		if err := exec("CREATE INDEX idx_events_search_tsv ON events USING GIN (search_tsv)")(); err != nil {
			return err
		}
		if err := exec("CREATE INDEX idx_events_search_day_keys ON events USING GIN (search_day_keys(community_id, created_at, search_tsv))")(); err != nil {
			return err
		}
		return exec(pg.DayKeyStatisticsSQL)()
	})
	stop()
	if err != nil {
		return fmt.Errorf("create search index: %w", err)
	}
	if err := step("commit", func() error { return tx.Commit(ctx) }); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	say(fmt.Sprintf("total %s", time.Since(began).Round(time.Millisecond)))
	return nil
}

// ticker calls fn every d with the time since it started, until stop is
// called; stop waits for the goroutine to end.
func ticker(d time.Duration, fn func(time.Duration)) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(ended)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn(time.Since(start))
			}
		}
	}()
	return func() { close(done); <-ended }
}
