package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/buzz-relay/buzz/internal/event"
)

// EventRow is a stored event read for the wire: its JSON is built straight
// from the columns, the tags copied from the jsonb text with the spaces
// PostgreSQL prints after ',' removed, so they are never decoded and
// encoded again. JSON is byte for byte what Event.AppendJSON gives for the
// decoded event.
type EventRow struct {
	// Event holds every field, but Tags stays nil until DecodeTags.
	Event event.Event
	// Channel is the stored channel_id, "" for a global event.
	Channel string
	// JSON is the event's NIP-01 object.
	JSON []byte
	// RawTags is the tags array inside JSON: compact, every element an
	// array of strings, each string escaped as event.AppendString does.
	RawTags []byte
}

// DecodeTags fills Event.Tags from RawTags, once.
func (r *EventRow) DecodeTags() error {
	if r.Event.Tags != nil {
		return nil
	}
	tags := event.Tags{}
	if err := json.Unmarshal(r.RawTags, &tags); err != nil {
		return fmt.Errorf("decode tags of %s: %w", r.Event.ID, err)
	}
	r.Event.Tags = tags
	return nil
}

// EventRows is EventQuery for the wire: the same statement, one round
// trip, each row as an EventRow.
func (s *Store) EventRows(ctx context.Context, p EventQueryParams) ([]EventRow, error) {
	q := s.q
	b := buildQuery(p)
	rows, err := q.Query(ctx, b.selectSQL(p.Limit), b.args...)
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	out, err := scanEventRows(rows, p.Limit, p.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	return out, nil
}

// scanEventRows reads rows of (id, pubkey, created_at, kind, tags, content,
// sig, channel_id::text). The byte columns are read in place (they are
// valid until the next row) and appended to the row's JSON. limit sizes
// the slice up to a page of 64: a REQ without a limit asks for 1,000 and
// usually gets far fewer. maxBytes above 0 stops the read after the row
// whose JSON takes the total over it; the rest of the result is never
// decoded.
func scanEventRows(rows pgx.Rows, limit, maxBytes int) ([]EventRow, error) {
	defer rows.Close()
	out := make([]EventRow, 0, min(max(limit, 0), 64))
	total := 0
	for rows.Next() {
		r, err := scanEventRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if total += len(r.JSON); maxBytes > 0 && total > maxBytes {
			break
		}
	}
	return out, rows.Err()
}

// scanEventRow reads the current row of (id, pubkey, created_at, kind,
// tags, content, sig, channel_id::text) and then the extra columns into
// extra. The byte columns are read in place and copied into the row's
// JSON.
func scanEventRow(rows pgx.Rows, extra ...any) (EventRow, error) {
	var (
		id, pub, sig, tags pgtype.DriverBytes
		ts                 time.Time
		channel            pgtype.Text
		r                  EventRow
	)
	dest := append([]any{&id, &pub, &ts, &r.Event.Kind, &tags, &r.Event.Content, &sig, &channel}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return EventRow{}, err
	}
	r.Event.CreatedAt = ts.Unix()
	r.Channel = channel.String
	if err := r.build(id, pub, sig, tags); err != nil {
		return EventRow{}, err
	}
	return r, nil
}

// build sets the row's hex fields, JSON and RawTags. Tags that are not a
// well-formed array of arrays of strings in the form PostgreSQL prints
// (never expected) are decoded and encoded the long way, which gives the
// same bytes or the same error as before this path existed.
func (r *EventRow) build(id, pub, sig, tags []byte) error {
	e := &r.Event
	n := len(`{"id":"","pubkey":"","created_at":,"kind":,"tags":,"content":,"sig":""}`) +
		2*(len(id)+len(pub)+len(sig)) + 20 + 6 + len(tags) + len(e.Content) + len(e.Content)/8 + 2
	b := make([]byte, 0, n)
	b = append(b, `{"id":"`...)
	b = hex.AppendEncode(b, id)
	e.ID = string(b[len(`{"id":"`):])
	b = append(b, `","pubkey":"`...)
	at := len(b)
	b = hex.AppendEncode(b, pub)
	e.PubKey = string(b[at:])
	b = append(b, `","created_at":`...)
	b = strconv.AppendInt(b, e.CreatedAt, 10)
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, int64(e.Kind), 10)
	b = append(b, `,"tags":`...)
	tagsAt := len(b)
	b, ok := AppendCompactTags(b, tags)
	if !ok {
		b = b[:tagsAt]
		if err := json.Unmarshal(tags, &e.Tags); err != nil {
			return fmt.Errorf("decode tags of %s: %w", e.ID, err)
		}
		b = event.AppendTags(b, e.Tags)
	}
	tagsEnd := len(b)
	b = append(b, `,"content":`...)
	b = event.AppendString(b, e.Content)
	b = append(b, `,"sig":"`...)
	at = len(b)
	b = hex.AppendEncode(b, sig)
	e.Sig = string(b[at:])
	b = append(b, `"}`...)
	r.JSON = b
	r.RawTags = b[tagsAt:tagsEnd:tagsEnd]
	return nil
}

