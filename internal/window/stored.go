package window

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// stored is an events row as read (store.WindowEvent), before
// reconstruction.
type stored struct{ store.WindowEvent }

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

// key is p as the store's keyset position.
func (p position) key() store.WindowKey { return store.WindowKey{At: p.at, ID: p.id} }

// keyOf returns a pointer to p's store key, nil for a nil p.
func keyOf(p *position) *store.WindowKey {
	if p == nil {
		return nil
	}
	k := p.key()
	return &k
}

// position is the row's scan position, known whether or not the row can
// be reconstructed.
func (s *stored) position() position { return position{at: s.CreatedAt, id: s.ID} }

// cursor is the row's position on the wire: whole seconds and hex.
func (s *stored) cursor() Cursor {
	return Cursor{CreatedAt: s.CreatedAt.Unix(), ID: hex.EncodeToString(s.ID)}
}

// channelID is the stored channel id, "" for a channel-less row.
func (s *stored) channelID() string {
	if s.Channel == nil {
		return ""
	}
	return *s.Channel
}

// event returns the row as an event, and "" when it is reconstructable
// (docs/NIP-CW.md §2) or else why not: a 32-byte id and pubkey, a
// 64-byte signature, a kind in 0..65535 and tags that are an array of
// arrays of strings. The event is filled as far as the row allows even
// when it is not, so visibility can still be judged; signatures are not
// re-verified.
func (s *stored) event() (event.Event, string) {
	tags, tagsErr := event.DecodeStoredTags(s.Tags)
	ev := event.Event{
		ID:        hex.EncodeToString(s.ID),
		PubKey:    hex.EncodeToString(s.PubKey),
		CreatedAt: s.CreatedAt.Unix(),
		Kind:      s.Kind,
		Tags:      tags,
		Content:   s.Content,
		Sig:       hex.EncodeToString(s.Sig),
	}
	switch {
	case len(s.ID) != 32:
		return ev, fmt.Sprintf("id of %d bytes", len(s.ID))
	case len(s.PubKey) != 32:
		return ev, fmt.Sprintf("pubkey of %d bytes", len(s.PubKey))
	case len(s.Sig) != 64:
		return ev, fmt.Sprintf("sig of %d bytes", len(s.Sig))
	case s.Kind < 0 || s.Kind > 65535:
		return ev, fmt.Sprintf("kind %d", s.Kind)
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
// page, and its arguments (store.WindowLoadStatement): the stored events
// of keys, by primary key, in no particular order. Each row is (id,
// pubkey, created_at, kind, tags, content, sig, channel_id).
func LoadStatement(communityID string, keys []Cursor) (sql string, args []any) {
	ks := make([]store.WindowKey, len(keys))
	for i, k := range keys {
		ks[i] = store.WindowKey{At: unixTime(k.CreatedAt), ID: hexBytes(k.ID)}
	}
	return store.WindowLoadStatement(communityID, ks)
}

// load runs the load for keys and returns the rows by hex id. Keys whose
// row is absent are absent from the map.
func load(ctx context.Context, q pg.Querier, communityID string, keys []position) (map[string]*stored, error) {
	out := make(map[string]*stored, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ks := make([]store.WindowKey, len(keys))
	for i, k := range keys {
		ks[i] = k.key()
	}
	rows, err := store.New(q).WindowLoad(ctx, communityID, ks)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		out[hex.EncodeToString(rows[i].ID)] = &stored{rows[i]}
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
