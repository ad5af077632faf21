package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The statements of the NIP-CW windows (docs/NIP-CW.md). They read rows
// as stored, never decoded: the window package reconstructs each event
// and decides what is delivered. Each runs on the Store's querier, which
// for a window is its one REPEATABLE READ READ ONLY transaction.

// windowEventColumns are the columns of an events row that every window
// statement returning whole events reads, in the order of
// WindowEvent.targets.
const windowEventColumns = "e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text"

// WindowEvent is an events row as a window reads it, before
// reconstruction: a row that cannot be reconstructed is still seen.
type WindowEvent struct {
	ID, PubKey, Sig []byte
	CreatedAt       time.Time
	Kind            int
	// Tags is the stored jsonb text.
	Tags    []byte
	Content string
	// Channel is the stored channel id, nil for a channel-less row.
	Channel *string
}

// targets are the scan destinations of windowEventColumns.
func (e *WindowEvent) targets() []any {
	return []any{&e.ID, &e.PubKey, &e.CreatedAt, &e.Kind, &e.Tags, &e.Content, &e.Sig, &e.Channel}
}

// WindowKey is a keyset position as stored: created_at to the microsecond
// (an imported row may carry a fraction of a second) and the raw id.
type WindowKey struct {
	At time.Time
	ID []byte
}

// afterSQL is the keyset predicate "strictly after a position" in
// created_at DESC, id ASC order on the events alias e, its two
// parameters (created_at, id) numbered from n. The redundant created_at
// bound lets an index on created_at start its scan at the position
// instead of filtering every newer row.
func afterSQL(n int) string {
	at, id := "$"+strconv.Itoa(n), "$"+strconv.Itoa(n+1)
	return "e.created_at <= " + at + " AND (e.created_at < " + at + " OR (e.created_at = " + at + " AND e.id > " + id + "))"
}

// windowLoadSQL loads stored events by primary key, for rows already charged.
const windowLoadSQL = "SELECT " + windowEventColumns + `
FROM unnest($2::timestamptz[], $3::bytea[]) AS k(created_at, id)
JOIN events e ON e.community_id = $1 AND e.created_at = k.created_at AND e.id = k.id
WHERE ` + unexpired

// WindowLoadStatement is the load of docs/NIP-CW.md §5.3 and of every aux
// page, and its arguments: the stored events of keys, by primary key, in
// no particular order. Each row is (id, pubkey, created_at, kind, tags,
// content, sig, channel_id).
func WindowLoadStatement(communityID string, keys []WindowKey) (sql string, args []any) {
	ats := make([]time.Time, len(keys))
	ids := make([][]byte, len(keys))
	for i, k := range keys {
		ats[i], ids[i] = k.At, k.ID
	}
	return windowLoadSQL, []any{communityID, ats, ids}
}

// WindowLoad runs WindowLoadStatement: the stored events of keys, in no
// particular order; a key whose row is absent has none.
func (s *Store) WindowLoad(ctx context.Context, communityID string, keys []WindowKey) ([]WindowEvent, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	sql, args := WindowLoadStatement(communityID, keys)
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("load events: %w", err)
	}
	defer rows.Close()
	out := make([]WindowEvent, 0, len(keys))
	for rows.Next() {
		var e WindowEvent
		if err := rows.Scan(e.targets()...); err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load events: %w", err)
	}
	return out, nil
}

// windowRowsSQL is docs/NIP-CW.md §3.2's statement without its optional
// predicates and its order. Top-level means depth 0, a broadcast depth-1
// reply, or no thread_metadata row at all (thread_metadata.depth is NOT
// NULL, so a NULL depth is a missing row).
const windowRowsSQL = "SELECT " + windowEventColumns + `, tm.reply_count, tm.descendant_count, tm.last_reply_at
FROM events e
LEFT JOIN thread_metadata tm
  ON tm.community_id = e.community_id AND tm.event_created_at = e.created_at AND tm.event_id = e.id
WHERE e.community_id = $1 AND e.channel_id = $2 AND e.deleted_at IS NULL AND ` + unexpired + `
  AND (tm.depth IS NULL OR tm.depth = 0 OR (tm.depth = 1 AND tm.broadcast = true))`

// WindowChannelRowsParams are the arguments of WindowChannelRows.
type WindowChannelRowsParams struct {
	CommunityID, Channel string
	// After, when set, starts strictly after this position.
	After *WindowKey
	// Kinds, when not nil, limits the rows to these kinds.
	Kinds []int
	Limit int
	// MaxBytes, above 0, stops the read after the row whose content and
	// tags take the rows read over it.
	MaxBytes int
}

