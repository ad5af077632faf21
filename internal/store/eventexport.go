package store

import (
	"context"
	"fmt"
)

// The statements of `buzz-relay community export` (docs/OPERATIONS.md
// "Exporting a community"). Both read every stored row of one community
// that a reader could still be shown, live or soft-deleted, and skip the
// expired ones as every read does (unexpired): a soft-deleted row is still
// stored, its tombstone is part of what windows answer, and the event that
// deleted it follows it in the export, so an import that replays the
// export in order deletes it again. Run them on a Store made over one
// REPEATABLE READ transaction, so the count and the rows are one snapshot.

// exportWhere selects the rows an export holds, on the events alias e.
const exportWhere = `e.community_id = $1 AND ` + unexpired

// exportCursor is the export's cursor in the Store's transaction. Its
// order is commit order as docs/OPERATIONS.md "Exporting a community"
// defines it: received_at is now() of the write transaction that stored
// the row, and a write checked against an earlier event (its channel, its
// parent, its target) began after that event was committed. Rows of one
// transaction share received_at and are ordered by created_at, then id, so
// the order is total and the same on every run over the same snapshot.
const exportCursor = "buzz_export"

// EventExportCounts is what a community's export holds.
type EventExportCounts struct {
	// Events is every row the export holds.
	Events int64
	// Deleted is how many of them are soft-deleted.
	Deleted int64
}

// EventExportCount counts the rows EventExport returns for the community.
func (s *Store) EventExportCount(ctx context.Context, communityID string) (EventExportCounts, error) {
	var c EventExportCounts
	err := s.q.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE e.deleted_at IS NOT NULL)
		FROM events e WHERE `+exportWhere, communityID).Scan(&c.Events, &c.Deleted)
	if err != nil {
		return EventExportCounts{}, fmt.Errorf("count export: %w", err)
	}
	return c, nil
}

// EventExport reads the community's stored events in commit order through
// a cursor, batch rows per FETCH, and calls fn with each batch: memory
// holds one batch, never the community. The Store must be made over a
// transaction (a cursor lives in one); the cursor is closed before it
// returns. An error from fn stops the read and is returned as it is.
func (s *Store) EventExport(ctx context.Context, communityID string, batch int, fn func([]EventRow) error) error {
	if batch < 1 {
		return fmt.Errorf("export events: batch %d < 1", batch)
	}
	if _, err := s.q.Exec(ctx, `DECLARE `+exportCursor+` NO SCROLL CURSOR FOR
		SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text
		FROM events e WHERE `+exportWhere+`
		ORDER BY e.received_at, e.created_at, e.id`, communityID); err != nil {
		return fmt.Errorf("export events: declare cursor: %w", err)
	}
	fetch := fmt.Sprintf("FETCH FORWARD %d FROM %s", batch, exportCursor)
	for {
		rows, err := s.q.Query(ctx, fetch)
		if err != nil {
			return fmt.Errorf("export events: fetch: %w", err)
		}
		page, err := scanEventRows(rows, batch, 0)
		if err != nil {
			return fmt.Errorf("export events: fetch: %w", err)
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < batch {
			break
		}
	}
	if _, err := s.q.Exec(ctx, `CLOSE `+exportCursor); err != nil {
		return fmt.Errorf("export events: close cursor: %w", err)
	}
	return nil
}
