package windowbench

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/window"
)

// selectionSettings open every selection transaction, as the engine's do.
const selectionSettings = `SET LOCAL statement_timeout = '4000ms'; SET LOCAL lock_timeout = '1000ms'; SET LOCAL plan_cache_mode = force_custom_plan`

// windowIndex is the index the scan must walk.
const windowIndex = "idx_thread_metadata_window"

// maxChunk is the largest scan chunk.
const maxChunk = 1024

// plan is one EXPLAIN (FORMAT JSON) answer.
type plan struct {
	Plan      planNode `json:"Plan"`
	Planning  float64  `json:"Planning Time"`
	Execution float64  `json:"Execution Time"`
}

// planNode is a node of a plan tree; only what the checks and the summary read.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	Relation     string     `json:"Relation Name"`
	Alias        string     `json:"Alias"`
	Index        string     `json:"Index Name"`
	Direction    string     `json:"Scan Direction"`
	PlanRows     float64    `json:"Plan Rows"`
	ActualRows   *float64   `json:"Actual Rows"`
	ActualLoops  *float64   `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
	Subplan      string     `json:"Subplan Name"`
	Relationship string     `json:"Parent Relationship"`
}

// inSelection runs fn in a transaction shaped like the engine's selection:
// REPEATABLE READ READ ONLY with its SET LOCALs. It is rolled back.
func inSelection(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin selection: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, selectionSettings); err != nil {
		return fmt.Errorf("selection settings: %w", err)
	}
	return fn(tx)
}

// explain runs EXPLAIN (options, FORMAT JSON) of one statement.
func explain(ctx context.Context, tx pgx.Tx, options, sql string, args []any) (plan, error) {
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN ("+options+", FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		return plan{}, fmt.Errorf("explain: %w", err)
	}
	var out []plan
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return plan{}, fmt.Errorf("explain: unexpected output %.200s", raw)
	}
	return out[0], nil
}

// pageCost is what the selection of one page cost PostgreSQL: every scan
// chunk and the load, each EXPLAIN ANALYZEd (TIMING OFF).
type pageCost struct {
	Execution time.Duration // summed over the statements
	Planning  time.Duration // summed over the statements
	Chunks    int
	Retained  int
	HasMore   bool
	// Scan is the first chunk's plan.
	Scan plan
}

// selectionRequest is the benchmark's page of root after cursor.
func selectionRequest(channel, root string, cursor *window.Cursor) window.ThreadRequest {
	return window.ThreadRequest{Channel: channel, Root: root, Limit: pageLimit, Depth: pageDepth,
		Kinds: pageKinds, Cursor: cursor}
}

// explainPage walks one page's selection as the engine does in one
// selection transaction: scan chunks of limit+1, then doubling up to 1024,
// each from the last key scanned, until limit+1 eligible rows or a short
// chunk; then the load of the retained keys. Each statement is first
// EXPLAIN ANALYZEd (its time is the page's) and then run for its rows.
func explainPage(ctx context.Context, pool *pgxpool.Pool, communityID string, r window.ThreadRequest) (pageCost, error) {
	var c pageCost
	err := inSelection(ctx, pool, func(tx pgx.Tx) error {
		chunk, cursor := r.Limit+1, r.Cursor
		var retained []window.Cursor
		for {
			req := r
			req.Cursor = cursor
			sql, args := window.ThreadScanStatement(communityID, req, chunk)
			p, err := explain(ctx, tx, "ANALYZE, TIMING OFF", sql, args)
			if err != nil {
				return fmt.Errorf("scan: %w", err)
			}
			if c.Chunks == 0 {
				c.Scan = p
			}
			c.Chunks++
			c.add(p)
			rows, err := scanRows(ctx, tx, sql, args)
			if err != nil {
				return err
			}
			for _, row := range rows {
				if !row.eligible {
					continue
				}
				if len(retained) == r.Limit {
					c.HasMore = true
					break
				}
				retained = append(retained, row.key)
			}
			if c.HasMore || len(rows) < chunk {
				break
			}
			last := rows[len(rows)-1].key
			cursor = &last
			chunk = min(chunk*2, maxChunk)
		}
		c.Retained = len(retained)
		if len(retained) == 0 {
			return nil
		}
		sql, args := window.LoadStatement(communityID, retained)
		p, err := explain(ctx, tx, "ANALYZE, TIMING OFF", sql, args)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		c.add(p)
		return nil
	})
	return c, err
}

func (c *pageCost) add(p plan) {
	c.Execution += ms(p.Execution)
	c.Planning += ms(p.Planning)
}

func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

// scanRow is one row of the scan statement: the metadata key and whether
// the reply is eligible.
type scanRow struct {
	key      window.Cursor
	eligible bool
}

// scanRows runs the scan statement. Its first three columns are the key
// (created_at, id) and eligible; created_at may come as a timestamp or as
// seconds, the id as bytes or hex.
func scanRows(ctx context.Context, tx pgx.Tx, sql string, args []any) ([]scanRow, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	defer rows.Close()
	var out []scanRow
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		if len(v) < 3 {
			return nil, errors.New("scan: fewer than three columns")
		}
		at, err := asSeconds(v[0])
		if err != nil {
			return nil, err
		}
		id, err := asHex(v[1])
		if err != nil {
			return nil, err
		}
		ok, _ := v[2].(bool)
		out = append(out, scanRow{key: window.Cursor{CreatedAt: at, ID: id}, eligible: ok})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	return out, nil
}

func asSeconds(v any) (int64, error) {
	switch x := v.(type) {
	case time.Time:
		return x.Unix(), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case float64:
		return int64(math.Floor(x)), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("scan: created_at of type %T", v)
}

func asHex(v any) (string, error) {
	switch x := v.(type) {
	case []byte:
		return hex.EncodeToString(x), nil
	case string:
		return strings.ToLower(x), nil
	}
	return "", fmt.Errorf("scan: event id of type %T", v)
}

// shape is the plan-shape verdict on a scan plan.
type shape struct {
	OK bool `json:"ok"`
	// Why says what is wrong when not OK.
	Why     string   `json:"why,omitempty"`
	Outline []string `json:"outline"`
}

// checkShape requires an Index Scan or Index Only Scan of
// idx_thread_metadata_window with a Limit above it, and no Sort (of any
// kind) above any scan of thread_metadata.
func checkShape(root planNode) shape {
	s := shape{Outline: outline(root)}
	found := false
	var walk func(n planNode, limitAbove, sortAbove bool)
	walk = func(n planNode, limitAbove, sortAbove bool) {
		if n.Relation == "thread_metadata" && sortAbove && s.Why == "" {
			s.Why = "a Sort runs over the scan of thread_metadata"
		}
		if (n.NodeType == "Index Scan" || n.NodeType == "Index Only Scan") && n.Index == windowIndex && limitAbove {
			found = true
		}
		limitAbove = limitAbove || n.NodeType == "Limit"
		sortAbove = sortAbove || strings.HasSuffix(n.NodeType, "Sort")
		for _, c := range n.Plans {
			walk(c, limitAbove, sortAbove)
		}
	}
	walk(root, false, false)
	if !found && s.Why == "" {
		s.Why = "no Index Scan of " + windowIndex + " under a Limit"
	}
	s.OK = found && s.Why == ""
	return s
}

// outline is the plan tree one node a line, indented by depth.
func outline(root planNode) []string {
	var out []string
	var walk func(n planNode, depth int)
	walk = func(n planNode, depth int) {
		var b strings.Builder
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString(n.NodeType)
		if n.Index != "" {
			b.WriteString(" using " + n.Index)
		}
		if n.Relation != "" {
			b.WriteString(" on " + n.Relation)
			if n.Alias != "" && n.Alias != n.Relation {
				b.WriteString(" " + n.Alias)
			}
		}
		if n.Direction != "" && n.Direction != "Forward" {
			b.WriteString(" " + strings.ToLower(n.Direction))
		}
		fmt.Fprintf(&b, " (est %.0f", n.PlanRows)
		if n.ActualRows != nil {
			fmt.Fprintf(&b, ", rows %.0f", *n.ActualRows)
			if n.ActualLoops != nil && *n.ActualLoops != 1 {
				fmt.Fprintf(&b, " × %.0f", *n.ActualLoops)
			}
		}
		b.WriteString(")")
		out = append(out, b.String())
		for _, c := range n.Plans {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return out
}

// scanShape EXPLAINs (no ANALYZE) the first scan chunk of root's page
// after cursor and checks its shape.
func scanShape(ctx context.Context, pool *pgxpool.Pool, communityID string, r window.ThreadRequest) (shape, error) {
	var s shape
	err := inSelection(ctx, pool, func(tx pgx.Tx) error {
		sql, args := window.ThreadScanStatement(communityID, r, r.Limit+1)
		p, err := explain(ctx, tx, "COSTS TRUE", sql, args)
		if err != nil {
			return err
		}
		s = checkShape(p.Plan)
		return nil
	})
	return s, err
}
