package channelwindow

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// eventColumns are the columns of an events row every statement of this
// package reads, in the order of stored.targets.
const eventColumns = "e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text"

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

// cursorPosition is the position of a request cursor.
func cursorPosition(c *Cursor) (*position, error) {
	if c == nil {
		return nil, nil
	}
	id, err := hex.DecodeString(c.ID)
	if err != nil {
		return nil, fmt.Errorf("decode cursor id: %w", err)
	}
	return &position{at: time.Unix(c.CreatedAt, 0).UTC(), id: id}, nil
}

// after is the keyset predicate "strictly after a position" in
// created_at DESC, id ASC order, its two parameters (created_at, id)
// numbered from n. The redundant created_at bound lets an index on
// created_at start its scan at the position instead of filtering every
// newer row.
func after(n int) string {
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

// event returns the row as an event and whether it is reconstructable
// (§2): a 32-byte id and pubkey, a 64-byte signature, a kind in 0..65535
// and tags that are an array of arrays of strings. The event is filled
// as far as the row allows even when it is not, so visibility can still
// be judged; signatures are not re-verified.
func (s *stored) event() (event.Event, bool) {
	tags, err := event.DecodeStoredTags(s.tags)
	tagsOK := err == nil
	ev := event.Event{
		ID:        hex.EncodeToString(s.id),
		PubKey:    hex.EncodeToString(s.pubkey),
		CreatedAt: s.createdAt.Unix(),
		Kind:      s.kind,
		Tags:      tags,
		Content:   s.content,
		Sig:       hex.EncodeToString(s.sig),
	}
	ok := tagsOK && len(s.id) == 32 && len(s.pubkey) == 32 && len(s.sig) == 64 && s.kind >= 0 && s.kind <= 65535
	return ev, ok
}

// item is the answer's form of a delivered event.
func item(ev event.Event, channel string) Item {
	return Item{Event: ev, Channel: channel, JSON: ev.AppendJSON(nil)}
}
