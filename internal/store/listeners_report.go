package store

import (
	"context"
	"encoding/hex"
	"fmt"
)

// ListenerReportRow is what the operator-listener tables hold for one
// listener pubkey (docs/PROTOCOL.md §15.10, maintenance operator-listeners --report).
// Ages are whole seconds before the statement's now(), never negative.
type ListenerReportRow struct {
	// Listener is the lowercase hex listener pubkey.
	Listener string
	// Registrations counts its rows in operator_listener_pubkeys.
	Registrations int64
	// OldestRegistrationAgeSeconds is the age of its oldest registration
	// (created or last renewed); nil when it has none.
	OldestRegistrationAgeSeconds *int64
	// OutboxPending and OutboxSending count its outbox rows by state.
	OutboxPending int64
	OutboxSending int64
	// OldestOutboxAgeSeconds is the age of its oldest outbox row, whatever
	// its state; nil when it has none.
	OldestOutboxAgeSeconds *int64
	// OutboxPastEligibility counts its outbox rows created more than
	// 15 minutes ago: rows that are never claimed again and wait for the
	// outbox reaper (docs/PROTOCOL.md §15.8).
	OutboxPastEligibility int64
}

// ListenerReport returns one row per listener pubkey that has a
// registration or an outbox row, ordered by pubkey (the lowercase hex
// order), in one read-only statement: every count and age comes from one
// snapshot and one now(). Listeners with no row in either table are not in
// it: the caller adds the configured ones. It reads whole tables (both are
// deployment-global, nothing is fenced by community), changes nothing and
// may be called at any time; run it in a READ ONLY transaction to make that
// certain.
func (s *Store) ListenerReport(ctx context.Context) ([]ListenerReportRow, error) {
	q := s.q
	// The CASEs keep a missing age NULL: greatest() ignores NULL arguments.
	rows, err := q.Query(ctx, `WITH r AS (
  SELECT listener_pubkey, count(*) AS n, min(created_at) AS oldest
  FROM operator_listener_pubkeys GROUP BY listener_pubkey
), o AS (
  SELECT listener_pubkey,
         count(*) FILTER (WHERE state = 'pending') AS pending,
         count(*) FILTER (WHERE state = 'sending') AS sending,
         min(created_at) AS oldest,
         count(*) FILTER (WHERE created_at < now() - interval '15 minutes') AS past
  FROM operator_listener_outbox GROUP BY listener_pubkey
)
SELECT coalesce(r.listener_pubkey, o.listener_pubkey) AS listener,
       coalesce(r.n, 0),
       CASE WHEN r.oldest IS NOT NULL THEN greatest(floor(extract(epoch FROM now() - r.oldest)), 0)::bigint END,
       coalesce(o.pending, 0), coalesce(o.sending, 0),
       CASE WHEN o.oldest IS NOT NULL THEN greatest(floor(extract(epoch FROM now() - o.oldest)), 0)::bigint END,
       coalesce(o.past, 0)
FROM r FULL JOIN o ON o.listener_pubkey = r.listener_pubkey
ORDER BY listener`)
	if err != nil {
		return nil, fmt.Errorf("listener report: %w", err)
	}
	defer rows.Close()
	var out []ListenerReportRow
	for rows.Next() {
		var (
			r        ListenerReportRow
			listener []byte
		)
		if err := rows.Scan(&listener, &r.Registrations, &r.OldestRegistrationAgeSeconds,
			&r.OutboxPending, &r.OutboxSending, &r.OldestOutboxAgeSeconds, &r.OutboxPastEligibility); err != nil {
			return nil, fmt.Errorf("listener report: %w", err)
		}
		r.Listener = hex.EncodeToString(listener)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listener report: %w", err)
	}
	return out, nil
}