// AppendCompactTags appends src, a jsonb tags value as PostgreSQL prints
// it, to dst without the whitespace between tokens, and reports whether
// src was an array of arrays of strings. PostgreSQL prints a string with
// the escapes of event.AppendString (the short ones for '"', '\\', \b,
// \f, \n, \r, \t, \u00XX for the other control characters, all else
// verbatim), so the strings are copied as they are. On false dst holds a
// partial copy; the caller truncates it.
func AppendCompactTags(dst, src []byte) ([]byte, bool) {
	i := skipSpace(src, 0)
	if i >= len(src) || src[i] != '[' {
		return dst, false
	}
	dst = append(dst, '[')
	i = skipSpace(src, i+1)
	if i < len(src) && src[i] == ']' {
		return append(dst, ']'), skipSpace(src, i+1) == len(src)
	}
	for {
		if i >= len(src) || src[i] != '[' {
			return dst, false
		}
		dst = append(dst, '[')
		i = skipSpace(src, i+1)
		if i < len(src) && src[i] == ']' {
			dst = append(dst, ']')
			i++
		} else {
			for {
				j, ok := stringEnd(src, i)
				if !ok {
					return dst, false
				}
				dst = append(dst, src[i:j]...)
				if i = skipSpace(src, j); i >= len(src) {
					return dst, false
				}
				if src[i] == ']' {
					dst = append(dst, ']')
					i++
					break
				}
				if src[i] != ',' {
					return dst, false
				}
				dst = append(dst, ',')
				i = skipSpace(src, i+1)
			}
		}
		if i = skipSpace(src, i); i >= len(src) {
			return dst, false
		}
		if src[i] == ']' {
			return append(dst, ']'), skipSpace(src, i+1) == len(src)
		}
		if src[i] != ',' {
			return dst, false
		}
		dst = append(dst, ',')
		i = skipSpace(src, i+1)
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at i,
// and false when there is none, when it holds a raw control character or
// invalid UTF-8, or uses an escape event.AppendString never writes
// (\/, \uXXXX other than a control character): such a string would not
// come back in the same bytes from a decode and encode.
func stringEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	ascii := true
	for k := i + 1; k < len(b); k++ {
		switch c := b[k]; {
		case c == '"':
			if !ascii && !utf8.Valid(b[i+1:k]) {
				return 0, false
			}
			return k + 1, true
		case c == '\\':
			if k+1 >= len(b) {
				return 0, false
			}
			switch b[k+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				k++
			case 'u':
				// Only \u00XX of a control character without a short
				// escape, lowercase hex: what AppendString writes.
				if k+5 >= len(b) || b[k+2] != '0' || b[k+3] != '0' || (b[k+4] != '0' && b[k+4] != '1') ||
					!isLowerHexDigit(b[k+5]) || isShortEscaped(b[k+4], b[k+5]) {
					return 0, false
				}
				k += 5
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, false
}

func isLowerHexDigit(c byte) bool { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }

// isShortEscaped reports whether \u00<hi><lo> is a control character
// AppendString writes with a short escape instead.
func isShortEscaped(hi, lo byte) bool {
	if hi != '0' {
		return false
	}
	switch lo {
	case '8', '9', 'a', 'c', 'd': // \b \t \n \f \r
		return true
	}
	return false
}

// HotWindowRow is a row of HotWindowRows: the EventRow and its NIP-40
// expiration (unix seconds, 0 for none).
type HotWindowRow struct {
	EventRow
	Expires int64
}

// HotWindowRows reads the newest n live, unexpired events of a community
// whose kinds are neither replaceable, addressable nor ephemeral, newest
// first (created_at descending, id ascending): the warm read of the hot
// window (docs/ARCHITECTURE.md "Hot window"). Tags are decoded.
func (s *Store) HotWindowRows(ctx context.Context, communityID string, n int) ([]HotWindowRow, error) {
	rows, err := s.q.Query(ctx, `SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text,
			COALESCE(extract(epoch FROM e.expires_at)::bigint, 0)
		FROM events e
		WHERE e.community_id = $1 AND e.deleted_at IS NULL AND `+unexpired+`
		  AND e.kind <> 0 AND e.kind <> 3 AND NOT (e.kind BETWEEN 10000 AND 39999)
		ORDER BY e.created_at DESC, e.id ASC LIMIT $2`, communityID, n)
	if err != nil {
		return nil, fmt.Errorf("hot window rows: %w", err)
	}
	defer rows.Close()
	out := make([]HotWindowRow, 0, min(n, 1024))
	for rows.Next() {
		var r HotWindowRow
		var err error
		if r.EventRow, err = scanEventRow(rows, &r.Expires); err != nil {
			return nil, fmt.Errorf("hot window rows: %w", err)
		}
		if err := r.DecodeTags(); err != nil {
			return nil, fmt.Errorf("hot window rows: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hot window rows: %w", err)
	}
	return out, nil
}

// HotWindowOlder reads what a community's live events of window kinds
// created before before (unix seconds) carry: the distinct values of
// their e and p tags (each tag's second element, as a REQ filter's #e and
// #p compare them) and their distinct authors, looking at no more than
// maxRows events: complete is false when it stopped there, so more may
// exist. The hot window keeps them to prove that no event older than its
// horizon answers an #e, #p or authors filter (docs/ARCHITECTURE.md "Hot
// window").
func (s *Store) HotWindowOlder(ctx context.Context, communityID string, before int64, maxRows int) (e, p, authors []string, complete bool, err error) {
	var rows int
	err = s.q.QueryRow(ctx, `WITH s AS MATERIALIZED (
			SELECT e.pubkey, e.tags FROM events e
			WHERE e.community_id = $1 AND e.created_at < $2 AND e.deleted_at IS NULL
			  AND e.kind <> 0 AND e.kind <> 3 AND NOT (e.kind BETWEEN 10000 AND 39999)
			LIMIT $3),
		t AS MATERIALIZED (SELECT t->>0 AS name, t->>1 AS value FROM s, jsonb_array_elements(s.tags) t
			WHERE t->>0 IN ('e', 'p') AND t->>1 IS NOT NULL)
		SELECT (SELECT count(*) FROM s),
			ARRAY(SELECT DISTINCT value FROM t WHERE name = 'e'),
			ARRAY(SELECT DISTINCT value FROM t WHERE name = 'p'),
			ARRAY(SELECT DISTINCT encode(pubkey, 'hex') FROM s)`,
		communityID, time.Unix(before, 0).UTC(), maxRows).Scan(&rows, &e, &p, &authors)
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("hot window older values: %w", err)
	}
	return e, p, authors, rows < maxRows, nil
}

// HotWindowNextExpiry returns the earliest NIP-40 expiration (unix
// seconds, rounded down) of the community's stored events that has not
// passed, math.MaxInt64 when there is none: a search page of the
// community read now stays PostgreSQL's answer until then, unless
// something is committed (docs/ARCHITECTURE.md "Search cache"). It walks
// the partial index on expires_at from now.
func (s *Store) HotWindowNextExpiry(ctx context.Context, communityID string) (int64, error) {
	var at *int64
	err := s.q.QueryRow(ctx, `SELECT floor(EXTRACT(EPOCH FROM min(expires_at)))::bigint
		FROM events WHERE community_id = $1 AND expires_at > now()`, communityID).Scan(&at)
	if err != nil {
		return 0, fmt.Errorf("next expiration: %w", err)
	}
	if at == nil {
		return math.MaxInt64, nil
	}
	return *at, nil
}

// HotWindowChannel is the NOTIFY channel of a program that writes a
// community's events outside the relays' ingest (the importer), the
// community id as payload: every relay process drops that community's hot
// window and keeps it cold for a few seconds (docs/OPERATIONS.md "Hot
// window").
const HotWindowChannel = "buzz_hot_window"

// HotWindowAll is the HotWindowChannel payload that stands for every
// community: the relay processes drop every hot window, and with them
// every cached search page (docs/ARCHITECTURE.md "Search cache"). The
// search-kinds rewrite sends it after it commits.
const HotWindowAll = "*"

// NotifyHotWindow signals on HotWindowChannel for the community, or for
// every community with HotWindowAll. A writer
// calls it at least once a second while it writes, and once after its
// last commit.
func (s *Store) NotifyHotWindow(ctx context.Context, communityID string) error {
	if _, err := s.q.Exec(ctx, "SELECT pg_notify($1, $2)", HotWindowChannel, communityID); err != nil {
		return fmt.Errorf("notify hot window: %w", err)
	}
	return nil
}
