package event

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Tag is one tag of an event: a name followed by values.
type Tag []string

// Tags is the ordered tag list of an event.
type Tags []Tag

// Event is a Nostr event as signed by its author. Hex fields are lowercase.
type Event struct {
	ID        string `json:"id"`
	PubKey    string `json:"pubkey"`
	CreatedAt int64  `json:"created_at"`
	Kind      int    `json:"kind"`
	Tags      Tags   `json:"tags"`
	Content   string `json:"content"`
	Sig       string `json:"sig"`
}

// Name returns the tag's name, or "" for an empty tag.
func (t Tag) Name() string {
	if len(t) == 0 {
		return ""
	}
	return t[0]
}

// Value returns the tag's first value, or "" when it has none.
func (t Tag) Value() string {
	if len(t) < 2 {
		return ""
	}
	return t[1]
}

// First returns the first tag named name, or nil.
func (ts Tags) First(name string) Tag {
	for _, t := range ts {
		if len(t) > 0 && t[0] == name {
			return t
		}
	}
	return nil
}

// Count returns how many tags are named name.
func (ts Tags) Count(name string) int {
	n := 0
	for _, t := range ts {
		if len(t) > 0 && t[0] == name {
			n++
		}
	}
	return n
}

// Values returns the first value of every tag named name, in order.
func (ts Tags) Values(name string) []string {
	var out []string
	for _, t := range ts {
		if len(t) > 1 && t[0] == name {
			out = append(out, t[1])
		}
	}
	return out
}

// HasValue reports whether some tag named name has value as its first value.
func (ts Tags) HasValue(name, value string) bool {
	for _, t := range ts {
		if len(t) > 1 && t[0] == name && t[1] == value {
			return true
		}
	}
	return false
}

// Serialize returns the NIP-01 commitment array [0,pubkey,created_at,kind,tags,content]
// whose SHA-256 is the event id.
func (e *Event) Serialize() []byte {
	b := make([]byte, 0, 96+len(e.Content)+64*len(e.Tags))
	b = append(b, `[0,"`...)
	b = append(b, e.PubKey...)
	b = append(b, `",`...)
	b = strconv.AppendInt(b, e.CreatedAt, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Kind), 10)
	b = append(b, ',')
	b = AppendTags(b, e.Tags)
	b = append(b, ',')
	b = AppendString(b, e.Content)
	b = append(b, ']')
	return b
}

// ComputeID returns the lowercase hex id the event's fields commit to.
func (e *Event) ComputeID() string {
	sum := sha256.Sum256(e.Serialize())
	return hex.EncodeToString(sum[:])
}

// CheckID reports whether e.ID equals the computed id, and returns the computed one.
func (e *Event) CheckID() (computed string, ok bool) {
	computed = e.ComputeID()
	return computed, computed == e.ID
}

// VerifySignature reports whether e.Sig is a valid BIP-340 signature of e.ID
// by e.PubKey. It does not recompute the id; call CheckID first.
func (e *Event) VerifySignature() bool {
	var pk, id [32]byte
	var sig [64]byte
	if !decodeHexInto(pk[:], e.PubKey) || !decodeHexInto(sig[:], e.Sig) || !decodeHexInto(id[:], e.ID) {
		return false
	}
	return verifySchnorr(&pk, &id, &sig)
}

// Sign fills PubKey, ID and Sig using the 32-byte secret key sk.
func (e *Event) Sign(sk []byte) error {
	if len(sk) != 32 {
		return errors.New("sign event: secret key must be 32 bytes")
	}
	key := [32]byte(sk)
	pk, ok := schnorrPubKey(&key)
	if !ok {
		return errors.New("sign event: invalid secret key")
	}
	e.PubKey = hex.EncodeToString(pk[:])
	if e.Tags == nil {
		e.Tags = Tags{}
	}
	id := sha256.Sum256(e.Serialize())
	e.ID = hex.EncodeToString(id[:])
	sig, ok := signSchnorr(&key, &id, nil)
	if !ok {
		return errors.New("sign event: invalid secret key")
	}
	e.Sig = hex.EncodeToString(sig[:])
	return nil
}

// MarshalJSON encodes the event with the NIP-01 field names, without HTML escaping.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil), nil
}

// AppendJSON appends the event's JSON object to b.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, e.ID...)
	b = append(b, `","pubkey":"`...)
	b = append(b, e.PubKey...)
	b = append(b, `","created_at":`...)
	b = strconv.AppendInt(b, e.CreatedAt, 10)
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, int64(e.Kind), 10)
	b = append(b, `,"tags":`...)
	b = AppendTags(b, e.Tags)
	b = append(b, `,"content":`...)
	b = AppendString(b, e.Content)
	b = append(b, `,"sig":"`...)
	b = append(b, e.Sig...)
	b = append(b, `"}`...)
	return b
}

// AppendTags appends tags as the JSON array of arrays that AppendJSON and
// Serialize write.
func AppendTags(b []byte, tags Tags) []byte {
	b = append(b, '[')
	for i, t := range tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, v := range t {
			if j > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string using the NIP-01 escaping rules:
// quote, backslash and the named control characters get their short escape,
// other control characters \u00XX, everything else verbatim. Invalid UTF-8
// is replaced by U+FFFD so the output is always valid JSON.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// IsHex64 reports whether s is exactly 64 lowercase hex characters.
func IsHex64(s string) bool { return isLowerHex(s, 64) }

// IsHex128 reports whether s is exactly 128 lowercase hex characters.
func IsHex128(s string) bool { return isLowerHex(s, 128) }

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// IsHexAnyCase64 reports whether s is 64 hex characters of either case.
func IsHexAnyCase64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// JSONSize returns len(e.AppendJSON(nil)) without building the JSON: the
// event's serialized size, tags included. It allocates nothing.
func (e *Event) JSONSize() int {
	n := len(`{"id":"","pubkey":"","created_at":,"kind":,"tags":,"content":,"sig":""}`)
	n += len(e.ID) + len(e.PubKey) + len(e.Sig) + intSize(e.CreatedAt) + intSize(int64(e.Kind))
	return n + tagsSize(e.Tags) + stringSize(e.Content)
}

// JSON returns the tags as AppendTags writes them, in one allocation of
// their exact size.
func (ts Tags) JSON() []byte {
	return AppendTags(make([]byte, 0, tagsSize(ts)), ts)
}

// tagsSize is the length of AppendTags(nil, tags).
func tagsSize(tags Tags) int {
	n := 2 // the brackets
	for i, t := range tags {
		if i > 0 {
			n++
		}
		n += 2 + max(len(t)-1, 0)
		for _, v := range t {
			n += stringSize(v)
		}
	}
	return n
}

// intSize is the length of strconv.AppendInt(nil, v, 10).
func intSize(v int64) int {
	n := 1
	if v < 0 {
		n++
		if v == -v { // math.MinInt64
			return 20
		}
		v = -v
	}
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// stringSize is the length of AppendString(nil, s).
func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf:
			n++
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				n += len("\ufffd")
			} else {
				n += size
			}
			i += size
		case c == '"', c == '\\', c == '\n', c == '\r', c == '\t', c == '\b', c == '\f':
			n += 2
			i++
		default:
			n += 6
			i++
		}
	}
	return n
}
