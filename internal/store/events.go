package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// EventInsertParams are the arguments of EventInsert.
type EventInsertParams struct {
	CommunityID string
	Event       *event.Event
	// Channel is the resolved channel UUID, "" for a global event.
	Channel string
	// DTag is the d value of an addressable event (nil for other kinds).
	DTag *string
	// Audit, when set, is the event's event_created intent (docs/PROTOCOL.md §13.5),
	// written into audit_outbox by the same statement, so it commits with
	// the event row on the one-statement hot path too. Nothing is written
	// when the event was already stored.
	Audit *OutboxIntent
	// ListenerTargets are the event's operator-listener targets (docs/PROTOCOL.md §15.4):
	// MentionTargets of a mention kind (IsMentionKind), nil for every other
	// kind; the caller decides, the store does not look at the kind. When
	// set, the same statement writes one operator_listener_outbox row per
	// registration of a target, only when it created the event row; when
	// empty, the statement is exactly the one without the feature.
	ListenerTargets []string
	// PosterCheck makes the write itself decide steps 14 and 15 of
	// docs/PROTOCOL.md §1.2 for Channel: the event is written only if the
	// channel exists, is neither deleted nor archived, and is open or has
	// the author as an active member, judged in the statement's own
	// snapshot. Otherwise nothing is written and Refused is set; the caller
	// finds out which rule refused it. Requires Channel.
	PosterCheck bool
}

// EventInsertResult is what EventInsertCounted reports.
type EventInsertResult struct {
	// Inserted is false when the exact event was already stored.
	Inserted bool
	// ListenerRows counts the operator_listener_outbox rows written.
	ListenerRows int64
	// Refused is set when PosterCheck found that the author may not post
	// in the channel; nothing was written.
	Refused bool
}

// OutboxIntent is an audit_outbox row written with an event. The audit
// package builds it; the store only carries it into the statement.
type OutboxIntent struct {
	DedupeKey string
	Action    string
	Actor     []byte // nil = NULL
	ObjectID  *string
	Detail    []byte // JSON
}

// EventInsert stores an event, its event_mentions rows, when p.Audit is set
// its audit intent and, when p.ListenerTargets is set, its operator-listener
// outbox rows in one statement, inside the caller's transaction (or on its
// own, autocommitted, when q is the pool), so they all commit or fail
// together. inserted is false when the exact event is already stored (ON
// CONFLICT DO NOTHING); then no mention, intent or outbox row is written.
func (s *Store) EventInsert(ctx context.Context, p EventInsertParams) (inserted bool, err error) {
	res, err := s.EventInsertCounted(ctx, p)
	return res.Inserted, err
}

// EventInsertCounted is EventInsert that also reports how many
// operator-listener outbox rows the statement wrote.
func (s *Store) EventInsertCounted(ctx context.Context, p EventInsertParams) (EventInsertResult, error) {
	q := s.q
	st, err := insertStatement(p)
	if err != nil {
		return EventInsertResult{}, err
	}
	return st.scan(q.QueryRow(ctx, st.sql, st.args...))
}

// eventStatement is one event's insert statement, ready to run alone or
// queued in a batch.
type eventStatement struct {
	sql       string
	args      []any
	listeners bool // the statement also counts operator-listener rows
	check     bool // the statement also reports a refusal by the poster check
}