// WindowChannelRow is a channel window's top-level row with its
// thread_metadata counters (nil without a row).
type WindowChannelRow struct {
	WindowEvent
	ReplyCount, DescendantCount *int
	LastReplyAt                 *time.Time
}

// WindowChannelRows reads up to Limit top-level live rows of a channel
// (docs/NIP-CW.md §3.2), newest first with ties by ascending id. stopped
// is true when MaxBytes ended the read early: the caller goes on after
// the last row returned.
func (s *Store) WindowChannelRows(ctx context.Context, p WindowChannelRowsParams) (out []WindowChannelRow, stopped bool, err error) {
	sql := windowRowsSQL
	args := []any{p.CommunityID, p.Channel}
	if p.After != nil {
		args = append(args, p.After.At, p.After.ID)
		sql += "\n  AND " + afterSQL(3)
	}
	if p.Kinds != nil {
		args = append(args, p.Kinds)
		sql += "\n  AND e.kind = ANY($" + strconv.Itoa(len(args)) + "::int[])"
	}
	args = append(args, p.Limit)
	sql += "\nORDER BY e.created_at DESC, e.id ASC\nLIMIT $" + strconv.Itoa(len(args))
	rs, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("select window rows: %w", err)
	}
	defer rs.Close()
	total := 0
	for rs.Next() {
		var r WindowChannelRow
		if err := rs.Scan(append(r.targets(), &r.ReplyCount, &r.DescendantCount, &r.LastReplyAt)...); err != nil {
			return nil, false, fmt.Errorf("scan window row: %w", err)
		}
		out = append(out, r)
		if total += len(r.Content) + len(r.Tags); p.MaxBytes > 0 && total > p.MaxBytes {
			stopped = true
			break
		}
	}
	if err := rs.Err(); err != nil {
		return nil, false, fmt.Errorf("read window rows: %w", err)
	}
	return out, stopped, nil
}

// windowRootsSQL finds the distinct roots of the target replies: each
// target's retained thread_metadata row (a soft-deleted reply keeps its
// row) names its root; a row without a root is not a reply. The target's
// row and the root's event must both be in the channel, and neither may
// have expired (docs/PROTOCOL.md §6.6). The root's own row gives the
// counters; none means zero counts.
const windowRootsSQL = `SELECT t.event_id, t.root_event_id, rm.reply_count, rm.descendant_count, rm.last_reply_at
FROM thread_metadata t
JOIN LATERAL (
  SELECT 1 FROM events r
  WHERE r.community_id = t.community_id AND r.id = t.root_event_id AND r.channel_id = $3
    AND (r.expires_at IS NULL OR r.expires_at > now())
  LIMIT 1) r ON true
LEFT JOIN LATERAL (
  SELECT m.reply_count, m.descendant_count, m.last_reply_at FROM thread_metadata m
  WHERE m.community_id = t.community_id AND m.event_id = t.root_event_id AND m.channel_id = $3
  LIMIT 1) rm ON true
WHERE t.community_id = $1 AND t.event_id = ANY($2::bytea[]) AND t.channel_id = $3
  AND t.root_event_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.community_id = t.community_id AND e.created_at = t.event_created_at
                  AND e.id = t.event_id AND NOT ` + unexpired + `)`

// WindowThreadRoot is a target reply's root and the root's counters (nil
// without a thread_metadata row of its own).
type WindowThreadRoot struct {
	Target, Root                []byte
	ReplyCount, DescendantCount *int
	LastReplyAt                 *time.Time
}

