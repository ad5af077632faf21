package soak

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkReport is what the end-of-run checks found. Lost counts acknowledged
// writes the database does not hold: events, audit entries, mention
// deliveries and read-state versions.
type checkReport struct {
	Acked             int            `json:"acked"`
	AckedDuplicate    int            `json:"acked_duplicate"`
	EventsMissing     int            `json:"events_missing"`
	EventsDuplicated  int            `json:"events_duplicated"`
	AuditMissing      int            `json:"audit_entries_missing"`
	AuditDuplicated   int            `json:"audit_entries_duplicated"`
	AuditOutboxLeft   int            `json:"audit_outbox_left"`
	AuditVerify       map[string]int `json:"audit_verify_exit"`
	Mentions          int            `json:"mentions"`
	MentionsDelivered int            `json:"mentions_delivered"`
	MentionsPending   int            `json:"mentions_pending"`
	MentionsLost      int            `json:"mentions_lost"`
	ReadStateCoords   int            `json:"read_state_coordinates"`
	ReadStateMulti    int            `json:"read_state_coordinates_with_several_rows"`
	ReadStateLost     int            `json:"read_state_lost"`
	Lost              int            `json:"lost"`
	// FirstLost names a few of the lost writes, for the investigation.
	FirstLost []string `json:"first_lost,omitempty"`
}

func (r *checkReport) lose(what string) {
	r.Lost++
	if len(r.FirstLost) < 10 {
		r.FirstLost = append(r.FirstLost, what)
	}
}

// ok reports whether every check passed.
func (r *checkReport) ok() bool {
	if r.Lost != 0 || r.EventsDuplicated != 0 || r.AuditDuplicated != 0 || r.ReadStateMulti != 0 {
		return false
	}
	for _, code := range r.AuditVerify {
		if code != 0 {
			return false
		}
	}
	return true
}

// check compares the database with the ledger.
func (s *soakRun) check(ctx context.Context) (*checkReport, error) {
	pool, err := pgxpool.New(ctx, s.db.URL())
	if err != nil {
		return nil, fmt.Errorf("connect to the soak's database: %w", err)
	}
	defer pool.Close()
	return checkLedger(ctx, pool, s.load.ledger.all(), s.comms, s.endpoint, s.cfg.settle, func(host string) (int, error) {
		_, code, err := runRelayCommand(ctx, s.cfg.relayBin, s.relays[0].env, "audit", "verify", "--community", host)
		return code, err
	})
}

