package ingest

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// commit is step 20: one write transaction holding everything that must be
// consistent with the event. duplicate is true when nothing was stored
// because the event (or a newer version of its key) already is.
func (p *Pipeline) commit(ctx context.Context, req Request, pl *plan) (duplicate bool, follow []*event.Event, err error) {
	ev := &req.Event
	cid := req.Tenant.CommunityID
	s := p.cfg.Store
	if pl.simple(ev.Kind) && p.cfg.AfterInsertFunc == nil {
		// The hot path: the event row and its mentions are one statement,
		// so it commits atomically on its own in one round trip.
		// The audit intent rides in the same statement (spec 30 §5.1).
		inserted, err := s.EventInsert(ctx, p.cfg.Pool, store.EventInsertParams{CommunityID: cid, Event: ev, Channel: pl.channel, DTag: pl.dTag,
			Audit: p.eventIntent(req, ev, pl.channel)})
		return !inserted, nil, err
	}
	base := *pl
	err = p.inTx(ctx, func(tx pgx.Tx) error {
		duplicate, follow = false, nil
		*pl = base // a retried transaction starts from the plan authorize made
		if pl.group != nil {
			before, err := p.groupBefore(ctx, tx, req, pl)
			if err != nil {
				return err
			}
			if err := p.applyGroup(ctx, tx, req, pl); err != nil {
				return err
			}
			if err := p.groupIntents(ctx, tx, req, pl, before); err != nil {
				return err
			}
		}
		if key, ok := replaceableKey(cid, ev, pl); ok {
			if err := s.AdvisoryXactLock(ctx, tx, lockKey(key)); err != nil {
				return err
			}
			head, found, err := s.ReplaceableHead(ctx, tx, key)
			if err != nil {
				return err
			}
			if found && !newer(ev, head) {
				duplicate = true
				return nil
			}
			if err := s.ReplaceableSupersede(ctx, tx, key); err != nil {
				return err
			}
		}
		if pl.reactTarget != nil {
			fresh, err := s.ReactionAdd(ctx, tx, store.ReactionAddParams{
				CommunityID: cid, Target: pl.reactTarget.ID, TargetCreatedAt: pl.reactTarget.CreatedAt,
				Pubkey: ev.PubKey, Emoji: pl.emoji, ReactionEventID: ev.ID,
			})
			if err != nil {
				return err
			}
			if !fresh {
				return conflict(wire.Reason(wire.Duplicate, "reaction already exists"))
			}
		}
		inserted, err := s.EventInsert(ctx, tx, store.EventInsertParams{CommunityID: cid, Event: ev, Channel: pl.channel, DTag: pl.dTag,
			Audit: p.eventIntent(req, ev, pl.channel)})
		if err != nil {
			return err
		}
		if !inserted {
			duplicate = true
			return errRollback
		}
		if hook := p.cfg.AfterInsertFunc; hook != nil {
			if err := hook(ctx, ev); err != nil {
				return fmt.Errorf("after insert: %w", err)
			}
		}
		if err := p.sideEffects(ctx, tx, req, pl); err != nil {
			return err
		}
		if follow, err = p.followUps(ctx, tx, req, pl); err != nil {
			return err
		}
		return p.followUpIntents(ctx, tx, req, pl, follow)
	})
	if err == errRollback {
		return true, nil, nil
	}
	return duplicate, follow, err
}

// errRollback ends a transaction that must leave no trace without being an error.
var errRollback = fmt.Errorf("rollback")

// sideEffects writes the rows that commit with the event: deletions, the
// reaction state of deleted reactions, profile facts.
func (p *Pipeline) sideEffects(ctx context.Context, tx pgx.Tx, req Request, pl *plan) error {
	ev := &req.Event
	cid := req.Tenant.CommunityID
	s := p.cfg.Store
	if t := pl.delTarget; t != nil {
		changed, err := s.EventSoftDelete(ctx, tx, cid, t.ID, t.CreatedAt)
		if err != nil {
			return err
		}
		if changed {
			if err := p.deletedIntent(ctx, tx, req, *t); err != nil {
				return err
			}
		}
		if changed && t.Kind == event.KindReaction {
			if err := s.ReactionRemove(ctx, tx, cid, t.ID); err != nil {
				return err
			}
		}
		if changed {
			if err := s.ThreadReplyRemoved(ctx, tx, cid, t.ID); err != nil {
				return err
			}
		}
	}
	if pl.thread != nil {
		if err := s.ThreadReplyAdd(ctx, tx, *pl.thread); err != nil {
			return err
		}
	}
	if c := pl.delCoord; c != nil && event.IsAddressable(c.kind) {
		deleted, err := s.AddressableDelete(ctx, tx, cid, c.kind, c.pubkey, c.d, ev.CreatedAt)
		if err != nil {
			return err
		}
		for _, t := range deleted {
			if err := p.deletedIntent(ctx, tx, req, t); err != nil {
				return err
			}
		}
	}
	if pl.setNIP05 {
		if err := s.UserSetNIP05(ctx, tx, cid, ev.PubKey, pl.nip05); err != nil {
			return err
		}
	}
	if pl.addPolicy != "" {
		if err := s.UserSetAddPolicy(ctx, tx, cid, ev.PubKey, pl.addPolicy); err != nil {
			return err
		}
	}
	return nil
}

// replaceableKey returns the NIP-16/33 key of a replaceable or addressable event.
func replaceableKey(cid string, ev *event.Event, pl *plan) (store.ReplaceableKey, bool) {
	switch {
	case event.IsReplaceable(ev.Kind):
		return store.ReplaceableKey{CommunityID: cid, Kind: ev.Kind, Pubkey: ev.PubKey, Channel: pl.channel}, true
	case event.IsAddressable(ev.Kind):
		return store.ReplaceableKey{CommunityID: cid, Kind: ev.Kind, Pubkey: ev.PubKey, DTag: pl.dTag}, true
	}
	return store.ReplaceableKey{}, false
}

// newer reports whether ev wins against the live head: a newer created_at,
// or the same created_at with a lower id.
func newer(ev *event.Event, head store.Head) bool {
	if ev.CreatedAt != head.CreatedAt {
		return ev.CreatedAt > head.CreatedAt
	}
	return ev.ID < head.ID
}

// lockKey is the advisory lock key of spec 10 §6.5: FNV-1a-64 over the
// community UUID bytes, the kind as int32 little-endian, the pubkey bytes and
// the channel UUID bytes (replaceable) or the d value (addressable),
// reinterpreted as a signed 64-bit integer.
func lockKey(k store.ReplaceableKey) int64 {
	const (
		offset = 0xcbf29ce484222325
		prime  = 0x100000001b3
	)
	h := uint64(offset)
	mix := func(b []byte) {
		for _, c := range b {
			h ^= uint64(c)
			h *= prime
		}
	}
	if u, err := uuid.Parse(k.CommunityID); err == nil {
		mix(u[:])
	}
	var kind [4]byte
	binary.LittleEndian.PutUint32(kind[:], uint32(int32(k.Kind)))
	mix(kind[:])
	pub, _ := hex.DecodeString(k.Pubkey)
	mix(pub)
	if k.DTag != nil {
		mix([]byte(*k.DTag))
	} else if k.Channel != "" {
		if u, err := uuid.Parse(k.Channel); err == nil {
			mix(u[:])
		}
	}
	return int64(h)
}
