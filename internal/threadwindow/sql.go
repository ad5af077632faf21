package threadwindow

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// setLocal opens every window transaction, writer or replica (§5.4).
const setLocal = `SET LOCAL statement_timeout = '4000ms'; SET LOCAL lock_timeout = '1000ms'; SET LOCAL plan_cache_mode = force_custom_plan`

// rootSQL is the root check of §5.3: a stored event of a conversation kind
// in the window's channel and community. Deleted roots count.
const rootSQL = `SELECT EXISTS(SELECT 1 FROM events WHERE community_id = $1 AND channel_id = $2 AND id = $3
	AND kind = ANY('{9,40002,45001,45003}'))`

// accessibleSQL is the reader's accessible channels (spec 10): every open
// channel and every channel it is an active member of, deleted channels
// excluded.
const accessibleSQL = `SELECT c.id::text FROM channels c
	WHERE c.community_id = $1 AND c.deleted_at IS NULL AND c.visibility = 'open'
	UNION
	SELECT c.id::text FROM channel_members m
	JOIN channels c ON c.community_id = m.community_id AND c.id = m.channel_id
	WHERE m.community_id = $1 AND m.pubkey = $2 AND m.removed_at IS NULL AND c.deleted_at IS NULL`

// scanHead and scanTail frame the reply scan of §5.4; scanCursor is the
// position predicate between them when the chunk starts after a key.
const (
	scanHead = `SELECT tm.event_created_at, tm.event_id, e.id IS NOT NULL AS eligible, e.payload_bytes
FROM (SELECT tm.community_id, tm.event_id, tm.event_created_at
      FROM thread_metadata tm
      WHERE tm.community_id = $1 AND tm.root_event_id = $2 AND tm.channel_id = $3
        AND tm.depth BETWEEN 1 AND $4`
	scanCursor = `
        AND tm.event_created_at <= $7
        AND (tm.event_created_at < $7 OR (tm.event_created_at = $7 AND tm.event_id > $8))`
	scanTail = `
      ORDER BY tm.event_created_at DESC, tm.event_id ASC
      LIMIT $6) tm
LEFT JOIN LATERAL (
      SELECT e.id, octet_length(e.content) + octet_length(e.tags::text) AS payload_bytes
      FROM events e
      WHERE e.community_id = tm.community_id AND e.created_at = tm.event_created_at
        AND e.id = tm.event_id AND e.channel_id = $3 AND e.deleted_at IS NULL
        AND e.kind = ANY($5)
      LIMIT 1) e ON true
ORDER BY tm.event_created_at DESC, tm.event_id ASC`
)

// loadSQL loads stored events by primary key, for rows already charged.
const loadSQL = `SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text
FROM unnest($2::timestamptz[], $3::bytea[]) AS k(created_at, id)
JOIN events e ON e.community_id = $1 AND e.created_at = k.created_at AND e.id = k.id`

// ScanStatement is the reply scan of §5.4 for one chunk of chunk metadata
// rows and its arguments: from r's cursor, or from the head when r has
// none, exactly as the engine runs a window's first chunk. Later chunks
// start after the last key scanned (the engine passes that key as the
// cursor). Each row is (event_created_at, event_id, eligible,
// payload_bytes).
func ScanStatement(communityID string, r Request, chunk int) (sql string, args []any) {
	return scanStatement(communityID, r, r.Cursor, chunk)
}

// scanStatement is ScanStatement starting after pos (nil: the head).
func scanStatement(communityID string, r Request, pos *Cursor, chunk int) (string, []any) {
	kinds := make([]int32, len(r.Kinds))
	for i, k := range r.Kinds {
		kinds[i] = int32(k)
	}
	args := []any{communityID, hexBytes(r.Root), r.Channel, r.Depth, kinds, chunk}
	if pos == nil {
		return scanHead + scanTail, args
	}
	return scanHead + scanCursor + scanTail, append(args, unixTime(pos.CreatedAt), hexBytes(pos.ID))
}

// LoadStatement is the load of §5.4 and §5.5 and its arguments: the stored
// events of keys, by primary key, in no particular order. Each row is
// (id, pubkey, created_at, kind, tags, content, sig, channel_id).
func LoadStatement(communityID string, keys []Cursor) (sql string, args []any) {
	ats := make([]time.Time, len(keys))
	ids := make([][]byte, len(keys))
	for i, k := range keys {
		ats[i], ids[i] = unixTime(k.CreatedAt), hexBytes(k.ID)
	}
	return loadSQL, []any{communityID, ats, ids}
}

// auxScanStatement is one aux page of §5.5: the sizes of up to
// auxPageRows+1 events of kinds that target one of targets through a tag
// whose element 0 is "e" and element 1 the target, after pos when it is
// set, newest first. The containment tests (one parameter per target)
// only let the GIN index narrow the rows; the EXISTS decides.
func auxScanStatement(communityID string, accessible []string, kinds []int32, targets []string, pos *Cursor) (string, []any) {
	args := []any{communityID, accessible, kinds, targets}
	var b strings.Builder
	b.WriteString(`SELECT id, created_at, kind, channel_id::text, deleted_at IS NOT NULL AS tombstone,
       octet_length(content) + octet_length(tags::text) AS payload_bytes
FROM events
WHERE community_id = $1
  AND ((channel_id IS NULL AND kind IN (5, 9005)) OR channel_id = ANY($2::uuid[]))
  AND kind = ANY($3::int[])
  AND (`)
	for i, t := range targets {
		if i > 0 {
			b.WriteString(" OR ")
		}
		args = append(args, `[["e",`+strconv.Quote(t)+`]]`)
		b.WriteString("tags @> $" + strconv.Itoa(len(args)) + "::jsonb")
	}
	b.WriteString(`)
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(tags) tag
              WHERE tag->>0 = 'e' AND tag->>1 = ANY($4::text[]))`)
	if pos != nil {
		args = append(args, unixTime(pos.CreatedAt), hexBytes(pos.ID))
		n := strconv.Itoa(len(args) - 1)
		m := strconv.Itoa(len(args))
		b.WriteString(`
  AND (created_at < $` + n + ` OR (created_at = $` + n + ` AND id > $` + m + `))`)
	}
	b.WriteString(`
ORDER BY created_at DESC, id ASC
LIMIT ` + strconv.Itoa(auxPageRows+1))
	return b.String(), args
}

func unixTime(s int64) time.Time { return time.Unix(s, 0).UTC() }

// hexBytes decodes a hex id; the parser and the database only ever hand
// over valid ones.
func hexBytes(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
