package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// ParseError describes why bytes are not a well-formed event or filter. Its
// text is the detail that follows "invalid event: " or "invalid filter: ".
type ParseError struct{ Detail string }

func (e *ParseError) Error() string { return e.Detail }

func parseErr(format string, args ...any) error {
	return &ParseError{Detail: fmt.Sprintf(format, args...)}
}

type rawEvent struct {
	ID        *string          `json:"id"`
	PubKey    *string          `json:"pubkey"`
	CreatedAt *json.Number     `json:"created_at"`
	Kind      *json.Number     `json:"kind"`
	Tags      *json.RawMessage `json:"tags"`
	Content   *string          `json:"content"`
	Sig       *string          `json:"sig"`
}

// Parse decodes a JSON event object and checks its field types: 64-hex id and
// pubkey, 128-hex sig (lowercase), integer created_at ≥ 0, integer kind
// 0–65535, tags an array of arrays of strings, content a string. It checks
// neither the id nor the signature. Errors are *ParseError.
func Parse(b []byte) (Event, error) {
	if ev, ok := parseSimple(b); ok {
		return ev, nil
	}
	return parseGeneral(b)
}

// parseGeneral is Parse through encoding/json: every object parseSimple
// does not take, and the errors.
func parseGeneral(b []byte) (Event, error) {
	var r rawEvent
	if err := json.Unmarshal(b, &r); err != nil {
		return Event{}, parseErr("%s", jsonDetail(err))
	}
	var ev Event
	switch {
	case r.ID == nil:
		return ev, parseErr("missing field `id`")
	case r.PubKey == nil:
		return ev, parseErr("missing field `pubkey`")
	case r.CreatedAt == nil:
		return ev, parseErr("missing field `created_at`")
	case r.Kind == nil:
		return ev, parseErr("missing field `kind`")
	case r.Tags == nil:
		return ev, parseErr("missing field `tags`")
	case r.Content == nil:
		return ev, parseErr("missing field `content`")
	case r.Sig == nil:
		return ev, parseErr("missing field `sig`")
	}
	if !IsHex64(*r.ID) {
		return ev, parseErr("id must be 64 lowercase hex characters")
	}
	if !IsHex64(*r.PubKey) {
		return ev, parseErr("pubkey must be 64 lowercase hex characters")
	}
	if !IsHex128(*r.Sig) {
		return ev, parseErr("sig must be 128 lowercase hex characters")
	}
	ca, err := parseUint(*r.CreatedAt, math.MaxInt64)
	if err != nil {
		return ev, parseErr("created_at must be a non-negative integer")
	}
	kind, err := parseUint(*r.Kind, 65535)
	if err != nil {
		return ev, parseErr("kind must be an integer between 0 and 65535")
	}
	tags, err := parseTags(*r.Tags)
	if err != nil {
		return ev, err
	}
	ev = Event{ID: *r.ID, PubKey: *r.PubKey, CreatedAt: ca, Kind: int(kind), Tags: tags, Content: *r.Content, Sig: *r.Sig}
	return ev, nil
}

func parseTags(raw json.RawMessage) (Tags, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, parseErr("tags must be an array of arrays of strings")
	}
	var tags Tags
	if err := json.Unmarshal(raw, &tags); err != nil {
		return nil, parseErr("tags must be an array of arrays of strings")
	}
	for _, t := range tags {
		if t == nil {
			return nil, parseErr("tags must be an array of arrays of strings")
		}
	}
	if tags == nil {
		tags = Tags{}
	}
	return tags, nil
}

// parseUint parses a JSON number that must be a non-negative integer ≤ max.
func parseUint(n json.Number, max int64) (int64, error) {
	v, err := n.Int64()
	if err != nil || v < 0 || v > max {
		return 0, errors.New("out of range")
	}
	return v, nil
}

func jsonDetail(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field `%s` has the wrong type", te.Field)
		}
		return "expected a JSON object"
	}
	return err.Error()
}

// errStoredTags is DecodeStoredTags's answer for anything but an array of
// arrays of strings.
var errStoredTags = errors.New("stored tags are not an array of arrays of strings")

// DecodeStoredTags decodes a stored tags column strictly: an array whose
// every element is an array of strings. null (outer, a tag or an
// element), an object or a number fails, where plain unmarshalling into
// Tags would accept a null element as "". Reads use it to decide whether
// a stored row can be reconstructed into an event.
func DecodeStoredTags(b []byte) (Tags, error) {
	var raw []json.RawMessage
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) || json.Unmarshal(b, &raw) != nil {
		return nil, errStoredTags
	}
	tags := make(Tags, 0, len(raw))
	for _, t := range raw {
		var vals []*string
		if bytes.Equal(bytes.TrimSpace(t), []byte("null")) || json.Unmarshal(t, &vals) != nil {
			return nil, errStoredTags
		}
		tag := make(Tag, len(vals))
		for i, v := range vals {
			if v == nil {
				return nil, errStoredTags
			}
			tag[i] = *v
		}
		tags = append(tags, tag)
	}
	return tags, nil
}
