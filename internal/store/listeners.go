package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/event"
)

// Operator listeners (docs/PROTOCOL.md §15): operator_listener_pubkeys holds the target
// pubkeys each listener registered, operator_listener_outbox the mention
// notifications waiting for delivery. Both are deployment-global (migration
// 0008): nothing here takes a community fence. Rows are enqueued by
// EventInsert (ListenerTargets); everything else is below.

// ListenerClaimLimit is how many outbox rows one claim takes at most
// (docs/PROTOCOL.md §15.5).
const ListenerClaimLimit = 10

// ListenerMaxAttempts bounds the POSTs of one outbox row (docs/PROTOCOL.md §15.7): a
// row is claimed only while attempts < ListenerMaxAttempts, and a retry is
// refused once the claimed attempt reached it.
const ListenerMaxAttempts = 9

// IsMentionKind reports whether kind enqueues operator-listener
// notifications: exactly 9, 40002, 45001 and 45003 (docs/PROTOCOL.md §15.4). A constant
// test with no I/O, made before anything else.
func IsMentionKind(kind int) bool {
	switch kind {
	case 9, 40002, 45001, 45003:
		return true
	}
	return false
}

// MentionTargets returns the operator-listener targets of an event
// (docs/PROTOCOL.md §15.4): the values of tags whose element 0 is "p" and whose element 1 is 64
// hex characters of either case (exactly 32 bytes), lowercased, distinct, in
// tag order. Malformed p tags are skipped. nil when there is none. It does
// not look at the kind: the caller tests IsMentionKind first.
func MentionTargets(ev *event.Event) []string {
	var out []string
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "p" || !event.IsHexAnyCase64(t[1]) {
			continue
		}
		v := strings.ToLower(t[1])
		dup := false
		for _, seen := range out {
			if seen == v {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, v)
		}
	}
	return out
}

// ListenerRegister registers (or renews) targets for listener (docs/PROTOCOL.md §15.3
// step 6): duplicates within targets, in either case, are removed, then one
// upsert sets created_at to now() for every pair, new or not, so a renewal
// restarts the 30-day lifetime. Pubkeys are 64 hex characters (either case);
// anything else is an error and nothing is written. An empty targets writes
// nothing. Calling it twice is harmless.
func (s *Store) ListenerRegister(ctx context.Context, listener string, targets []string) error {
	q := s.q
	l, ts, err := listenerKeys(listener, targets)
	if err != nil {
		return fmt.Errorf("register listener pubkeys: %w", err)
	}
	if len(ts) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, `INSERT INTO operator_listener_pubkeys (listener_pubkey, target_pubkey)
		SELECT $1, t FROM unnest($2::bytea[]) AS t
		ON CONFLICT (listener_pubkey, target_pubkey) DO UPDATE SET created_at = EXCLUDED.created_at`, l, ts); err != nil {
		return fmt.Errorf("register listener pubkeys: %w", err)
	}
	return nil
}

// ListenerUnregister removes listener's registrations of targets
// (docs/PROTOCOL.md §15.3). Targets it does not hold are ignored, so it is idempotent.
// Queued outbox rows stay (they age out); see ListenerForget.
func (s *Store) ListenerUnregister(ctx context.Context, listener string, targets []string) error {
	q := s.q
	l, ts, err := listenerKeys(listener, targets)
	if err != nil {
		return fmt.Errorf("unregister listener pubkeys: %w", err)
	}
	if len(ts) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, `DELETE FROM operator_listener_pubkeys WHERE listener_pubkey = $1 AND target_pubkey = ANY($2::bytea[])`,
		l, ts); err != nil {
		return fmt.Errorf("unregister listener pubkeys: %w", err)
	}
	return nil
}

// ListenerDelivery is one claimed outbox row with what its notification
// carries (docs/PROTOCOL.md §15.5, §15.6).
type ListenerDelivery struct {
	// ID is the outbox row's UUID.
	ID string
	// ClaimID is the claim token that fences every later change of the row.
	ClaimID string
	// Listener and Target are lowercase hex pubkeys.
	Listener string
	Target   string
	// CommunityID is the event's community; CommunityHost its primary host.
	CommunityID   string
	CommunityHost string
	// EventID is the lowercase hex event id.
	EventID string
	// EventKind is the event's kind.
	EventKind int
	// EventCreatedAt is the author's created_at, in unix seconds.
	EventCreatedAt int64
	// Attempts counts this claim: 1 on the first send.
	Attempts int
}

