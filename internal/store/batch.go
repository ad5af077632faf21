package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/pg"
)

// EventInsertBatch runs EventInsert for every element of ps in one round
// trip and one transaction: the statements are sent as one pipeline that
// PostgreSQL runs as an implicit transaction, so they commit together, with
// one commit record, or none of them does. results[i] is ps[i]'s. An event
// already stored, or repeated in ps, reports Inserted false, as alone.
//
// On error nothing can be assumed about any element: the caller retries
// each alone, where ON CONFLICT turns one that did commit (a lost answer
// to COMMIT) into a duplicate. q must not be inside a transaction that
// outlives the call when the caller needs that guarantee; on a pool it is
// the batch's own.
func (s *Store) EventInsertBatch(ctx context.Context, q pg.Querier, ps []EventInsertParams) ([]EventInsertResult, error) {
	sts := make([]eventStatement, len(ps))
	b := &pgx.Batch{}
	for i, p := range ps {
		st, err := insertStatement(p)
		if err != nil {
			return nil, fmt.Errorf("batch element %d: %w", i, err)
		}
		sts[i] = st
		b.Queue(st.sql, st.args...)
	}
	br := q.SendBatch(ctx, b)
	out := make([]EventInsertResult, len(ps))
	for i, st := range sts {
		res, err := st.scan(br.QueryRow())
		if err != nil {
			br.Close()
			return nil, fmt.Errorf("batch element %d: %w", i, err)
		}
		out[i] = res
	}
	if err := br.Close(); err != nil { // the implicit COMMIT, and its deferred triggers
		return nil, fmt.Errorf("commit batch: %w", pg.MapError(err))
	}
	return out, nil
}
