package window

// rootSQL is the root check of docs/NIP-CW.md §5.3: a stored event of a
// conversation kind in the window's channel and community. Deleted roots
// count.
const rootSQL = `SELECT EXISTS(SELECT 1 FROM events WHERE community_id = $1 AND channel_id = $2 AND id = $3
	AND kind = ANY('{9,40002,45001,45003}'))`

// scanHead and scanTail frame the reply scan of docs/NIP-CW.md §5.3;
// scanCursor is the position predicate between them when the chunk starts
// after a key.
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

// ThreadScanStatement is the reply scan of docs/NIP-CW.md §5.3 for one chunk
// of chunk metadata rows and its arguments: from r's cursor, or from the head
// when r has none, exactly as the engine runs a window's first chunk. Later
// chunks start after the last key scanned (the engine passes that key as the
// cursor). Each row is (event_created_at, event_id, eligible, payload_bytes).
func ThreadScanStatement(communityID string, r ThreadRequest, chunk int) (sql string, args []any) {
	return scanStatement(communityID, r, r.Cursor, chunk)
}

// scanStatement is ThreadScanStatement starting after pos (nil: the head).
func scanStatement(communityID string, r ThreadRequest, pos *Cursor, chunk int) (string, []any) {
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
