package window

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// eventColumns are the columns of an events row that every statement
// returning whole events reads, in the order of stored.targets.
const eventColumns = "e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text"

// loadSQL loads stored events by primary key, for rows already charged.
const loadSQL = "SELECT " + eventColumns + `
FROM unnest($2::timestamptz[], $3::bytea[]) AS k(created_at, id)
JOIN events e ON e.community_id = $1 AND e.created_at = k.created_at AND e.id = k.id`

// stored is an events row as read, before reconstruction.
type stored struct {
	id, pubkey, sig []byte
	createdAt       time.Time
	kind            int
	tags            []byte
	content         string
	channel         *string
}

// targets are the scan destinations of eventColumns.
func (s *stored) targets() []any {
	return []any{&s.id, &s.pubkey, &s.createdAt, &s.kind, &s.tags, &s.content, &s.sig, &s.channel}
}

// position is a keyset position as stored: created_at to the
// microsecond (an imported row may carry a fraction of a second) and the
// raw id.
type position struct {
	at time.Time
	id []byte
}

// after reports whether p comes strictly after o in the order
// created_at DESC, id ASC.
func (p position) after(o position) bool {
	return p.at.Before(o.at) || (p.at.Equal(o.at) && bytes.Compare(p.id, o.id) > 0)
}

// cursorPosition is the position of a request cursor.
func cursorPosition(c *Cursor) (*position, error) {
	if c == nil {
		return nil, nil
	}
	id, err := hex.DecodeString(c.ID)
	if err != nil {
		return nil, fmt.Errorf("decode cursor id: %w", err)
	}
	return &position{at: unixTime(c.CreatedAt), id: id}, nil
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

// position is the row's scan position, known whether or not the row can
// be reconstructed.
func (s *stored) position() position { return position{at: s.createdAt, id: s.id} }

// cursor is the row's position on the wire: whole seconds and hex.
func (s *stored) cursor() Cursor {
	return Cursor{CreatedAt: s.createdAt.Unix(), ID: hex.EncodeToString(s.id)}
}

// channelID is the stored channel id, "" for a channel-less row.
func (s *stored) channelID() string {
	if s.channel == nil {
		return ""
	}
	return *s.channel
}

// event returns the row as an event, and "" when it is reconstructable
// (docs/NIP-CW.md §2) or else why not: a 32-byte id and pubkey, a
// 64-byte signature, a kind in 0..65535 and tags that are an array of
// arrays of strings. The event is filled as far as the row allows even
// when it is not, so visibility can still be judged; signatures are not
// re-verified.
func (s *stored) event() (event.Event, string) {
	tags, tagsErr := event.DecodeStoredTags(s.tags)
	ev := event.Event{
		ID:        hex.EncodeToString(s.id),
		PubKey:    hex.EncodeToString(s.pubkey),
		CreatedAt: s.createdAt.Unix(),
		Kind:      s.kind,
		Tags:      tags,
		Content:   s.content,
		Sig:       hex.EncodeToString(s.sig),
	}
	switch {
	case len(s.id) != 32:
		return ev, fmt.Sprintf("id of %d bytes", len(s.id))
	case len(s.pubkey) != 32:
		return ev, fmt.Sprintf("pubkey of %d bytes", len(s.pubkey))
	case len(s.sig) != 64:
		return ev, fmt.Sprintf("sig of %d bytes", len(s.sig))
	case s.kind < 0 || s.kind > 65535:
		return ev, fmt.Sprintf("kind %d", s.kind)
	case tagsErr != nil:
		return ev, tagsErr.Error()
	}
	return ev, ""
}

// item is the answer's form of a delivered event.
func item(ev event.Event, channel string) Item {
	return Item{Event: ev, Channel: channel, JSON: ev.AppendJSON(nil)}
}

// LoadStatement is the load of docs/NIP-CW.md §5.3 and of every aux
// page, and its arguments: the stored events of keys, by primary key, in
// no particular order. Each row is (id, pubkey, created_at, kind, tags,
// content, sig, channel_id).
func LoadStatement(communityID string, keys []Cursor) (sql string, args []any) {
	ps := make([]position, len(keys))
	for i, k := range keys {
		ps[i] = position{at: unixTime(k.CreatedAt), id: hexBytes(k.ID)}
	}
	return loadStatement(communityID, ps)
}

// loadStatement is LoadStatement for stored positions.
func loadStatement(communityID string, keys []position) (string, []any) {
	ats := make([]time.Time, len(keys))
	ids := make([][]byte, len(keys))
	for i, k := range keys {
		ats[i], ids[i] = k.at, k.id
	}
	return loadSQL, []any{communityID, ats, ids}
}

// load runs the load for keys and returns the rows by hex id. Keys whose
// row is absent are absent from the map.
func load(ctx context.Context, q pg.Querier, communityID string, keys []position) (map[string]*stored, error) {
	out := make(map[string]*stored, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	sql, args := loadStatement(communityID, keys)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("load events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		s := new(stored)
		if err := rows.Scan(s.targets()...); err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
		out[hex.EncodeToString(s.id)] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load events: %w", err)
	}
	return out, nil
}

// unixTime is a cursor second as a timestamp.
func unixTime(s int64) time.Time { return time.Unix(s, 0).UTC() }

// hexBytes decodes a hex id; the parsers and the database only ever hand
// over valid ones.
func hexBytes(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