// ListenerClaim claims up to limit due outbox rows of the routable listeners
// with a fresh claim token (docs/PROTOCOL.md §15.5): rows with attempts below 9, due
// (next_attempt_at <= now()), created at or after eligibleSince (the relay
// passes now − 15 min), pending or sending with an expired lease, and whose
// community still exists. Locked rows are skipped, so concurrent claims
// never share a row. Each claimed row becomes sending with lease_until =
// leaseUntil (now + 30 s) and one more attempt. Rows of listeners not in
// routable are never touched. No routable listener claims nothing without a
// statement. limit must be at least 1 (ListenerClaimLimit in production).
func (s *Store) ListenerClaim(ctx context.Context, routable []string, limit int,
	eligibleSince, leaseUntil time.Time) ([]ListenerDelivery, error) {
	q := s.q
	if limit < 1 {
		return nil, fmt.Errorf("claim listener outbox: limit %d must be at least 1", limit)
	}
	if len(routable) == 0 {
		return nil, nil
	}
	listeners := make([][]byte, len(routable))
	for i, l := range routable {
		raw, err := pubkeyBytes(l)
		if err != nil {
			return nil, fmt.Errorf("claim listener outbox: listener: %w", err)
		}
		listeners[i] = raw
	}
	rows, err := q.Query(ctx, `WITH candidates AS (
  SELECT o.id FROM operator_listener_outbox o
  JOIN communities c ON c.id = o.community_id
  WHERE o.listener_pubkey = ANY($1::bytea[])
    AND o.attempts < 9
    AND o.next_attempt_at <= now()
    AND o.created_at >= $2
    AND (o.state = 'pending' OR (o.state = 'sending' AND o.lease_until < now()))
  ORDER BY o.next_attempt_at, o.created_at, o.id
  FOR UPDATE OF o SKIP LOCKED
  LIMIT $5)
UPDATE operator_listener_outbox o
SET state = 'sending', claim_id = $3, lease_until = $4,
    attempts = o.attempts + 1
FROM candidates cand, communities community
WHERE o.id = cand.id AND community.id = o.community_id
RETURNING o.id::text, o.claim_id::text, o.listener_pubkey, o.target_pubkey, o.community_id::text, community.host,
          o.event_id, o.event_kind, o.event_created_at, o.attempts`,
		listeners, eligibleSince, uuid.NewString(), leaseUntil, limit)
	if err != nil {
		return nil, fmt.Errorf("claim listener outbox: %w", err)
	}
	defer rows.Close()
	var out []ListenerDelivery
	for rows.Next() {
		var (
			d                   ListenerDelivery
			listener, target, e []byte
			created             time.Time
		)
		if err := rows.Scan(&d.ID, &d.ClaimID, &listener, &target, &d.CommunityID, &d.CommunityHost,
			&e, &d.EventKind, &created, &d.Attempts); err != nil {
			return nil, fmt.Errorf("claim listener outbox: %w", err)
		}
		d.Listener, d.Target, d.EventID = hex.EncodeToString(listener), hex.EncodeToString(target), hex.EncodeToString(e)
		d.EventCreatedAt = created.Unix()
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim listener outbox: %w", err)
	}
	return out, nil
}

