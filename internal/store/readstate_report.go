package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// The read-state retention report of docs/PROTOCOL.md §14.7 and the
// purge records of migration 0007. maintenance runs them in the
// transaction it opens for them.

// Free-space methods of ReadStateStorage.Method.
const (
	// FreeMethodPgstattuple is pgstattuple_approx: used when the
	// pgstattuple extension is installed and its function may be called.
	FreeMethodPgstattuple = "pgstattuple_approx"
	// FreeMethodStatistics is the planner statistics: pg_relation_size
	// − reltuples × (average row width + 28 bytes of tuple overhead),
	// floored at 0.
	FreeMethodStatistics = "statistics"
)

// ReadStateCommunity is one community's line of the read-state report,
// with exactly the fields of docs/PROTOCOL.md §14.7.
type ReadStateCommunity struct {
	// Community is the primary host.
	Community string `json:"community"`
	// Coordinates counts the distinct conforming coordinates that have a
	// watermark or a live conforming row.
	Coordinates int64 `json:"coordinates"`
	// LiveRows counts the conforming rows with deleted_at IS NULL.
	LiveRows int64 `json:"live_rows"`
	// Watermarks counts the parameterized_event_watermarks rows of kind 30078.
	Watermarks int64 `json:"watermarks"`
	// RetainedDeleted counts the conforming rows still present with
	// deleted_at set (legacy NIP-09 rows the purge migration kept).
	RetainedDeleted int64 `json:"retained_deleted"`
	// PurgedRows is the total of read_state_retention_purges.purged_rows.
	PurgedRows int64 `json:"purged_rows"`
	// PurgedBytes is the total of read_state_retention_purges.purged_payload_bytes.
	PurgedBytes int64 `json:"purged_bytes"`
	// EstReclaimableBytes is the purged payload bytes of the records whose
	// partition still exists with the recorded filenode: space freed by the
	// purge that no rewrite has returned to the volume yet. Pages are
	// shared by all communities, so this is an attribution, not a
	// measurement.
	EstReclaimableBytes int64 `json:"est_reclaimable_bytes"`
}

// ReadStateStorage is one events partition's storage line of the report.
type ReadStateStorage struct {
	// Storage is the partition's name (schema-qualified when it is not on
	// the search path).
	Storage string `json:"storage"`
	// HeapBytes is the size of the partition's main fork.
	HeapBytes int64 `json:"heap_bytes"`
	// TOASTBytes is the size of its TOAST table and the TOAST index (0
	// without one).
	TOASTBytes int64 `json:"toast_bytes"`
	// EstFreeBytes estimates the free space inside the heap: with
	// pgstattuple_approx its approx_free_space plus dead_tuple_len (the
	// space vacuum has made, or will make, reusable); with statistics the
	// formula of FreeMethodStatistics.
	EstFreeBytes int64 `json:"est_free_bytes"`
	// Method is FreeMethodPgstattuple or FreeMethodStatistics.
	Method string `json:"method"`
}

// ReadStateReportParams are the arguments of ReadStateReport.
type ReadStateReportParams struct {
	// Host, when set, limits the community lines to the community whose
	// primary host or alias it is (normalised, as tenant.Normalize
	// returns it). Empty: every community.
	Host string
}

// ReadStateReportResult is the report of docs/PROTOCOL.md §14.7.
type ReadStateReportResult struct {
	// Communities holds one line per community, primary host ascending
	// (bytewise).
	Communities []ReadStateCommunity
	// Storage holds one line per events partition, by name.
	Storage []ReadStateStorage
}

// ReadStateReport computes the read-state retention report of
// docs/PROTOCOL.md §14.7: per community the conforming coordinates, rows,
// watermarks and purge totals, then per events partition its heap and
// TOAST sizes and an estimate of the free space in its heap. It needs
// migrations 0006 and 0007. It only reads; run it on a REPEATABLE READ
// transaction so every line comes from one snapshot
// (maintenance.ReadStateReport opens it). A Host that no community has
// returns an error matching pg.ErrNotFound.
func (s *Store) ReadStateReport(ctx context.Context, p ReadStateReportParams) (*ReadStateReportResult, error) {
	var only *string
	if p.Host != "" {
		c, err := s.CommunityByHost(ctx, p.Host)
		if err != nil {
			return nil, fmt.Errorf("read-state report: %s: %w", p.Host, err)
		}
		only = &c.ID
	}
	res := &ReadStateReportResult{}
	var err error
	if res.Communities, err = readStateCommunities(ctx, s.q, only); err != nil {
		return nil, err
	}
	if res.Storage, err = readStateStorage(ctx, s.q); err != nil {
		return nil, err
	}
	return res, nil
}

