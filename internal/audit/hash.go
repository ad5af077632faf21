package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// HashVersion is the encoding every new entry carries (docs/PROTOCOL.md §13.2).
const HashVersion = 2

// v2Prefix is the domain separator of version 2: "buzz:audit:v2" and a NUL.
const v2Prefix = "buzz:audit:v2\x00"

// Entry is one chain entry as hashed: exactly the fields of an audit_log row.
type Entry struct {
	// CommunityID is the community UUID, hyphenated or not.
	CommunityID string
	Seq         int64
	// CreatedAt is the instant of the action; Hash truncates it to
	// microseconds and writes it in UTC, so any time zone gives the same hash.
	CreatedAt time.Time
	Action    Action
	// Actor is the 32-byte actor pubkey; nil leaves its record out.
	Actor []byte
	// ObjectID is nil when absent; a pointer to "" is present and empty.
	ObjectID *string
	// Detail is the JSON value (as read from JSONB); nil means null.
	Detail []byte
	// PrevHash is nil for seq 1 (no genesis substitute).
	PrevHash []byte
	// Version selects the encoding; only 2 is known.
	Version int
}

// Hash returns SHA-256 of the entry's preimage for its Version: an
// UnsupportedHashVersion for any version but 2, a SerializationError when
// the community id or the detail cannot be encoded.
func Hash(e Entry) ([32]byte, error) {
	switch e.Version {
	case 2:
		pre, err := PreimageV2(e)
		if err != nil {
			return [32]byte{}, err
		}
		return sha256.Sum256(pre), nil
	default:
		return [32]byte{}, &UnsupportedHashVersion{Version: e.Version}
	}
}

// PreimageV2 is the version 2 preimage of docs/PROTOCOL.md §13.2: the prefix, then
// TLV records in ascending tag order, each a tag byte, an unsigned 64-bit
// big-endian length and the value.
func PreimageV2(e Entry) ([]byte, error) {
	cid, err := uuid.Parse(e.CommunityID)
	if err != nil {
		return nil, &SerializationError{What: "community id is not a UUID"}
	}
	detail, err := Canonical(e.Detail)
	if err != nil {
		return nil, err
	}
	ts := FormatTime(e.CreatedAt)
	b := make([]byte, 0, 14+9*8+16+8+len(ts)+len(e.Action)+32+len(detail)+32+64)
	b = append(b, v2Prefix...)
	b = tlv(b, 1, cid[:])
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], uint64(e.Seq))
	b = tlv(b, 2, seq[:])
	b = tlv(b, 3, []byte(ts))
	b = tlv(b, 4, []byte(e.Action))
	if e.Actor != nil {
		b = tlv(b, 5, e.Actor)
	}
	if e.ObjectID != nil {
		b = tlv(b, 6, []byte(*e.ObjectID))
	}
	b = tlv(b, 7, detail)
	if e.PrevHash != nil {
		b = tlv(b, 8, e.PrevHash)
	}
	return b, nil
}

func tlv(b []byte, tag byte, v []byte) []byte {
	b = append(b, tag)
	b = binary.BigEndian.AppendUint64(b, uint64(len(v)))
	return append(b, v...)
}

// FormatTime writes an instant as docs/PROTOCOL.md §13.2 wants: truncated (never
// rounded) to microseconds, in UTC, "YYYY-MM-DDTHH:MM:SS", then no fraction
// (0 µs), 3 digits (whole milliseconds) or 6 digits, then "+00:00".
func FormatTime(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	b := make([]byte, 0, 32)
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	us := t.Nanosecond() / 1000
	switch {
	case us == 0:
	case us%1000 == 0:
		b = append(b, '.')
		b = appendPadded(b, us/1000, 3)
	default:
		b = append(b, '.')
		b = appendPadded(b, us, 6)
	}
	return string(append(b, "+00:00"...))
}

func appendPadded(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// HexHash is the lowercase hex of a 32-byte hash.
func HexHash(h []byte) string { return fmt.Sprintf("%x", h) }