// WindowThreadRoots returns the root of each target that is a reply in
// channel, with the root's counters (summary recovery,
// docs/NIP-CW.md §4). Targets that are missing, not replies, or outside the channel,
// or whose root is, have no row. Order is unspecified.
func (s *Store) WindowThreadRoots(ctx context.Context, communityID, channel string, targets [][]byte) ([]WindowThreadRoot, error) {
	rs, err := s.q.Query(ctx, windowRootsSQL, communityID, targets, channel)
	if err != nil {
		return nil, fmt.Errorf("select target roots: %w", err)
	}
	defer rs.Close()
	var out []WindowThreadRoot
	for rs.Next() {
		var r WindowThreadRoot
		if err := rs.Scan(&r.Target, &r.Root, &r.ReplyCount, &r.DescendantCount, &r.LastReplyAt); err != nil {
			return nil, fmt.Errorf("scan target root: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read target roots: %w", err)
	}
	return out, nil
}

// windowParticipantsSQL returns, for each root, up to $3 distinct
// authors of its live replies, the author of the latest reply first (ties
// by pubkey, so the list is stable).
const windowParticipantsSQL = `SELECT x.root, p.pubkey
FROM unnest($2::bytea[]) WITH ORDINALITY AS x(root, ord)
CROSS JOIN LATERAL (
  SELECT e.pubkey, max(e.created_at) AS latest
  FROM thread_metadata tm
  JOIN events e ON e.community_id = tm.community_id AND e.created_at = tm.event_created_at AND e.id = tm.event_id
  WHERE tm.community_id = $1 AND tm.root_event_id = x.root AND e.deleted_at IS NULL AND ` + unexpired + `
  GROUP BY e.pubkey
  ORDER BY latest DESC, e.pubkey ASC
  LIMIT $3) p
ORDER BY x.ord, p.latest DESC, p.pubkey ASC`

// WindowParticipant is one reply author of a thread root.
type WindowParticipant struct{ Root, PubKey []byte }

// WindowThreadParticipants returns, in one statement, up to limit
// distinct authors of each root's live replies: roots in the order
// given, within a root the author of the latest reply first (ties by
// pubkey).
func (s *Store) WindowThreadParticipants(ctx context.Context, communityID string, roots [][]byte, limit int) ([]WindowParticipant, error) {
	rs, err := s.q.Query(ctx, windowParticipantsSQL, communityID, roots, limit)
	if err != nil {
		return nil, fmt.Errorf("select thread participants: %w", err)
	}
	defer rs.Close()
	var out []WindowParticipant
	for rs.Next() {
		var p WindowParticipant
		if err := rs.Scan(&p.Root, &p.PubKey); err != nil {
			return nil, fmt.Errorf("scan thread participant: %w", err)
		}
		out = append(out, p)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read thread participants: %w", err)
	}
	return out, nil
}

// windowTargetTest is the positional test of target matching
// (docs/NIP-CW.md §2) on the events alias e: a tag whose element 0 is "e"
// and element 1 one of the targets, the text[] parameter param.
// jsonb_array_elements raises an error on tags that are not an array, and
// SQL does not promise to run the containment prefilter first, so the
// test runs under CASE: such tags never reach it and match nothing.
func windowTargetTest(param string) string {
	return `CASE WHEN jsonb_typeof(e.tags) = 'array'
      THEN EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) tag
                   WHERE tag->>0 = 'e' AND tag->>1 = ANY(` + param + `::text[]))
      ELSE false END`
}

// WindowAuxParams are the arguments of WindowAuxPage.
type WindowAuxParams struct {
	CommunityID string
	Kinds       []int
	// Tombstones includes deleted events.
	Tombstones bool
	// Channelless are the kinds read without a channel.
	Channelless []int
	// Channels, when not nil, narrows the channels read.
	Channels []string
	// Targets are the event ids the rows must target.
	Targets []string
	// After, when set, starts strictly after this position.
	After *WindowKey
	// Limit is the rows of the page.
	Limit int
}

// WindowAuxRow is one row of an aux page: its position, what the gates
// need before loading, and its size.
type WindowAuxRow struct {
	Key       WindowKey
	Kind      int
	Channel   *string
	Tombstone bool
	// Payload is the bytes of content plus the tags text.
	Payload int64
}

// WindowAuxStatement is one aux page: the position, gate columns and
// size of up to Limit events of Kinds in the community that target one of
// Targets, newest first, strictly after After when it is set. The
// containment tests (one parameter per target) let the GIN index find
// candidates; only the positional test decides. Each row is (id,
// created_at, kind, channel_id, tombstone, payload_bytes).
func WindowAuxStatement(p WindowAuxParams) (string, []any) {
	args := []any{p.CommunityID, p.Kinds, p.Tombstones, p.Channelless, p.Channels, p.Targets}
	var b strings.Builder
	b.WriteString(`SELECT e.id, e.created_at, e.kind, e.channel_id::text, e.deleted_at IS NOT NULL AS tombstone,
       octet_length(e.content) + octet_length(e.tags::text) AS payload_bytes
FROM events e
WHERE e.community_id = $1 AND e.kind = ANY($2::int[])
  AND ($3::bool OR e.deleted_at IS NULL) AND ` + unexpired + `
  AND ((e.channel_id IS NULL AND e.kind = ANY($4::int[])) OR $5::uuid[] IS NULL OR e.channel_id = ANY($5::uuid[]))
  AND (`)
	for i, t := range p.Targets {
		if i > 0 {
			b.WriteString(" OR ")
		}
		args = append(args, `[["e",`+strconv.Quote(t)+`]]`)
		b.WriteString("e.tags @> $" + strconv.Itoa(len(args)) + "::jsonb")
	}
	b.WriteString(")\n  AND " + windowTargetTest("$6"))
	if p.After != nil {
		args = append(args, p.After.At, p.After.ID)
		b.WriteString("\n  AND " + afterSQL(len(args)-1))
	}
	b.WriteString("\nORDER BY e.created_at DESC, e.id ASC\nLIMIT " + strconv.Itoa(p.Limit))
	return b.String(), args
}

// WindowAuxPage runs WindowAuxStatement.
func (s *Store) WindowAuxPage(ctx context.Context, p WindowAuxParams) ([]WindowAuxRow, error) {
	sql, args := WindowAuxStatement(p)
	rs, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("select aux page: %w", err)
	}
	defer rs.Close()
	var out []WindowAuxRow
	for rs.Next() {
		var r WindowAuxRow
		if err := rs.Scan(&r.Key.ID, &r.Key.At, &r.Kind, &r.Channel, &r.Tombstone, &r.Payload); err != nil {
			return nil, fmt.Errorf("scan aux row: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read aux page: %w", err)
	}
	return out, nil
}

// WindowThreadRootExists is the root check of docs/NIP-CW.md §5.3: a
// stored event of a conversation kind in the channel and community.
// Deleted roots count; expired ones do not (docs/PROTOCOL.md §6.6).
func (s *Store) WindowThreadRootExists(ctx context.Context, communityID, channel string, root []byte) (bool, error) {
	var ok bool
	if err := s.q.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM events e WHERE e.community_id = $1 AND e.channel_id = $2 AND e.id = $3
	AND e.kind = ANY('{9,40002,45001,45003}') AND `+unexpired+`)`, communityID, channel, root).Scan(&ok); err != nil {
		return false, fmt.Errorf("root check: %w", err)
	}
	return ok, nil
}

// The reply scan of docs/NIP-CW.md §5.3: scanHead and scanTail frame it,
// scanCursor is the position predicate between them when the chunk
// starts after a key.
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
        AND e.id = tm.event_id AND e.channel_id = $3 AND e.deleted_at IS NULL AND ` + unexpired + `
        AND e.kind = ANY($5)
      LIMIT 1) e ON true
ORDER BY tm.event_created_at DESC, tm.event_id ASC`
)

