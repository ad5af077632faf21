package event

import (
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// parseSimple is Parse's one-pass path for the objects clients send: the
// seven fields once each, hex strings, integer created_at and kind, tags
// an array of arrays of strings. It reads the bytes once and builds the
// event as it goes, where the general path validates the whole object,
// decodes it into raw fields and decodes the tags a second time
// (docs/ARCHITECTURE.md "EVENT pipeline").
//
// ok is false for anything it does not decode exactly as the general path
// would: a null, an unknown or repeated key, a number other than a plain
// non-negative integer, an escaped UTF-16 surrogate, bytes that are not
// UTF-8, a value out of range, and any malformed input. Parse then runs
// the general path, which gives the answer or the error it always gave.
// TestParseSimpleAgrees and FuzzParseSimple hold the two paths to the
// same event.
//
// encoding/json's alternatives (a faster library) were not taken: their
// string decoding keeps invalid escapes and invalid UTF-8 as they are,
// where encoding/json replaces them, so the fallback rules above would be
// needed all the same.
func parseSimple(b []byte) (ev Event, ok bool) {
	s := simpleScanner{b: b}
	if !s.eat('{') {
		return Event{}, false
	}
	const (
		fID = 1 << iota
		fPubKey
		fCreatedAt
		fKind
		fTags
		fContent
		fSig
		fAll = 1<<iota - 1
	)
	seen := 0
	for {
		key, ok := s.str()
		if !ok || !s.eat(':') {
			return Event{}, false
		}
		var (
			field int
			str   *string // the field, when its value is a string
		)
		switch key {
		case "id":
			field, str = fID, &ev.ID
		case "pubkey":
			field, str = fPubKey, &ev.PubKey
		case "content":
			field, str = fContent, &ev.Content
		case "sig":
			field, str = fSig, &ev.Sig
		case "created_at":
			field = fCreatedAt
			ev.CreatedAt, ok = s.uint(math.MaxInt64)
		case "kind":
			field = fKind
			var k int64
			k, ok = s.uint(65535)
			ev.Kind = int(k)
		case "tags":
			field = fTags
			ev.Tags, ok = s.tags()
		default:
			// encoding/json skips unknown keys and matches keys without
			// regard to case: the general path decides.
			return Event{}, false
		}
		if str != nil {
			*str, ok = s.str()
		}
		if !ok || seen&field != 0 {
			return Event{}, false
		}
		seen |= field
		if s.eat('}') {
			break
		}
		if !s.eat(',') {
			return Event{}, false
		}
	}
	s.space()
	if s.i != len(b) || seen != fAll || !IsHex64(ev.ID) || !IsHex64(ev.PubKey) || !IsHex128(ev.Sig) {
		return Event{}, false
	}
	return ev, true
}

// simpleScanner reads JSON tokens from b at i.
type simpleScanner struct {
	b []byte
	i int
}

// space skips what JSON counts as white space.
func (s *simpleScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat skips white space and then c, if c is next.
func (s *simpleScanner) eat(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// uint reads a non-negative integer of at most 18 digits, without a
// fraction or an exponent, that is at most max.
func (s *simpleScanner) uint(max int64) (int64, bool) {
	s.space()
	start := s.i
	var v int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
		if s.i-start > 18 {
			return 0, false
		}
	}
	n := s.i - start
	if n == 0 || (n > 1 && s.b[start] == '0') || v > max {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}

// tags reads an array of arrays of strings; every array it returns is
// non-nil, as encoding/json's are.
func (s *simpleScanner) tags() (Tags, bool) {
	if !s.eat('[') {
		return nil, false
	}
	tags := Tags{}
	if s.eat(']') {
		return tags, true
	}
	for {
		if !s.eat('[') {
			return nil, false
		}
		tag := Tag{}
		if !s.eat(']') {
			for {
				v, ok := s.str()
				if !ok {
					return nil, false
				}
				tag = append(tag, v)
				if s.eat(']') {
					break
				}
				if !s.eat(',') {
					return nil, false
				}
			}
		}
		tags = append(tags, tag)
		if s.eat(']') {
			return tags, true
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// str reads a string. Without an escape it is one copy of its bytes.
func (s *simpleScanner) str() (string, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return "", false // encoding/json would put U+FFFD here
			}
			s.i += n
		}
	}
	return "", false
}

// escaped goes on reading the string that started at start from its first
// escape, decoding into a copy.
func (s *simpleScanner) escaped(start int) (string, bool) {
	buf := make([]byte, 0, s.i-start+16)
	buf = append(buf, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return "", false
			}
			switch e := s.b[s.i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(s.b[s.i+2:])
				if !ok || utf16.IsSurrogate(r) {
					return "", false // a pair, or U+FFFD: the general path
				}
				buf = utf8.AppendRune(buf, r)
				s.i += 4
			default:
				return "", false
			}
			s.i += 2
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return "", false
			}
			buf = append(buf, s.b[s.i:s.i+n]...)
			s.i += n
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		d, ok := fromHexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