// ListenerComplete deletes a claimed row after delivery, or after a terminal
// failure (docs/PROTOCOL.md §15.5). It matches id, claimID and state sending; false
// means the claim was lost (the lease expired and another claim took the
// row, or it is gone) and nothing changed.
func (s *Store) ListenerComplete(ctx context.Context, id, claimID string) (bool, error) {
	q := s.q
	tag, err := q.Exec(ctx, `DELETE FROM operator_listener_outbox WHERE id = $1 AND claim_id = $2 AND state = 'sending'`, id, claimID)
	if err != nil {
		return false, fmt.Errorf("complete listener delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListenerRetry puts a claimed row back to pending, due at next, with no
// claim and no lease (docs/PROTOCOL.md §15.5). It matches id, claimID, state sending
// and attempts below 9; false means the claim was lost or the row used its
// last attempt (the caller then fails it with ListenerComplete), and nothing
// changed.
func (s *Store) ListenerRetry(ctx context.Context, id, claimID string, next time.Time) (bool, error) {
	q := s.q
	tag, err := q.Exec(ctx, `UPDATE operator_listener_outbox SET state = 'pending', claim_id = NULL, lease_until = NULL, next_attempt_at = $3
		WHERE id = $1 AND claim_id = $2 AND state = 'sending' AND attempts < 9`, id, claimID, next)
	if err != nil {
		return false, fmt.Errorf("retry listener delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListenerReapOutbox deletes outbox rows created more than age ago
// (docs/PROTOCOL.md §15.8: 15 minutes), whatever their state, listener or community, and
// returns how many it deleted. The age is measured on the database's clock,
// as the rows' created_at is, so a relay whose clock runs ahead cannot reap
// rows another process may still deliver.
func (s *Store) ListenerReapOutbox(ctx context.Context, age time.Duration) (int64, error) {
	q := s.q
	tag, err := q.Exec(ctx, `DELETE FROM operator_listener_outbox WHERE created_at < now() - make_interval(secs => $1)`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("reap listener outbox: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ListenerReapRegistrations deletes registrations created (or last renewed)
// more than age ago (docs/PROTOCOL.md §15.8: 30 days), on the database's clock, and
// returns how many it deleted.
func (s *Store) ListenerReapRegistrations(ctx context.Context, age time.Duration) (int64, error) {
	q := s.q
	tag, err := q.Exec(ctx, `DELETE FROM operator_listener_pubkeys WHERE created_at < now() - make_interval(secs => $1)`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("reap listener registrations: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ListenerForget deletes every registration and every outbox row of
// listener, in one statement, and returns how many of each it deleted
// (docs/PROTOCOL.md §15.10, maintenance operator-listeners --forget). Other listeners' rows are
// untouched. For a dry run, call it inside a transaction and roll back.
func (s *Store) ListenerForget(ctx context.Context, listener string) (registrations, queued int64, err error) {
	q := s.q
	l, err := pubkeyBytes(listener)
	if err != nil {
		return 0, 0, fmt.Errorf("forget listener: %w", err)
	}
	err = q.QueryRow(ctx, `WITH r AS (
			DELETE FROM operator_listener_pubkeys WHERE listener_pubkey = $1 RETURNING 1
		), o AS (
			DELETE FROM operator_listener_outbox WHERE listener_pubkey = $1 RETURNING 1
		)
		SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM o)`, l).Scan(&registrations, &queued)
	if err != nil {
		return 0, 0, fmt.Errorf("forget listener: %w", err)
	}
	return registrations, queued, nil
}

// listenerKeys decodes a listener and its targets, the targets distinct.
func listenerKeys(listener string, targets []string) ([]byte, [][]byte, error) {
	l, err := pubkeyBytes(listener)
	if err != nil {
		return nil, nil, fmt.Errorf("listener: %w", err)
	}
	ts, err := pubkeyList(targets)
	if err != nil {
		return nil, nil, fmt.Errorf("target: %w", err)
	}
	return l, ts, nil
}

// pubkeyList decodes hex pubkeys (either case), dropping duplicates and
// keeping the first-seen order.
func pubkeyList(keys []string) ([][]byte, error) {
	out := make([][]byte, 0, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		raw, err := pubkeyBytes(k)
		if err != nil {
			return nil, err
		}
		if !seen[string(raw)] {
			seen[string(raw)] = true
			out = append(out, raw)
		}
	}
	return out, nil
}

var errBadPubkey = errors.New("pubkey must be 64 hex characters")

// pubkeyBytes decodes a 64-character hex pubkey of either case.
func pubkeyBytes(s string) ([]byte, error) {
	if !event.IsHexAnyCase64(s) {
		return nil, errBadPubkey
	}
	return hex.DecodeString(s)
}

// ListenerOutboxCounts counts the outbox's pending and sending rows, for
// buzz_operator_listener_outbox_rows. It only reads.
func (s *Store) ListenerOutboxCounts(ctx context.Context) (pending, sending int64, err error) {
	if err := s.q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'sending')
		FROM operator_listener_outbox`).Scan(&pending, &sending); err != nil {
		return 0, 0, fmt.Errorf("count listener outbox rows: %w", err)
	}
	return pending, sending, nil
}
