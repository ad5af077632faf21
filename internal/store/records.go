package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// EventRecord is one matching event of a NIP-77 set: its created_at and
// id, and with EventRecordsParams.WithTags the fields a post-filter reads
// (pubkey, kind, tags, channel) in Stored.
type EventRecord struct {
	CreatedAt int64
	ID        [32]byte
	// Stored is set with WithTags; its Event has no content or sig.
	Stored *StoredEvent
}

// EventRecords hands each live event matching the filter in its scope to
// each, at most p.Limit of them, in no order and without their content:
// the records of a negentropy session (docs/PROTOCOL.md §7.13). withTags
// also reads what a post-filter needs. An error from each stops the read
// and is returned.
func (s *Store) EventRecords(ctx context.Context, p EventQueryParams, withTags bool, each func(*EventRecord) error) error {
	b := buildQuery(p)
	cols := "e.created_at, e.id"
	if withTags {
		cols += ", e.pubkey, e.kind, e.tags, e.channel_id::text"
	}
	sql := "SELECT " + cols + " " + b.fromWhere() + " LIMIT " + strconv.Itoa(p.Limit)
	rows, err := s.q.Query(ctx, sql, b.args...)
	if err != nil {
		return fmt.Errorf("event records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ts          time.Time
			id, pub     pgtype.DriverBytes
			tags        pgtype.DriverBytes
			channel     pgtype.Text
			rec         EventRecord
			stored      StoredEvent
			kind        int
			destination = []any{&ts, &id}
		)
		if withTags {
			destination = append(destination, &pub, &kind, &tags, &channel)
		}
		if err := rows.Scan(destination...); err != nil {
			return fmt.Errorf("event records: %w", err)
		}
		if len(id) != len(rec.ID) {
			return fmt.Errorf("event records: id of %d bytes", len(id))
		}
		rec.CreatedAt = ts.Unix()
		copy(rec.ID[:], id)
		if withTags {
			stored.Event.ID = hex.EncodeToString(rec.ID[:])
			stored.Event.PubKey = hex.EncodeToString(pub)
			stored.Event.CreatedAt = rec.CreatedAt
			stored.Event.Kind = kind
			if err := json.Unmarshal(tags, &stored.Event.Tags); err != nil {
				return fmt.Errorf("event records: decode tags of %s: %w", stored.Event.ID, err)
			}
			stored.Channel = channel.String
			rec.Stored = &stored
		}
		if err := each(&rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("event records: %w", err)
	}
	return nil
}
