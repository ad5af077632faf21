package search

import (
	"strings"
	"unicode/utf8"
)

// Mode selects how the text becomes a tsquery (docs/PROTOCOL.md §12.3).
type Mode int

const (
	// FullText is websearch_to_tsquery('simple', text): words ANDed, quoted
	// phrases, "or", "-word". The NIP-50 REQ mode.
	FullText Mode = iota
	// Prefix splits the text on white space, quotes every lexeme and gives
	// only the lexemes of the last token ":*". Typeahead; no operators.
	Prefix
)

// String returns "fulltext" or "prefix".
func (m Mode) String() string {
	if m == Prefix {
		return "prefix"
	}
	return "fulltext"
}

// Limits of the query function (docs/PROTOCOL.md §12.2, §12.9).
const (
	TextCap        = 4096
	DefaultPerPage = 100
	MaxPerPage     = 500
	MaxPage        = 1000
)

// Query is one search (the SearchQuery of docs/PROTOCOL.md §12.2).
type Query struct {
	// Community is the community resolved from the request Host, never from
	// client data. Empty is an error before any SQL.
	Community string
	// Text is the NIP-50 text; Search normalises it (NormalizeText).
	Text string
	// Scope is the channel scope; the zero value is Channels(nil), which
	// matches nothing.
	Scope ChannelScope
	// Kinds constrains kind = ANY(...); nil or empty means no constraint.
	Kinds []int
	// Authors are 32-byte pubkeys, pubkey = ANY(...); nil or empty means none.
	Authors [][]byte
	// Since and Until are inclusive Unix-second bounds; nil means none.
	Since, Until *int64
	// Page is 1-based; 0 becomes 1 and values are clamped to 1..MaxPage.
	Page int64
	// PerPage is 0 for DefaultPerPage, clamped to 1..MaxPerPage.
	PerPage int64
	Mode    Mode
}

// ClampPage returns page clamped to 1..MaxPage (0 and negatives become 1).
func ClampPage(page int64) int64 { return min(max(page, 1), MaxPage) }

// ClampPerPage returns perPage with 0 (or less) as DefaultPerPage, clamped
// to 1..MaxPerPage.
func ClampPerPage(perPage int64) int64 {
	if perPage <= 0 {
		return DefaultPerPage
	}
	return min(perPage, MaxPerPage)
}

// NormalizeText applies docs/PROTOCOL.md §12.2: trim Unicode white space, keep the
// first TextCap code points, replace NUL with a space, trim again. An empty
// result means "no hits, no SQL". Invalid UTF-8 becomes U+FFFD first.
func NormalizeText(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) > TextCap {
		n := 0
		for i := range s {
			if n == TextCap {
				s = s[:i]
				break
			}
			n++
		}
	}
	return strings.TrimSpace(strings.ReplaceAll(s, "\x00", " "))
}
