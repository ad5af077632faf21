package store

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/buzz-relay/buzz/internal/pg"
)

// EventInsertBatch is EventInsert for every element of ps as one
// statement: the event rows, their event_mentions rows, their audit
// intents and their operator-listener outbox rows are written by one
// multi-row INSERT per table, so they commit together, with one commit
// record, or none of them does. The audit intents of one community are
// one audit_intent_groups row, in the order of ps (docs/ARCHITECTURE.md
// "Audit chain"); their dedupe keys are not used: an intent rides only
// with an event this statement created. results[i] is ps[i]'s: Inserted is false
// for an event already stored or repeated earlier in ps, and then nothing
// of that element is written, as alone.
//
// On error nothing of ps is stored, unless the error is the lost answer to
// a commit that did happen: the caller retries each element alone, where
// ON CONFLICT answers one that did commit as not inserted.
func (s *Store) EventInsertBatch(ctx context.Context, ps []EventInsertParams) ([]EventInsertResult, error) {
	b, err := newBatch(ps)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.Query(ctx, eventBatchSQL, b.args.values()...)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", pg.MapError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var r batchRow
		if err := rows.Scan(&r.community, &r.id, &r.listeners, &r.refused); err != nil {
			return nil, fmt.Errorf("insert batch: %w", err)
		}
		if err := b.row(r); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil { // the statement's own failures and its commit's (deferred triggers)
		return nil, fmt.Errorf("insert batch: %w", pg.MapError(err))
	}
	return b.results(), nil
}

// batch is one eventBatchSQL statement: its arguments, and the results of
// its elements as its rows come back.
type batch struct {
	ps    []EventInsertParams
	args  batchArgs
	first map[string]int // element key → the index of its first copy in ps
	out   []EventInsertResult
}

// batchRow is one row of eventBatchSQL's result.
type batchRow struct {
	community string
	id        []byte
	listeners int64
	refused   bool
}

// batchKey identifies an element of a batch: its community and event id.
func batchKey(communityID, eventID string) string { return communityID + eventID }

// newBatch builds ps's statement: a copy of an earlier element is not sent
// and gets that element's result.
func newBatch(ps []EventInsertParams) (*batch, error) {
	b := &batch{ps: ps, first: make(map[string]int, len(ps)), out: make([]EventInsertResult, len(ps))}
	for i, p := range ps {
		if p.PosterCheck && p.Channel == "" {
			return nil, fmt.Errorf("batch element %d: a poster check needs a channel", i)
		}
		key := batchKey(p.CommunityID, p.Event.ID)
		if _, dup := b.first[key]; dup {
			continue // a copy of an earlier element: not inserted
		}
		b.first[key] = i
		if err := b.args.add(p); err != nil {
			return nil, fmt.Errorf("batch element %d: %w", i, err)
		}
	}
	return b, nil
}

// row records one result row: the element it names was inserted, or
// refused by its poster check.
func (b *batch) row(r batchRow) error {
	i, ok := b.first[batchKey(r.community, hex.EncodeToString(r.id))]
	if !ok {
		return fmt.Errorf("insert batch: returned an event it was not given")
	}
	b.out[i] = EventInsertResult{Inserted: !r.refused, ListenerRows: r.listeners, Refused: r.refused}
	return nil
}

// results are the elements' results once every row is recorded: an element
// without a row was already stored, and a copy of a refused element is
// refused too, not a duplicate.
func (b *batch) results() []EventInsertResult {
	for i, p := range b.ps {
		if j := b.first[batchKey(p.CommunityID, p.Event.ID)]; j != i && b.out[j].Refused {
			b.out[i].Refused = true
		}
	}
	return b.out
}

// batchArgs are the column arrays of eventBatchSQL: one element per event
// for the event columns and the audit intent, one per row for mentions and
// listener targets.
//
// The uuid columns are sent as pgtype.UUID: pgx has no binary encoding of a
// string as uuid, and for a []string it searched for one, failed and fell
// back to text on every batch (docs/PERFORMANCE.md "Batch uuid columns in
// binary").
type batchArgs struct {
	community, channel                 []pgtype.UUID
	dTag                               []*string
	id, pubkey, sig                    [][]byte
	createdAt                          []int64
	expires                            []*int64
	kind                               []int32
	tags, content                      []string
	auditKey, auditAction, auditObject []*string
	auditActor                         [][]byte
	auditDetail                        []*string
	mCommunity                         []pgtype.UUID
	mID                                [][]byte
	mPubkey                            []string
	lCommunity                         []pgtype.UUID
	lID, lTarget                       [][]byte
	posterCheck                        []bool
}

