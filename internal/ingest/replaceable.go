package ingest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/store"
)

// replaceableFamily is NIP-16 replaceable (3, 10000–19999) and NIP-33
// addressable (30000–39999) kinds: one live version per key, replaced under
// the key's advisory lock. Kinds 0 and 10100 are the profile family, which
// writes the same way.
type replaceableFamily struct{ byTag }

// kindRules are the step 18 checks of single replaceable kinds.
var kindRules = map[int]func(ev *event.Event) error{
	event.KindEmojiList: validateEmoji,
	event.KindEmojiSet:  validateEmoji,
	event.KindEngram:    validateEngram,
}

func (replaceableFamily) authorize(_ context.Context, _ *Pipeline, req *Request, rt route) (change, error) {
	c, err := newReplace(req, rt.channel) // 18: d length
	if err != nil {
		return nil, err
	}
	if rule := kindRules[req.Event.Kind]; rule != nil { // 18
		if err := rule(&req.Event); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// replaceChange writes a new version of a replaceable or addressable key.
type replaceChange struct {
	channel string
	dTag    *string // addressable kinds
	key     store.ReplaceableKey
}

// newReplace builds the change of a replaceable or addressable event,
// checking the d tag's length (step 18).
func newReplace(req *Request, channel string) (replaceChange, error) {
	ev := &req.Event
	c := replaceChange{channel: channel, key: store.ReplaceableKey{CommunityID: req.Tenant.CommunityID, Kind: ev.Kind, Pubkey: ev.PubKey}}
	if event.IsAddressable(ev.Kind) {
		d := ev.Tags.First("d").Value()
		if n := len(d); n > MaxDTagBytes {
			return replaceChange{}, invalid("d tag too long (%d bytes, max %d)", n, MaxDTagBytes)
		}
		c.dTag, c.key.DTag = &d, &d
	} else {
		c.key.Channel = channel
	}
	return c, nil
}

func (c replaceChange) apply(ctx context.Context, w writer) (outcome, error) {
	if err := c.replace(ctx, w); err != nil {
		return outcome{}, err
	}
	return outcome{channel: c.channel}, nil
}

// replace takes the key's advisory lock, compares with the live head
// (errDuplicate when the event loses) and supersedes it, then inserts the
// event.
func (c replaceChange) replace(ctx context.Context, w writer) error {
	s := w.store()
	if err := s.AdvisoryXactLock(ctx, lockKey(c.key)); err != nil {
		return fmt.Errorf("lock key: %w", err)
	}
	head, found, err := s.ReplaceableHead(ctx, c.key)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	if found && !newer(w.ev(), head) {
		return errDuplicate
	}
	if err := s.ReplaceableSupersede(ctx, c.key); err != nil {
		return fmt.Errorf("supersede head %s: %w", head.ID, err)
	}
	return w.insertEvent(ctx, c.channel, c.dTag)
}

// newer reports whether ev wins against the live head: a newer created_at,
// or the same created_at with a lower id.
func newer(ev *event.Event, head store.Head) bool {
	if ev.CreatedAt != head.CreatedAt {
		return ev.CreatedAt > head.CreatedAt
	}
	return ev.ID < head.ID
}

// lockKey is the advisory lock key of docs/PROTOCOL.md §6.5: FNV-1a-64 over the
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
	if pub, err := hex.DecodeString(k.Pubkey); err == nil {
		mix(pub)
	} else {
		mix([]byte(k.Pubkey)) // not hex (the pipeline checked it is): still one key per pubkey
	}
	if k.DTag != nil {
		mix([]byte(*k.DTag))
	} else if k.Channel != "" {
		if u, err := uuid.Parse(k.Channel); err == nil {
			mix(u[:])
		}
	}
	return int64(h)
}

// validateEmoji checks the emoji tags of kinds 10030 and 30030.
func validateEmoji(ev *event.Event) error {
	for _, t := range ev.Tags {
		if len(t) > 0 && t[0] == "emoji" && (len(t) < 2 || t[1] == "") {
			return invalid("emoji tag must include a shortcode")
		}
	}
	return nil
}

// validateEngram checks the NIP-AE envelope of kind 30174.
func validateEngram(ev *event.Event) error {
	if n := ev.Tags.Count("d"); n != 1 {
		return invalid("agent-engram event must have exactly one `d` tag (got %d)", n)
	}
	if n := ev.Tags.Count("p"); n != 1 {
		return invalid("agent-engram event must have exactly one `p` tag (got %d)", n)
	}
	if !event.IsHex64(ev.Tags.First("d").Value()) {
		return invalid("agent-engram `d` tag must be 64 lowercase hex chars")
	}
	if !event.IsHex64(ev.Tags.First("p").Value()) {
		return invalid("agent-engram `p` tag must be 64 lowercase hex chars (pubkey)")
	}
	if ev.Content == "" {
		return invalid("agent-engram content must not be empty (NIP-44 ciphertext)")
	}
	if len(ev.Content)%4 != 0 {
		return invalid("agent-engram content is not valid base64 (length)")
	}
	raw, err := base64.StdEncoding.DecodeString(ev.Content)
	if err != nil {
		return invalid("agent-engram content is not valid base64")
	}
	if len(raw) < 99 {
		return invalid("agent-engram content too short for NIP-44 v2")
	}
	if raw[0] != 0x02 {
		return invalid("agent-engram content is not NIP-44 v2 (expected 0x02 version prefix)")
	}
	return nil
}
