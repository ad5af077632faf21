package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// EventCountCandidates returns up to Limit live events matching the
// filter's pushable constraints, for the COUNT fallback's post-filter:
// each with its id, pubkey, created_at, kind, tags and channel, never its
// content or signature, which no count looks at. Order is unspecified.
func (s *Store) EventCountCandidates(ctx context.Context, p EventQueryParams) ([]StoredEvent, error) {
	b := buildQuery(p)
	sql := "SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.channel_id::text " + b.fromWhere() +
		" LIMIT " + strconv.Itoa(p.Limit)
	rows, err := s.q.Query(ctx, sql, b.args...)
	if err != nil {
		return nil, fmt.Errorf("count candidates: %w", err)
	}
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		var (
			id, pub, tags []byte
			ts            time.Time
			channel       *string
			se            StoredEvent
		)
		if err := rows.Scan(&id, &pub, &ts, &se.Event.Kind, &tags, &channel); err != nil {
			return nil, fmt.Errorf("count candidates: %w", err)
		}
		se.Event.ID = hex.EncodeToString(id)
		se.Event.PubKey = hex.EncodeToString(pub)
		se.Event.CreatedAt = ts.Unix()
		if err := json.Unmarshal(tags, &se.Event.Tags); err != nil {
			return nil, fmt.Errorf("count candidates: decode tags of %s: %w", se.Event.ID, err)
		}
		if channel != nil {
			se.Channel = *channel
		}
		out = append(out, se)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count candidates: %w", err)
	}
	return out, nil
}