func (b *batchArgs) add(p EventInsertParams) error {
	r, err := decodeInsert(p)
	if err != nil {
		return err
	}
	ev := p.Event
	cid, err := uuidArg(p.CommunityID)
	if err != nil {
		return fmt.Errorf("community id: %w", err)
	}
	channel, err := uuidArg(p.Channel)
	if err != nil {
		return fmt.Errorf("channel id: %w", err)
	}
	b.community = append(b.community, cid)
	b.id, b.pubkey, b.sig = append(b.id, r.id), append(b.pubkey, r.pub), append(b.sig, r.sig)
	b.createdAt, b.kind = append(b.createdAt, ev.CreatedAt), append(b.kind, int32(ev.Kind))
	b.expires = append(b.expires, r.expires)
	b.tags, b.content = append(b.tags, string(r.tags)), append(b.content, ev.Content)
	b.channel, b.dTag = append(b.channel, channel), append(b.dTag, p.DTag)
	b.auditKey, b.auditAction = append(b.auditKey, r.auditKey), append(b.auditAction, r.auditAction)
	b.auditActor, b.auditObject, b.auditDetail = append(b.auditActor, r.auditActor), append(b.auditObject, r.auditObject), append(b.auditDetail, r.auditDetail)
	b.posterCheck = append(b.posterCheck, p.PosterCheck)
	for _, m := range r.mentions {
		b.mCommunity, b.mID, b.mPubkey = append(b.mCommunity, cid), append(b.mID, r.id), append(b.mPubkey, m)
	}
	for _, tg := range r.targets {
		b.lCommunity, b.lID, b.lTarget = append(b.lCommunity, cid), append(b.lID, r.id), append(b.lTarget, tg)
	}
	return nil
}

// uuidArg is s as a uuid parameter, NULL when s is empty.
func uuidArg(s string) (pgtype.UUID, error) {
	if s == "" {
		return pgtype.UUID{}, nil
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return pgtype.UUID{}, err
	}
	return pgtype.UUID{Bytes: u, Valid: true}, nil
}

func (b *batchArgs) values() []any {
	return []any{b.community, b.id, b.pubkey, b.createdAt, b.kind, b.tags, b.content, b.sig, b.channel, b.dTag,
		b.auditKey, b.auditAction, b.auditActor, b.auditObject, b.auditDetail,
		b.mCommunity, b.mID, b.mPubkey, b.lCommunity, b.lID, b.lTarget, b.expires, b.posterCheck}
}

// eventBatchSQL is EventInsert's statement for many events: each CTE
// writes its table's rows for the events ins created (an event already
// stored creates nothing, as alone), and the result is one row per created
// event with its listener rows, then one per event its poster check
// refused. Every part sees the statement's one snapshot, so the check and
// the write agree.
var eventBatchSQL = `
		WITH v AS (
			SELECT * FROM unnest($1::uuid[], $2::bytea[], $3::bytea[], $4::bigint[], $5::int[], $6::text[], $7::text[],
				$8::bytea[], $9::uuid[], $10::text[], $11::text[], $12::text[], $13::bytea[], $14::text[], $15::text[], $22::bigint[],
				$23::bool[])
				WITH ORDINALITY
				AS v(community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag,
				     audit_key, audit_action, audit_actor, audit_object, audit_detail, expires_at, poster_check, ord)
		), refused AS (
			SELECT community_id, id FROM v
			WHERE v.poster_check AND NOT ` + posterRule("v.community_id", "v.channel_id", "v.pubkey") + `
		), ins AS (
			INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, channel_id, d_tag, expires_at)
			SELECT community_id, id, pubkey, to_timestamp(created_at), kind, tags::jsonb, content, sig, channel_id, d_tag,
				to_timestamp(expires_at) FROM v
			WHERE NOT EXISTS (SELECT 1 FROM refused r WHERE r.community_id = v.community_id AND r.id = v.id)
			ON CONFLICT DO NOTHING
			RETURNING community_id, id
		), m AS (
			INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, channel_id, event_kind)
			SELECT v.community_id, mm.pubkey, v.id, to_timestamp(v.created_at), v.channel_id, v.kind
			FROM unnest($16::uuid[], $17::bytea[], $18::text[]) AS mm(community_id, id, pubkey)
			JOIN ins USING (community_id, id) JOIN v USING (community_id, id)
			ON CONFLICT DO NOTHING
		), a AS (
			INSERT INTO audit_intent_groups (community_id, n, actions, actors, object_ids, details)
			SELECT v.community_id, count(*), array_agg(v.audit_action ORDER BY v.ord), array_agg(v.audit_actor ORDER BY v.ord),
				array_agg(v.audit_object ORDER BY v.ord), array_agg(v.audit_detail::jsonb ORDER BY v.ord)
			FROM v JOIN ins USING (community_id, id)
			WHERE v.audit_key IS NOT NULL
			GROUP BY v.community_id
		), l AS (
			INSERT INTO operator_listener_outbox
			  (listener_pubkey, target_pubkey, community_id, event_id, event_kind, event_created_at)
			SELECT r.listener_pubkey, r.target_pubkey, v.community_id, v.id, v.kind, to_timestamp(v.created_at)
			FROM unnest($19::uuid[], $20::bytea[], $21::bytea[]) AS lt(community_id, id, target)
			JOIN ins USING (community_id, id) JOIN v USING (community_id, id)
			JOIN operator_listener_pubkeys r ON r.target_pubkey = lt.target
			ON CONFLICT DO NOTHING
			RETURNING community_id, event_id
		)
		SELECT ins.community_id::text, ins.id,
			(SELECT count(*) FROM l WHERE l.community_id = ins.community_id AND l.event_id = ins.id), false
		FROM ins
		UNION ALL
		SELECT community_id::text, id, 0, true FROM refused`
