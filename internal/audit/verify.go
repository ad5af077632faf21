package audit

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// VerifyPage is how many rows Verify reads per query (keyset on seq).
const VerifyPage = 10000

// VerifyParams are the arguments of Verify.
type VerifyParams struct {
	CommunityID string
	// From and To bound the range, inclusive; From below 1 counts as 1.
	From, To int64
	// ProgressFunc, when set, is called after each page with the number of
	// entries verified so far.
	ProgressFunc func(done int64)
}

// Verify checks the chain segment From..To of one community (docs/PROTOCOL.md §13.6)
// and returns (true, nil) when every row passes, (false, nil) when the range
// holds no row, and otherwise the first failure: *ChainViolation,
// *UnsupportedHashVersion, *UnknownAction, *HashMismatch,
// *SerializationError or *DatabaseError. It streams: memory does not grow
// with the length of the chain. It opens no transaction.
func Verify(ctx context.Context, q pg.Querier, p VerifyParams) (bool, error) {
	from := max(p.From, 1)
	var (
		prev     []byte
		prevSeq  int64
		done     int64
		next     = from
		expected = from
	)
	for next <= p.To {
		rows, err := q.Query(ctx, `SELECT seq, hash, prev_hash, action, actor_pubkey, object_id, detail, created_at, hash_version
			FROM audit_log WHERE community_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq LIMIT $4`,
			p.CommunityID, next, p.To, VerifyPage)
		if err != nil {
			return false, dbError(err)
		}
		n := 0
		for rows.Next() {
			var (
				seq     int64
				hash    []byte
				prevH   []byte
				action  string
				actor   []byte
				object  *string
				detail  []byte
				created time.Time
				version int16
			)
			if err := rows.Scan(&seq, &hash, &prevH, &action, &actor, &object, &detail, &created, &version); err != nil {
				rows.Close()
				return false, dbError(err)
			}
			n++
			// 1. Linkage.
			if seq != expected || (seq == 1) != (prevH == nil) || (done > 0 && !bytes.Equal(prevH, prev)) {
				rows.Close()
				return false, &ChainViolation{Seq: seq}
			}
			// 2. Version, 3. action, 4. hash.
			if version != HashVersion {
				rows.Close()
				return false, &UnsupportedHashVersion{Version: int(version)}
			}
			if !Action(action).Known() {
				rows.Close()
				return false, &UnknownAction{Seq: seq}
			}
			h, err := Hash(Entry{CommunityID: p.CommunityID, Seq: seq, CreatedAt: created, Action: Action(action),
				Actor: actor, ObjectID: object, Detail: detail, PrevHash: prevH, Version: int(version)})
			if err != nil {
				rows.Close()
				return false, err
			}
			if !bytes.Equal(h[:], hash) {
				rows.Close()
				return false, &HashMismatch{Seq: seq}
			}
			prev, prevSeq, expected = hash, seq, seq+1
			done++
		}
		if err := rows.Err(); err != nil {
			return false, dbError(err)
		}
		if p.ProgressFunc != nil && n > 0 {
			p.ProgressFunc(done)
		}
		if n < VerifyPage {
			break
		}
		next = prevSeq + 1
	}
	return done > 0, nil
}

// Head is a chain's newest entry.
type Head struct {
	Seq       int64
	Hash      []byte
	CreatedAt time.Time
}

// HeadGet returns the community's chain head; found is false for an empty chain.
func HeadGet(ctx context.Context, q pg.Querier, communityID string) (h Head, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT seq, hash, created_at FROM audit_log WHERE community_id = $1 ORDER BY seq DESC LIMIT 1`,
		communityID).Scan(&h.Seq, &h.Hash, &h.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Head{}, false, nil
	}
	if err != nil {
		return Head{}, false, dbError(err)
	}
	return h, true, nil
}

// HashAt returns the stored hash at seq; found is false when there is no such row.
func HashAt(ctx context.Context, q pg.Querier, communityID string, seq int64) (hash []byte, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT hash FROM audit_log WHERE community_id = $1 AND seq = $2`, communityID, seq).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbError(err)
	}
	return hash, true, nil
}

// PendingCount returns how many intents of the community are not yet
// chained, in both queues.
func PendingCount(ctx context.Context, q pg.Querier, communityID string) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_outbox WHERE community_id = $1)
		+ (SELECT COALESCE(sum(n), 0) FROM audit_intent_groups WHERE community_id = $1)`, communityID).Scan(&n); err != nil {
		return 0, dbError(err)
	}
	return n, nil
}