// insertStatement builds the statement of EventInsert for p.
func insertStatement(p EventInsertParams) (eventStatement, error) {
	r, err := decodeInsert(p)
	if err != nil {
		return eventStatement{}, err
	}
	ev := p.Event
	args := []any{p.CommunityID, r.id, r.pub, ev.CreatedAt, ev.Kind, r.tags, ev.Content, r.sig, nullUUID(p.Channel), p.DTag, r.mentions,
		r.auditKey, r.auditAction, r.auditActor, r.auditObject, r.auditDetail}
	expires := r.expires != nil
	if expires {
		args = append(args, *r.expires)
	}
	listeners := len(r.targets) > 0
	if listeners {
		args = append(args, r.targets)
	}
	if p.PosterCheck && p.Channel == "" {
		return eventStatement{}, fmt.Errorf("insert event: a poster check needs a channel")
	}
	return eventStatement{sql: eventInsertStatements[b2i(expires)][b2i(listeners)][b2i(p.PosterCheck)], args: args,
		listeners: listeners, check: p.PosterCheck}, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// insertRow is an EventInsertParams decoded into column values: what the
// one-event statement and the batch (EventInsertBatch) both write.
type insertRow struct {
	id, pub, sig []byte
	tags         []byte // JSON
	mentions     []string
	targets      [][]byte
	// expires is the NIP-40 expiration in Unix seconds, nil without one
	// (the events.expires_at column, docs/PROTOCOL.md §6.6).
	expires *int64
	// The audit intent's columns; all nil without an intent.
	auditKey, auditAction, auditObject, auditDetail *string
	auditActor                                      []byte
}

func decodeInsert(p EventInsertParams) (insertRow, error) {
	ev := p.Event
	var (
		r   insertRow
		err error
	)
	if r.id, r.pub, r.sig, err = decodeIDs(ev); err != nil {
		return insertRow{}, err
	}
	if len(p.ListenerTargets) > 0 {
		if r.targets, err = pubkeyList(p.ListenerTargets); err != nil {
			return insertRow{}, fmt.Errorf("insert event: listener target: %w", err)
		}
	}
	// As the id's commitment writes them: no reflection, and a nil tag is
	// [], never a null that DecodeStoredTags would refuse.
	r.tags = ev.Tags.JSON()
	r.mentions = Mentions(ev)
	if at, present, ok := ev.Expiration(); present && ok {
		r.expires = &at
	}
	if a := p.Audit; a != nil {
		d := string(a.Detail)
		r.auditKey, r.auditAction, r.auditActor, r.auditObject, r.auditDetail = &a.DedupeKey, &a.Action, a.Actor, a.ObjectID, &d
	}
	return r, nil
}

// scan reads the statement's one result row.
func (st eventStatement) scan(row pgx.Row) (EventInsertResult, error) {
	var (
		n   int
		res EventInsertResult
		err error
	)
	dest := []any{&n}
	if st.listeners {
		dest = append(dest, &res.ListenerRows)
	}
	if st.check {
		dest = append(dest, &res.Refused)
	}
	err = row.Scan(dest...)
	if err != nil {
		return EventInsertResult{}, fmt.Errorf("insert event: %w", pg.MapError(err))
	}
	res.Inserted = n == 1
	return res, nil
}

// eventInsertStatements are EventInsert's statements, by [expiration][listener
// targets][poster check]: an event without any of them runs exactly the
// statement from before these features.
var eventInsertStatements = func() (out [2][2][2]string) {
	for e := range 2 {
		for l := range 2 {
			for c := range 2 {
				out[e][l][c] = eventInsertSQL(e == 1, l == 1, c == 1)
			}
		}
	}
	return out
}()

// eventInsertSQL builds one of eventInsertStatements. Parameters: $1–$10
// the event's columns, $11 its mentions, $12–$16 its audit intent, then
// $17 its NIP-40 expiration in Unix seconds when it has one (the row's
// expires_at, docs/PROTOCOL.md §6.6), then its listener targets: one
// operator-listener outbox row per registration of a target, only when the
// event row was created (docs/PROTOCOL.md §15.4).
func eventInsertSQL(expires, listeners, check bool) string {
	cols := "community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag"
	vals := "$1, $2, $3, to_timestamp($4), $5, $6, $7, $8, $9, $10"
	targets := "$17"
	if expires {
		cols += ", expires_at"
		vals += ", to_timestamp($17::bigint)"
		targets = "$18"
	}
	sql := `
		WITH ins AS (
			INSERT INTO events (` + cols + `)
			VALUES (` + vals + `)
			ON CONFLICT DO NOTHING`
	if check {
		// The poster check (EventInsertParams.PosterCheck): the row is
		// written only if the rule holds, and the result says when it did not.
		sql = `
		WITH ok AS (
			SELECT ` + posterRule("$1::uuid", "$9::uuid", "$3::bytea") + ` AS allowed
		), ins AS (
			INSERT INTO events (` + cols + `)
			SELECT ` + vals + ` FROM ok WHERE ok.allowed
			ON CONFLICT DO NOTHING`
	}
	sql += eventInsertSides
	result := "(SELECT count(*) FROM ins)"
	if listeners {
		sql += `
		), l AS (
			INSERT INTO operator_listener_outbox
			  (listener_pubkey, target_pubkey, community_id, event_id, event_kind, event_created_at)
			SELECT r.listener_pubkey, r.target_pubkey, $1, $2, $5, to_timestamp($4)
			FROM operator_listener_pubkeys r
			WHERE r.target_pubkey = ANY(` + targets + `::bytea[]) AND EXISTS (SELECT 1 FROM ins)
			ON CONFLICT DO NOTHING
			RETURNING 1`
		result += ", (SELECT count(*) FROM l)"
	}
	if check {
		result += ", (SELECT NOT allowed FROM ok)"
	}
	if !listeners && !check {
		result = "count(*) FROM ins" // the statement from before these features
	}
	return sql + `
		)
		SELECT ` + result
}

// eventInsertSides are the CTEs after the event row: its event_mentions
// rows and its audit intent.
const eventInsertSides = `
			RETURNING 1
		), m AS (
			INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, channel_id, event_kind)
			SELECT $1, p, $2, to_timestamp($4), $9, $5 FROM unnest($11::text[]) AS p
			WHERE EXISTS (SELECT 1 FROM ins)
			ON CONFLICT DO NOTHING
		), a AS (
			INSERT INTO audit_outbox (community_id, dedupe_key, action, actor_pubkey, object_id, detail)
			SELECT $1, $12, $13, $14, $15, $16::jsonb
			WHERE $12::text IS NOT NULL AND EXISTS (SELECT 1 FROM ins)
			ON CONFLICT (community_id, dedupe_key) DO NOTHING`

// posterRule is steps 14 and 15 of docs/PROTOCOL.md §1.2 as an SQL
// condition on a community, a channel and a pubkey (SQL expressions): the
// rule ChannelState.CanPost and Archived state for the pipeline's own
// check. The channel is live and not archived, and open or the pubkey is
// an active member.
func posterRule(community, channel, pubkey string) string {
	return `EXISTS (
				SELECT 1 FROM channels c
				WHERE c.community_id = ` + community + ` AND c.id = ` + channel + `
				  AND c.deleted_at IS NULL AND c.archived_at IS NULL
				  AND (c.visibility = 'open' OR EXISTS (
					SELECT 1 FROM channel_members m
					WHERE m.community_id = c.community_id AND m.channel_id = c.id
					  AND m.pubkey = ` + pubkey + ` AND m.removed_at IS NULL)))`
}

// Mentions returns the distinct p-tag values that are exactly 64 lowercase
// hex characters, in first-seen order: the event_mentions rows of an event.
func Mentions(ev *event.Event) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range ev.Tags {
		if len(t) > 1 && t[0] == "p" && event.IsHex64(t[1]) && !seen[t[1]] {
			seen[t[1]] = true
			out = append(out, t[1])
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// EventRef is what the pipeline needs to know about a stored event.
type EventRef struct {
	ID        string
	PubKey    string
	Kind      int
	CreatedAt int64
	Channel   string
	Deleted   bool
	Tags      event.Tags
}

// EventLookup finds an event of the community by id, deleted or not.
// pg.ErrNotFound when there is none, or when its NIP-40 expiration has
// passed: a write that names an expired event (a reply, a reaction, an
// edit, a deletion) is judged as after the purge (docs/PROTOCOL.md §6.6).
func (s *Store) EventLookup(ctx context.Context, communityID, id string) (EventRef, error) {
	q := s.q
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 32 {
		return EventRef{}, fmt.Errorf("lookup event: %w", pg.ErrNotFound)
	}
	var (
		ref     EventRef
		pub     []byte
		ts      time.Time
		channel *string
		tags    []byte
	)
	err = q.QueryRow(ctx, `SELECT pubkey, kind, created_at, channel_id::text, deleted_at IS NOT NULL, tags
		FROM events e WHERE e.community_id = $1 AND e.id = $2 AND `+unexpired+`
		ORDER BY e.deleted_at NULLS FIRST LIMIT 1`, communityID, raw).
		Scan(&pub, &ref.Kind, &ts, &channel, &ref.Deleted, &tags)
	if err != nil {
		return EventRef{}, fmt.Errorf("lookup event: %w", pg.MapError(err))
	}
	ref.ID = id
	ref.PubKey = hex.EncodeToString(pub)
	ref.CreatedAt = ts.Unix()
	if channel != nil {
		ref.Channel = *channel
	}
	if err := json.Unmarshal(tags, &ref.Tags); err != nil {
		return EventRef{}, fmt.Errorf("lookup event: decode tags: %w", err)
	}
	return ref, nil
}

// EventSoftDelete marks one event deleted when it is still live. changed is
// false when it was already deleted.
func (s *Store) EventSoftDelete(ctx context.Context, communityID, id string, createdAt int64) (changed bool, err error) {
	q := s.q
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, fmt.Errorf("soft delete event: event id: %w", err)
	}
	tag, err := q.Exec(ctx, `UPDATE events SET deleted_at = now()
		WHERE community_id = $1 AND created_at = to_timestamp($2) AND id = $3 AND deleted_at IS NULL`, communityID, createdAt, raw)
	if err != nil {
		return false, fmt.Errorf("soft delete event: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// AddressableDelete soft-deletes the live versions of an addressable
// coordinate created at or before upTo (a NIP-09 "a" deletion) and returns
// the rows it deleted.
func (s *Store) AddressableDelete(ctx context.Context, communityID string, kind int, pubkey, d string, upTo int64) ([]EventRef, error) {
	q := s.q
	pub, err := hex.DecodeString(pubkey)
	if err != nil {
		return nil, fmt.Errorf("addressable delete: bad pubkey")
	}
	rows, err := q.Query(ctx, `UPDATE events SET deleted_at = now()
		WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4
		  AND created_at <= to_timestamp($5) AND deleted_at IS NULL
		RETURNING id, channel_id::text`, communityID, kind, pub, d, upTo)
	if err != nil {
		return nil, fmt.Errorf("addressable delete: %w", err)
	}
	defer rows.Close()
	var out []EventRef
	for rows.Next() {
		var (
			id      []byte
			channel *string
		)
		if err := rows.Scan(&id, &channel); err != nil {
			return nil, fmt.Errorf("addressable delete: %w", err)
		}
		ref := EventRef{ID: hex.EncodeToString(id), PubKey: pubkey, Kind: kind}
		if channel != nil {
			ref.Channel = *channel
		}
		out = append(out, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("addressable delete: %w", err)
	}
	return out, nil
}

// Head is the live version of a replaceable or addressable key.
type Head struct {
	ID        string
	CreatedAt int64
}

// ReplaceableKey identifies a replaceable (Channel) or addressable (DTag) key.
type ReplaceableKey struct {
	CommunityID string
	Kind        int
	Pubkey      string
	Channel     string  // replaceable kinds; "" = NULL
	DTag        *string // addressable kinds
}

// ReplaceableHead returns the live head of a key (newest created_at, lowest
// id), or ok false when the key has no live version. Call it under the key's
// advisory lock.
func (s *Store) ReplaceableHead(ctx context.Context, k ReplaceableKey) (h Head, ok bool, err error) {
	q := s.q
	pub, err := hex.DecodeString(k.Pubkey)
	if err != nil {
		return Head{}, false, fmt.Errorf("replaceable head: pubkey: %w", err)
	}
	var (
		id []byte
		ts time.Time
	)
	if k.DTag != nil {
		err = q.QueryRow(ctx, `SELECT id, created_at FROM events
			WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4 AND deleted_at IS NULL
			ORDER BY created_at DESC, id ASC LIMIT 1`, k.CommunityID, k.Kind, pub, *k.DTag).Scan(&id, &ts)
	} else {
		err = q.QueryRow(ctx, `SELECT id, created_at FROM events
			WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND channel_id IS NOT DISTINCT FROM $4 AND deleted_at IS NULL
			ORDER BY created_at DESC, id ASC LIMIT 1`, k.CommunityID, k.Kind, pub, nullUUID(k.Channel)).Scan(&id, &ts)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, fmt.Errorf("replaceable head: %w", err)
	}
	return Head{ID: hex.EncodeToString(id), CreatedAt: ts.Unix()}, true, nil
}

// ReplaceableSupersede soft-deletes every live version of a key.
func (s *Store) ReplaceableSupersede(ctx context.Context, k ReplaceableKey) error {
	q := s.q
	pub, err := hex.DecodeString(k.Pubkey)
	if err != nil {
		return fmt.Errorf("supersede replaceable: pubkey: %w", err)
	}
	if k.DTag != nil {
		_, err = q.Exec(ctx, `UPDATE events SET deleted_at = now()
			WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4 AND deleted_at IS NULL`,
			k.CommunityID, k.Kind, pub, *k.DTag)
	} else {
		_, err = q.Exec(ctx, `UPDATE events SET deleted_at = now()
			WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND channel_id IS NOT DISTINCT FROM $4 AND deleted_at IS NULL`,
			k.CommunityID, k.Kind, pub, nullUUID(k.Channel))
	}
	if err != nil {
		return fmt.Errorf("supersede replaceable: %w", err)
	}
	return nil
}

// AdvisoryXactLock takes a transaction-scoped advisory lock on key.
func (s *Store) AdvisoryXactLock(ctx context.Context, key int64) error {
	q := s.q
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		return fmt.Errorf("advisory lock: %w", err)
	}
	return nil
}

// UserSetNIP05 records the nip05 handle of a pubkey (kind 0), or clears it.
func (s *Store) UserSetNIP05(ctx context.Context, communityID, pubkey string, handle *string) error {
	q := s.q
	pub, err := hex.DecodeString(pubkey)
	if err != nil {
		return fmt.Errorf("set nip05: pubkey: %w", err)
	}
	const upsert = `INSERT INTO users (community_id, pubkey, nip05_handle) VALUES ($1, $2, $3)
		ON CONFLICT (community_id, pubkey) DO UPDATE SET nip05_handle = EXCLUDED.nip05_handle, updated_at = now()`
	// Inside a transaction the upsert runs under a savepoint: a unique
	// violation (another pubkey holds the handle) must not abort the
	// event's transaction.
	if tx, ok := q.(pgx.Tx); ok {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("set nip05: savepoint: %w", err)
		}
		_, err = sp.Exec(ctx, upsert, communityID, pub, handle)
		if errors.Is(pg.MapError(err), pg.ErrDuplicate) {
			// Another pubkey holds the handle; the profile is stored, the handle is not claimed.
			return sp.Rollback(ctx)
		}
		if err != nil {
			_ = sp.Rollback(ctx)
			return fmt.Errorf("set nip05: %w", err)
		}
		return sp.Commit(ctx)
	}
	_, err = q.Exec(ctx, upsert, communityID, pub, handle)
	if errors.Is(pg.MapError(err), pg.ErrDuplicate) {
		return nil // another pubkey holds the handle
	}
	if err != nil {
		return fmt.Errorf("set nip05: %w", err)
	}
	return nil
}

// UserSetAddPolicy records a pubkey's channel_add_policy (kind 10100).
func (s *Store) UserSetAddPolicy(ctx context.Context, communityID, pubkey, policy string) error {
	q := s.q
	pub, err := hex.DecodeString(pubkey)
	if err != nil {
		return fmt.Errorf("set channel add policy: pubkey: %w", err)
	}
	_, err = q.Exec(ctx, `INSERT INTO users (community_id, pubkey, channel_add_policy) VALUES ($1, $2, $3::channel_add_policy)
		ON CONFLICT (community_id, pubkey) DO UPDATE SET channel_add_policy = EXCLUDED.channel_add_policy, updated_at = now()`,
		communityID, pub, policy)
	if err != nil {
		return fmt.Errorf("set channel add policy: %w", err)
	}
	return nil
}

func decodeIDs(ev *event.Event) (id, pub, sig []byte, err error) {
	if id, err = hex.DecodeString(ev.ID); err != nil || len(id) != 32 {
		return nil, nil, nil, errors.New("insert event: bad id")
	}
	if pub, err = hex.DecodeString(ev.PubKey); err != nil || len(pub) != 32 {
		return nil, nil, nil, errors.New("insert event: bad pubkey")
	}
	if sig, err = hex.DecodeString(ev.Sig); err != nil || len(sig) != 64 {
		return nil, nil, nil, errors.New("insert event: bad sig")
	}
	return id, pub, sig, nil
}

func nullUUID(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