// readStateCommunitiesSQL counts per community in one pass over each
// source: conforming kind-30078 rows (idx_events_community_kind_created),
// kind-30078 watermarks and the purge records. $1 is NULL for every
// community or one community id. to_regclass and pg_relation_filenode take
// no lock, so a dropped partition simply stops counting as reclaimable.
const readStateCommunitiesSQL = `
WITH c AS (
  SELECT id, host FROM communities WHERE $1::uuid IS NULL OR id = $1::uuid),
rs AS (
  SELECT e.community_id, e.pubkey, e.d_tag, e.deleted_at IS NULL AS live
    FROM events e
   WHERE e.community_id IN (SELECT id FROM c) AND e.kind = 30078
     AND nip_rs_read_state_row(e.kind, e.d_tag, e.tags)),
wm AS (
  SELECT w.community_id, w.pubkey, w.d_tag
    FROM parameterized_event_watermarks w
   WHERE w.community_id IN (SELECT id FROM c) AND w.kind = 30078),
counts AS (
  SELECT community_id, count(*) FILTER (WHERE live) AS live_rows,
         count(*) FILTER (WHERE NOT live) AS retained_deleted
    FROM rs GROUP BY community_id),
marks AS (
  SELECT community_id, count(*) AS watermarks FROM wm GROUP BY community_id),
coords AS (
  SELECT community_id, count(*) AS coordinates FROM (
    SELECT community_id, pubkey, d_tag FROM wm
    UNION
    SELECT community_id, pubkey, d_tag FROM rs WHERE live) u
   GROUP BY community_id),
purges AS (
  SELECT community_id, sum(purged_rows)::bigint AS purged_rows,
         sum(purged_payload_bytes)::bigint AS purged_bytes,
         COALESCE(sum(purged_payload_bytes) FILTER (
           WHERE pg_relation_filenode(to_regclass(partition_name)) = partition_filenode), 0)::bigint AS reclaimable
    FROM read_state_retention_purges
   WHERE community_id IN (SELECT id FROM c)
   GROUP BY community_id)
SELECT c.host, COALESCE(coords.coordinates, 0), COALESCE(counts.live_rows, 0),
       COALESCE(marks.watermarks, 0), COALESCE(counts.retained_deleted, 0),
       COALESCE(purges.purged_rows, 0), COALESCE(purges.purged_bytes, 0),
       COALESCE(purges.reclaimable, 0)
  FROM c
  LEFT JOIN coords ON coords.community_id = c.id
  LEFT JOIN counts ON counts.community_id = c.id
  LEFT JOIN marks ON marks.community_id = c.id
  LEFT JOIN purges ON purges.community_id = c.id
 ORDER BY c.host COLLATE "C"`

