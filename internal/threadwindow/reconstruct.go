package threadwindow

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// stored is one row of LoadStatement, reconstructed or not.
type stored struct {
	item Item
	// bad says why the row does not form a well-formed event ("" when it
	// does).
	bad string
}

// load runs LoadStatement for keys and returns the rows by hex id. Keys
// whose row is absent are absent from the map.
func load(ctx context.Context, q pg.Querier, communityID string, keys []Cursor) (map[string]stored, error) {
	out := make(map[string]stored, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	sql, args := LoadStatement(communityID, keys)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("load events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, pub, sig []byte
			at           time.Time
			kind         int64
			tags         []byte
			content      string
			channel      *string
		)
		if err := rows.Scan(&id, &pub, &at, &kind, &tags, &content, &sig, &channel); err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
		s := reconstruct(id, pub, sig, at, kind, tags, content, channel)
		out[hex.EncodeToString(id)] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load events: %w", err)
	}
	return out, nil
}

// reconstruct forms the event of a stored row (§2): 32-byte id and pubkey,
// 64-byte sig, kind 0..65535, tags an array of arrays of strings. The
// signature is not verified again.
func reconstruct(id, pub, sig []byte, at time.Time, kind int64, tags []byte, content string, channel *string) stored {
	switch {
	case len(id) != 32:
		return stored{bad: fmt.Sprintf("id of %d bytes", len(id))}
	case len(pub) != 32:
		return stored{bad: fmt.Sprintf("pubkey of %d bytes", len(pub))}
	case len(sig) != 64:
		return stored{bad: fmt.Sprintf("sig of %d bytes", len(sig))}
	case kind < 0 || kind > 65535:
		return stored{bad: fmt.Sprintf("kind %d", kind)}
	}
	ts, err := event.DecodeStoredTags(tags)
	if err != nil {
		return stored{bad: err.Error()}
	}
	ev := event.Event{ID: hex.EncodeToString(id), PubKey: hex.EncodeToString(pub), CreatedAt: at.Unix(),
		Kind: int(kind), Tags: ts, Content: content, Sig: hex.EncodeToString(sig)}
	it := Item{Event: ev, JSON: ev.AppendJSON(nil)}
	if channel != nil {
		it.Channel = *channel
	}
	return stored{item: it}
}
