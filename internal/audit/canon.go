package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
)

// Canonical writes a JSON value in the canonical form of docs/PROTOCOL.md §13.2: no
// whitespace, object keys sorted byte-wise, arrays in order, integers only,
// strings escaped by the fixed table and otherwise raw UTF-8. nil, empty
// input and JSON null give "null". A non-integer number or invalid JSON is
// a SerializationError. Numbers are never converted through float64.
func Canonical(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &SerializationError{What: "detail is not valid JSON"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &SerializationError{What: "detail has trailing data"}
	}
	return appendCanonical(nil, v)
}

func appendCanonical(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if x {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case json.Number:
		if !isInteger(string(x)) {
			return nil, &SerializationError{What: "detail holds a non-integer number " + string(x)}
		}
		return append(b, x...), nil
	case string:
		return event.AppendString(b, x), nil // the NIP-01 escaping is the canonical form
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare) // Go strings compare byte-wise
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = event.AppendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, &SerializationError{What: "detail holds a value that cannot be written"}
}

// isInteger accepts -?(0|[1-9][0-9]*): no plus, no leading zeros, no
// fraction, no exponent.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