// checkLedger is check with its parts passed in, so a test can run it
// again on a database it changed.
func checkLedger(ctx context.Context, pool *pgxpool.Pool, acks []ack, comms []community, ep *endpoint,
	settle time.Duration, verify func(host string) (int, error)) (*checkReport, error) {
	r := &checkReport{Acked: len(acks), AuditVerify: map[string]int{}}
	deadline := time.Now().Add(settle)
	// The chainer and the delivery worker finish what was committed.
	if err := waitEmpty(ctx, pool, `SELECT (SELECT count(*) FROM audit_outbox) + (SELECT count(*) FROM audit_intent_groups)`, deadline, &r.AuditOutboxLeft); err != nil {
		return nil, err
	}
	var outboxLeft int
	if err := waitEmpty(ctx, pool, `SELECT count(*) FROM operator_listener_outbox`, deadline, &outboxLeft); err != nil {
		return nil, err
	}

	idOf := map[string]string{} // host → community id
	for _, c := range comms {
		idOf[c.host] = c.id
	}
	stored := map[string][]string{} // community id → ids of stored acknowledged events
	for _, a := range acks {
		if a.Duplicate {
			r.AckedDuplicate++
			continue
		}
		stored[idOf[a.Host]] = append(stored[idOf[a.Host]], a.ID)
	}

	// Events: every acknowledged one stored exactly once (read-state
	// versions are judged by their coordinate below: a newer version
	// replaces the row).
	rows := map[string]int{}
	entries := map[string]int{}
	for cid, ids := range stored {
		if err := countByID(ctx, pool, rows, `SELECT encode(id, 'hex'), count(*) FROM events
			WHERE community_id = $1 AND id = ANY($2::bytea[]) AND deleted_at IS NULL GROUP BY id`, cid, ids, true); err != nil {
			return nil, err
		}
		if err := countByID(ctx, pool, entries, `SELECT object_id, count(*) FROM audit_log
			WHERE community_id = $1 AND action = 'event_created' AND object_id = ANY($2::text[]) GROUP BY object_id`, cid, ids, false); err != nil {
			return nil, err
		}
	}

	// Mentions not delivered must still have their outbox row.
	pending := map[[2]string]bool{}
	var target, eventID string
	prow, err := pool.Query(ctx, `SELECT encode(target_pubkey, 'hex'), encode(event_id, 'hex') FROM operator_listener_outbox`)
	if err != nil {
		return nil, fmt.Errorf("read the listener outbox: %w", err)
	}
	if _, err := pgx.ForEachRow(prow, []any{&target, &eventID}, func() error {
		pending[[2]string{target, eventID}] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the listener outbox: %w", err)
	}

	coordMax := map[[3]string]int64{} // (community, author, d) → newest acknowledged created_at
	for _, a := range acks {
		if a.Duplicate {
			continue
		}
		if a.D == "" {
			switch n := rows[a.ID]; {
			case n == 0:
				r.EventsMissing++
				r.lose("event " + a.ID + " in " + a.Host)
			case n > 1:
				r.EventsDuplicated++
			}
		} else {
			k := [3]string{idOf[a.Host], a.Author, a.D}
			coordMax[k] = max(coordMax[k], a.CreatedAt)
		}
		switch n := entries[a.ID]; {
		case n == 0:
			r.AuditMissing++
			r.lose("audit entry of " + a.ID + " in " + a.Host)
		case n > 1:
			r.AuditDuplicated++
		}
		for _, t := range a.Mentions {
			r.Mentions++
			switch {
			case ep.got(t, a.ID):
				r.MentionsDelivered++
			case pending[[2]string{t, a.ID}]:
				r.MentionsPending++
			default:
				r.MentionsLost++
				r.lose("mention of " + t + " by " + a.ID)
			}
		}
	}

	// Read state: one live row per coordinate, never older than the newest
	// acknowledged version.
	live := map[[3]string]int64{}
	var k [3]string
	var n int
	var newest int64
	lrows, err := pool.Query(ctx, `SELECT community_id::text, encode(pubkey, 'hex'), d_tag, count(*),
			max(extract(epoch FROM created_at))::bigint
		FROM events WHERE kind = 30078 AND d_tag LIKE 'read-state:%' AND deleted_at IS NULL
		GROUP BY 1, 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("read the read-state rows: %w", err)
	}
	if _, err := pgx.ForEachRow(lrows, []any{&k[0], &k[1], &k[2], &n, &newest}, func() error {
		if n > 1 {
			r.ReadStateMulti++
		}
		live[k] = newest
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the read-state rows: %w", err)
	}
	r.ReadStateCoords = len(coordMax)
	for k, want := range coordMax {
		if got, ok := live[k]; !ok || got < want {
			r.ReadStateLost++
			r.lose(fmt.Sprintf("read state %s of %s: newest acknowledged %d, stored %d", k[2], k[1], want, got))
		}
	}

	for _, c := range comms {
		code, err := verify(c.host)
		if err != nil {
			return nil, err
		}
		r.AuditVerify[c.host] = code
	}
	return r, nil
}

// waitEmpty polls count until it is 0 or deadline passes, leaving the last
// count in left.
func waitEmpty(ctx context.Context, pool *pgxpool.Pool, count string, deadline time.Time, left *int) error {
	err := poll(ctx, 250*time.Millisecond, deadline, func() (bool, error) {
		if err := pool.QueryRow(ctx, count).Scan(left); err != nil {
			return false, fmt.Errorf("%s: %w", count, err)
		}
		return *left == 0, nil
	})
	if errors.Is(err, errTimedOut) {
		return nil // what is left is reported
	}
	return err
}

// countByID runs query (community id, ids) in chunks and adds each
// returned (id, count) to into. byteIDs passes the ids as bytea.
func countByID(ctx context.Context, pool *pgxpool.Pool, into map[string]int, query, cid string, ids []string, byteIDs bool) error {
	const chunk = 5000
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		var arg any = part
		if byteIDs {
			raw := make([][]byte, len(part))
			for i, id := range part {
				b, err := hex.DecodeString(id)
				if err != nil {
					return fmt.Errorf("ledger id %q: %w", id, err)
				}
				raw[i] = b
			}
			arg = raw
		}
		rows, err := pool.Query(ctx, query, cid, arg)
		if err != nil {
			return fmt.Errorf("count stored rows: %w", err)
		}
		var id string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
			into[id] += n
			return nil
		}); err != nil {
			return fmt.Errorf("count stored rows: %w", err)
		}
	}
	return nil
}