// WindowThreadScanParams are the arguments of WindowThreadScan.
type WindowThreadScanParams struct {
	CommunityID string
	Root        []byte
	Channel     string
	// Depth is the deepest reply depth read.
	Depth int
	// Kinds are the kinds a reply must have to be eligible.
	Kinds []int
	// After, when set, starts strictly after this position.
	After *WindowKey
	// Limit is the metadata rows of the chunk.
	Limit int
}

// WindowScanRow is one metadata row of the reply scan: its key, whether
// its event is eligible (live, of Kinds, in the channel), and then the
// bytes of its content plus tags text.
type WindowScanRow struct {
	Key      WindowKey
	Eligible bool
	Payload  *int64
}

// WindowThreadScanStatement is the reply scan of docs/NIP-CW.md §5.3 for
// one chunk of p.Limit metadata rows and its arguments. Each row is
// (event_created_at, event_id, eligible, payload_bytes).
func WindowThreadScanStatement(p WindowThreadScanParams) (sql string, args []any) {
	kinds := make([]int32, len(p.Kinds))
	for i, k := range p.Kinds {
		kinds[i] = int32(k)
	}
	args = []any{p.CommunityID, p.Root, p.Channel, p.Depth, kinds, p.Limit}
	if p.After == nil {
		return scanHead + scanTail, args
	}
	return scanHead + scanCursor + scanTail, append(args, p.After.At, p.After.ID)
}

// WindowThreadScan runs WindowThreadScanStatement and hands each row to
// each, in scan order, until each answers false or fails.
func (s *Store) WindowThreadScan(ctx context.Context, p WindowThreadScanParams, each func(WindowScanRow) (bool, error)) error {
	sql, args := WindowThreadScanStatement(p)
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("scan replies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r WindowScanRow
		if err := rows.Scan(&r.Key.At, &r.Key.ID, &r.Eligible, &r.Payload); err != nil {
			return fmt.Errorf("scan replies: %w", err)
		}
		more, err := each(r)
		if err != nil || !more {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("scan replies: %w", err)
	}
	return nil
}
