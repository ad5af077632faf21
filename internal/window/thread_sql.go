package window

import "github.com/buzz-relay/buzz/internal/store"

// ThreadScanStatement is the reply scan of docs/NIP-CW.md §5.3 for one chunk
// of chunk metadata rows and its arguments (store.WindowThreadScanStatement):
// from r's cursor, or from the head when r has none, exactly as the engine
// runs a window's first chunk. Later chunks start after the last key
// scanned (the engine passes that key as the cursor). Each row is
// (event_created_at, event_id, eligible, payload_bytes).
func ThreadScanStatement(communityID string, r ThreadRequest, chunk int) (sql string, args []any) {
	return store.WindowThreadScanStatement(scanParams(communityID, r, r.Cursor, chunk))
}

// scanParams are the reply scan's arguments for one chunk starting after
// pos (nil: the head).
func scanParams(communityID string, r ThreadRequest, pos *Cursor, chunk int) store.WindowThreadScanParams {
	p := store.WindowThreadScanParams{CommunityID: communityID, Root: hexBytes(r.Root), Channel: r.Channel,
		Depth: r.Depth, Kinds: r.Kinds, Limit: chunk}
	if pos != nil {
		p.After = &store.WindowKey{At: unixTime(pos.CreatedAt), ID: hexBytes(pos.ID)}
	}
	return p
}
