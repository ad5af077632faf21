package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// partitions returns the events partitions the plan of rec's last
// statement reads, on q.
func partitions(t *testing.T, rec *dbtest.SQLRecorder, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) []string {
	t.Helper()
	sql, args := rec.Last()
	var plan []byte
	require.NoError(t, q.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan))
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			if r, ok := n["Relation Name"].(string); ok && !slices.Contains(out, r) {
				out = append(out, r)
			}
			for _, c := range n {
				walk(c)
			}
		case []any:
			for _, c := range n {
				walk(c)
			}
		}
	}
	var doc any
	require.NoError(t, json.Unmarshal(plan, &doc))
	walk(doc)
	slices.Sort(out)
	return out
}

// A read with a created-at ceiling (docs/ARCHITECTURE.md "Created-at
// ceiling") gives the same answer as one without, and its plan skips the
// events partitions above the ceiling: the months ahead that the partition
// job has created. A filter whose until is below the ceiling is read as
// before.
func TestEventQueryCeiling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	// Partitions for this month and the three after it, as the partition
	// job keeps them (docs/PROTOCOL.md §3.3).
	require.NoError(t, pg.EnsurePartitions(ctx, pool, time.Now(), 3))
	var trace dbtest.SQLRecorder
	traced := dbtest.TracedPoolWith(t, pool, &trace, 2)
	s := store.New(traced)
	cid := fixture.Community(t, pool).ID
	key := eventtest.NewKey()
	now := time.Now().Unix()
	var want []string // newest first
	for _, at := range []int64{now + int64(event.MaxClockDrift/time.Second), now, now - 3600} {
		want = append(want, fixture.Event(t, pool, cid, key, 1, eventtest.At(at)).ID)
	}
	ceiling := time.Unix(now, 0).Add(event.MaxClockDrift + time.Hour)
	read := func(f event.Filter, ceiling time.Time) ([]string, []string) {
		rows, err := s.EventQuery(ctx, store.EventQueryParams{CommunityID: cid, Filter: &f, Limit: 10, Ceiling: ceiling})
		require.NoError(t, err)
		return ids(rows), partitions(t, &trace, pool)
	}
	// above are the partitions of parts that start after the ceiling. The
	// default partition is not among them: it also holds whatever is older
	// than the first month's partition, so no upper bound excludes it.
	above := func(parts []string) []string {
		var out []string
		for _, p := range parts {
			var from *time.Time
			require.NoError(t, pool.QueryRow(ctx, `SELECT (regexp_match(pg_get_expr(relpartbound, oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz
				FROM pg_class WHERE relname = $1`, p).Scan(&from))
			if from != nil && from.After(ceiling) {
				out = append(out, p)
			}
		}
		return out
	}

	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass`)
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	months := above(all)
	require.GreaterOrEqual(t, len(months), 2, "the months ahead: %v", all)

	got, parts := read(event.Filter{Kinds: []int{1}}, time.Time{})
	require.Equal(t, want, got)
	require.Equal(t, months, above(parts), "without a ceiling the months ahead are planned")

	got, parts = read(event.Filter{Kinds: []int{1}}, ceiling)
	require.Equal(t, want, got, "the ceiling changes no answer")
	require.Empty(t, above(parts), "planned: %v", parts)

	later := now + 7*24*3600
	got, parts = read(event.Filter{Kinds: []int{1}, Until: &later}, ceiling)
	require.Equal(t, want, got, "an until above the ceiling is read up to the ceiling")
	require.Empty(t, above(parts), "planned: %v", parts)

	mentioned := eventtest.NewKey().PubKey
	tagged := fixture.Event(t, pool, cid, key, 1, eventtest.At(now-5), eventtest.Tag("p", mentioned)).ID
	got, parts = read(event.Filter{Kinds: []int{1}, Tags: map[string][]string{"p": {mentioned}}}, ceiling)
	require.Equal(t, []string{tagged}, got, "a mention read")
	require.Empty(t, above(parts), "planned: %v", parts)

	earlier := now - 60
	got, _ = read(event.Filter{Kinds: []int{1}, Until: &earlier}, ceiling)
	require.Equal(t, want[2:], got)

	n, err := s.EventCount(ctx, store.EventQueryParams{CommunityID: cid, Filter: &event.Filter{Kinds: []int{1}}, Ceiling: ceiling})
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	require.Empty(t, above(partitions(t, &trace, pool)), "COUNT is bounded too")
}
