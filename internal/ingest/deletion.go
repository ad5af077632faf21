package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// deletionFamily is kind 5, the NIP-09 deletion of docs/PROTOCOL.md §6.4: one e
// target (soft-deleted with its reaction and thread state) or one a
// coordinate (every version of the address up to the deletion).
type deletionFamily struct{}

// route is step 10: a deletion takes its e target's channel.
func (deletionFamily) route(ctx context.Context, p *Pipeline, req *Request) (route, error) {
	id := firstHex64(req.Event.Tags, "e")
	if id == "" {
		return route{}, nil
	}
	ref, err := p.st.EventLookup(ctx, req.Tenant.CommunityID, id)
	if errors.Is(err, pg.ErrNotFound) {
		return route{}, nil
	}
	if err != nil {
		return route{}, fmt.Errorf("look up deletion target %s: %w", id, err)
	}
	return route{channel: ref.Channel, target: &ref}, nil
}

// authorize is step 17. Step 13 left exactly one e or a tag, so the target
// step 10 looked up is the one of that tag.
func (deletionFamily) authorize(_ context.Context, _ *Pipeline, req *Request, rt route) (change, error) {
	ev := &req.Event
	if t := ev.Tags.First("e"); t != nil {
		if !event.IsHexAnyCase64(t.Value()) {
			return nil, invalid("malformed deletion target id")
		}
		if rt.target == nil {
			return nil, invalid("target event not found")
		}
		if rt.target.PubKey != ev.PubKey {
			return nil, invalid("must be event author")
		}
		return deletionChange{channel: rt.channel, target: rt.target}, nil
	}
	parts := strings.SplitN(ev.Tags.First("a").Value(), ":", 3)
	if len(parts) < 3 {
		return nil, invalid("invalid a-tag format")
	}
	kind, err := strconv.Atoi(parts[0])
	if err != nil {
		return nil, invalid("invalid a-tag format")
	}
	if strings.ToLower(parts[1]) != ev.PubKey {
		return nil, invalid("must be event author")
	}
	return deletionChange{channel: rt.channel, coord: &coordinate{kind: kind, pubkey: ev.PubKey, d: parts[2]}}, nil
}

type coordinate struct {
	kind   int
	pubkey string
	d      string
}

// deletionChange deletes one target or one coordinate; exactly one is set.
type deletionChange struct {
	channel string
	target  *store.EventRef
	coord   *coordinate
}

func (c deletionChange) apply(ctx context.Context, w writer) (outcome, error) {
	if err := w.insertEvent(ctx, c.channel, nil); err != nil {
		return outcome{}, err
	}
	if c.target != nil {
		if err := w.softDelete(ctx, *c.target); err != nil {
			return outcome{}, err
		}
	}
	if k := c.coord; k != nil && event.IsAddressable(k.kind) {
		deleted, err := w.store().AddressableDelete(ctx, w.cid(), k.kind, k.pubkey, k.d, w.ev().CreatedAt)
		if err != nil {
			return outcome{}, fmt.Errorf("delete address %d:%s:%s: %w", k.kind, k.pubkey, k.d, err)
		}
		for _, t := range deleted {
			if err := w.p.deletedIntent(ctx, w.q, w.req, t); err != nil {
				return outcome{}, fmt.Errorf("deleted intent %s: %w", t.ID, err)
			}
		}
	}
	return outcome{channel: c.channel}, nil
}

// softDelete soft-deletes target on behalf of the event (kinds 5 and 9005)
// and, when that changed it, records it and updates the reaction and thread
// state the target held.
func (w writer) softDelete(ctx context.Context, t store.EventRef) error {
	s := w.store()
	changed, err := s.EventSoftDelete(ctx, w.cid(), t.ID, t.CreatedAt)
	if err != nil {
		return fmt.Errorf("soft-delete %s: %w", t.ID, err)
	}
	if !changed {
		return nil
	}
	if err := w.p.deletedIntent(ctx, w.q, w.req, t); err != nil {
		return fmt.Errorf("deleted intent %s: %w", t.ID, err)
	}
	if t.Kind == event.KindReaction {
		if err := s.ReactionRemove(ctx, w.cid(), t.ID); err != nil {
			return fmt.Errorf("remove reaction %s: %w", t.ID, err)
		}
	}
	if err := s.ThreadReplyRemoved(ctx, w.cid(), t.ID); err != nil {
		return fmt.Errorf("thread counters of %s: %w", t.ID, err)
	}
	return nil
}
