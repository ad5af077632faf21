package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// KindCheckpoint is the relay-only kind of an audit checkpoint (docs/PROTOCOL.md §13.7).
const KindCheckpoint = 48002

// Checkpoint is a chain head as a relay-signed checkpoint names it.
type Checkpoint struct {
	Host    string
	Seq     int64
	Hash    string // 64 lowercase hex
	TakenAt time.Time
	Signer  string // pubkey hex
}

// NewCheckpoint builds and signs the kind 48002 event of a chain head:
// exactly the tags host, seq and hash, in that order, and empty content.
func NewCheckpoint(key []byte, host string, h Head, now time.Time) (event.Event, error) {
	ev := event.Event{Kind: KindCheckpoint, CreatedAt: now.Unix(), Content: "",
		Tags: event.Tags{{"host", host}, {"seq", strconv.FormatInt(h.Seq, 10)}, {"hash", hex.EncodeToString(h.Hash)}}}
	if err := ev.Sign(key); err != nil {
		return event.Event{}, fmt.Errorf("sign checkpoint: %w", err)
	}
	return ev, nil
}

// Checkpoint parse errors, with the exact texts of docs/PROTOCOL.md §13.10.
var (
	ErrCheckpointInvalid   = errors.New("checkpoint: not a valid event")
	ErrCheckpointSignature = errors.New("checkpoint: invalid signature")
	ErrCheckpointKind      = errors.New("checkpoint: wrong kind")
	ErrCheckpointTags      = errors.New("checkpoint: malformed tags")
)

// ParseCheckpoint checks one NIP-01 event as a checkpoint: valid id and
// signature, kind 48002, exactly the three well-formed tags. It does not
// decide whether the signer is trusted.
func ParseCheckpoint(raw []byte) (Checkpoint, error) {
	ev, err := event.Parse(raw)
	if err != nil || !event.IsHex64(ev.ID) || !event.IsHex64(ev.PubKey) || !event.IsHex128(ev.Sig) {
		return Checkpoint{}, ErrCheckpointInvalid
	}
	if _, ok := ev.CheckID(); !ok {
		return Checkpoint{}, ErrCheckpointSignature
	}
	if !ev.VerifySignature() {
		return Checkpoint{}, ErrCheckpointSignature
	}
	if ev.Kind != KindCheckpoint {
		return Checkpoint{}, ErrCheckpointKind
	}
	t := ev.Tags
	if len(t) != 3 || len(t[0]) != 2 || len(t[1]) != 2 || len(t[2]) != 2 ||
		t[0][0] != "host" || t[1][0] != "seq" || t[2][0] != "hash" || t[0][1] == "" || !event.IsHex64(t[2][1]) {
		return Checkpoint{}, ErrCheckpointTags
	}
	seq, err := strconv.ParseInt(t[1][1], 10, 64)
	if err != nil || seq < 1 || strconv.FormatInt(seq, 10) != t[1][1] {
		return Checkpoint{}, ErrCheckpointTags
	}
	return Checkpoint{Host: t[0][1], Seq: seq, Hash: t[2][1], TakenAt: time.Unix(ev.CreatedAt, 0).UTC(), Signer: ev.PubKey}, nil
}
