package audit

import (
	"context"

	"github.com/buzz-relay/buzz/internal/pg"
)

// Purge removes a community's chain and pending intents, inside the
// caller's transaction: the only delete the append-only guard lets through
// (SET LOCAL buzz.audit_purge). Community deletion calls it before deleting
// the community row; the chain is gone afterwards, so keep checkpoints.
func Purge(ctx context.Context, tx pg.Querier, communityID string) error {
	if _, err := tx.Exec(ctx, `SET LOCAL buzz.audit_purge = 'on'`); err != nil {
		return dbError(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM audit_log WHERE community_id = $1`, communityID); err != nil {
		return dbError(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM audit_outbox WHERE community_id = $1`, communityID); err != nil {
		return dbError(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM audit_intent_groups WHERE community_id = $1`, communityID); err != nil {
		return dbError(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL buzz.audit_purge = 'off'`); err != nil {
		return dbError(err)
	}
	return nil
}