func readStateCommunities(ctx context.Context, q pg.Querier, only *string) ([]ReadStateCommunity, error) {
	rows, err := q.Query(ctx, readStateCommunitiesSQL, only)
	if err != nil {
		return nil, fmt.Errorf("read-state report: count communities: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReadStateCommunity, error) {
		var c ReadStateCommunity
		err := r.Scan(&c.Community, &c.Coordinates, &c.LiveRows, &c.Watermarks, &c.RetainedDeleted,
			&c.PurgedRows, &c.PurgedBytes, &c.EstReclaimableBytes)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read-state report: count communities: %w", err)
	}
	return out, nil
}

// storageColumns are the columns every storage query starts with, over
// pg_inherits i (the events partitions) and pg_class c (each partition).
const storageColumns = `
SELECT c.oid::regclass::text, pg_relation_size(c.oid),
       COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0)`

// statisticsFreeSQL estimates heap free space from the planner statistics:
// pg_relation_size − reltuples × (Σ avg_width of the partition's columns +
// 28), floored at 0. reltuples is -1 before the first VACUUM or ANALYZE,
// counted as 0.
const statisticsFreeSQL = storageColumns + `,
       GREATEST(0, pg_relation_size(c.oid) - GREATEST(c.reltuples, 0)::float8 * (COALESCE((
         SELECT sum(s.avg_width) FROM pg_stats s
          WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND NOT s.inherited), 0) + 28))::bigint
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE i.inhparent = 'events'::regclass
 ORDER BY c.relname COLLATE "C"`

// pgstattupleFreeSQL is the query with pgstattuple_approx, whose
// schema-qualified name replaces %s.
const pgstattupleFreeSQL = storageColumns + `,
       (a.approx_free_space + a.dead_tuple_len)::bigint
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
  CROSS JOIN LATERAL %s(c.oid::regclass) a
 WHERE i.inhparent = 'events'::regclass
 ORDER BY c.relname COLLATE "C"`

func readStateStorage(ctx context.Context, q pg.Querier) ([]ReadStateStorage, error) {
	fn, err := pgstattupleApprox(ctx, q)
	if err != nil {
		return nil, err
	}
	query, method := statisticsFreeSQL, FreeMethodStatistics
	if fn != "" {
		query, method = fmt.Sprintf(pgstattupleFreeSQL, fn), FreeMethodPgstattuple
	}
	rows, err := q.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read-state report: partition storage (%s): %w", method, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReadStateStorage, error) {
		s := ReadStateStorage{Method: method}
		err := r.Scan(&s.Storage, &s.HeapBytes, &s.TOASTBytes, &s.EstFreeBytes)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read-state report: partition storage (%s): %w", method, err)
	}
	return out, nil
}

// pgstattupleApprox returns the quoted, schema-qualified name of
// pgstattuple_approx(regclass) when the pgstattuple extension is installed
// and the current role may execute it, else "".
func pgstattupleApprox(ctx context.Context, q pg.Querier) (string, error) {
	var schema string
	err := q.QueryRow(ctx, `
		SELECT n.nspname
		  FROM pg_extension x
		  JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = x.oid
		                  AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
		  JOIN pg_proc p ON p.oid = d.objid
		  JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE x.extname = 'pgstattuple' AND p.proname = 'pgstattuple_approx'
		   AND p.proargtypes = '2205'::oidvector -- (regclass)
		   AND has_function_privilege(p.oid, 'EXECUTE')
		 LIMIT 1`).Scan(&schema)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read-state report: look up pgstattuple: %w", err)
	}
	return pgx.Identifier{schema, "pgstattuple_approx"}.Sanitize(), nil
}

// ReadStatePurge is what the purge migration (0007) removed from one
// community, over all its partitions.
type ReadStatePurge struct {
	// CommunityID is the community's UUID.
	CommunityID string
	// Host is its primary host.
	Host string
	// Rows is the number of superseded read-state rows deleted.
	Rows int64
	// Bytes is Σ purged_payload_bytes: content plus tags text of those rows.
	Bytes int64
}

// ReadStatePurges returns, per community that lost rows to the purge
// migration, the rows and payload bytes recorded in
// read_state_retention_purges, primary host ascending (bytewise).
// Communities without a record are left out. It only reads and needs
// migration 0007.
func (s *Store) ReadStatePurges(ctx context.Context) ([]ReadStatePurge, error) {
	rows, err := s.q.Query(ctx, `
		SELECT c.id::text, c.host, sum(p.purged_rows)::bigint, sum(p.purged_payload_bytes)::bigint
		  FROM read_state_retention_purges p JOIN communities c ON c.id = p.community_id
		 GROUP BY c.id, c.host
		 ORDER BY c.host COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("read read-state purges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReadStatePurge, error) {
		var p ReadStatePurge
		err := r.Scan(&p.CommunityID, &p.Host, &p.Rows, &p.Bytes)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read read-state purges: %w", err)
	}
	return out, nil
}
