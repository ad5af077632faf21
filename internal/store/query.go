package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/buzz-relay/buzz/internal/event"
)

// StoredEvent is an event read back from the database.
type StoredEvent struct {
	Event event.Event
	// Channel is the stored channel_id, "" for a global event.
	Channel string
}

// EventQueryParams describe one filter's read (docs/PROTOCOL.md §7.5 step 5).
type EventQueryParams struct {
	CommunityID string
	// Reader is the authenticated pubkey; per-event visibility is pushed down
	// for it so LIMIT counts only rows the reader may see.
	Reader string
	Filter *event.Filter
	// Channels is the access scope: with ChannelOnly false the read covers
	// these channels plus global events; with ChannelOnly true only them.
	Channels    []string
	ChannelOnly bool
	// Limit is the number of rows wanted (already clamped by the caller).
	Limit int
	// BeforeID turns the filter's until into a keyset cursor.
	BeforeID string
	// MaxBytes, when above 0, stops EventRows reading once the rows read
	// hold more than MaxBytes of JSON: the row that crosses it is the last
	// one returned, so the caller sees where its byte budget ran out.
	MaxBytes int
	// Ceiling, when not zero, is a created_at no stored event is above
	// (docs/ARCHITECTURE.md "Created-at ceiling"). A filter without until,
	// or with a later one, is read up to it, so the planner skips the
	// partitions above it, which the partition job creates months ahead
	// and which hold nothing. It changes no answer.
	Ceiling time.Time
}

// EventQuery returns up to Limit live events matching the filter's pushable
// constraints, newest first with ties by ascending id.
func (s *Store) EventQuery(ctx context.Context, p EventQueryParams) ([]StoredEvent, error) {
	q := s.q
	b := buildQuery(p)
	rows, err := q.Query(ctx, b.selectSQL(p.Limit), b.args...)
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	out, err := scanEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	return out, nil
}

// EventCount counts live events matching the filter in its scope (the
// COUNT fast path: every constraint is exact in SQL).
func (s *Store) EventCount(ctx context.Context, p EventQueryParams) (int64, error) {
	b := buildQuery(p)
	var n int64
	sql := "SELECT count(*) " + b.fromWhere()
	if err := s.q.QueryRow(ctx, sql, b.args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}

type queryBuilder struct {
	args []any
	// where holds the predicates on events e.
	where []string
	// mention holds the predicates on event_mentions m when a single #p is
	// served through it (joinMention).
	mention     []string
	joinMention bool
}

// selectSQL is the statement of a filter's rows: one round trip.
func (b *queryBuilder) selectSQL(limit int) string {
	return "SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id::text " + b.fromWhere() +
		" ORDER BY " + b.order() + " LIMIT " + strconv.Itoa(limit)
}

func (b *queryBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// fromWhere is the FROM and WHERE of the statement. A single-#p read walks
// the reader's event_mentions rows newest first (kind, time and channel are
// filtered there, on its own index) and looks each event up by its key in a
// LATERAL with LIMIT 1: a nested loop whatever the statistics say, so a
// freshly loaded partition cannot turn it into a merge join over every
// mention.
func (b *queryBuilder) fromWhere() string {
	if b.joinMention {
		return "FROM event_mentions m CROSS JOIN LATERAL (SELECT e.id, e.pubkey, e.created_at, e.kind, e.tags, e.content, e.sig, e.channel_id" +
			" FROM events e WHERE e.community_id = m.community_id AND e.id = m.event_id AND e.created_at = m.event_created_at AND " +
			strings.Join(b.where, " AND ") + " LIMIT 1) e WHERE " + strings.Join(b.mention, " AND ")
	}
	return "FROM events e WHERE " + strings.Join(b.where, " AND ")
}

func (b *queryBuilder) order() string {
	if b.joinMention {
		return "m.event_created_at DESC, m.event_id ASC"
	}
	return "e.created_at DESC, e.id ASC"
}

func buildQuery(p EventQueryParams) *queryBuilder {
	f := p.Filter
	b := &queryBuilder{}
	cid := b.arg(p.CommunityID)
	b.where = append(b.where, "e.community_id = "+cid, "e.deleted_at IS NULL", unexpired)

	// Access scope.
	switch {
	case p.ChannelOnly:
		b.where = append(b.where, "e.channel_id = ANY("+b.arg(p.Channels)+"::uuid[])")
	case len(p.Channels) > 0:
		b.where = append(b.where, "(e.channel_id = ANY("+b.arg(p.Channels)+"::uuid[]) OR e.channel_id IS NULL)")
	default:
		b.where = append(b.where, "e.channel_id IS NULL")
	}

	if len(f.IDs) > 0 {
		b.where = append(b.where, "e.id = ANY("+b.arg(hexList(f.IDs))+"::bytea[])")
	}
	if len(f.Authors) == 1 {
		b.where = append(b.where, "e.pubkey = "+b.arg(hexList(f.Authors)[0]))
	} else if len(f.Authors) > 1 {
		b.where = append(b.where, "e.pubkey = ANY("+b.arg(hexList(f.Authors))+"::bytea[])")
	}
	if f.Kinds != nil {
		if len(f.Kinds) == 1 {
			b.where = append(b.where, "e.kind = "+b.arg(f.Kinds[0]))
		} else {
			b.where = append(b.where, "e.kind = ANY("+b.arg(f.Kinds)+"::int[])")
		}
	}
	if f.Since != nil {
		b.where = append(b.where, "e.created_at >= "+b.arg(time.Unix(*f.Since, 0).UTC()))
	}
	if f.Until != nil {
		until := b.arg(time.Unix(*f.Until, 0).UTC())
		if p.BeforeID != "" {
			b.where = append(b.where, "(e.created_at < "+until+" OR (e.created_at = "+until+" AND e.id > "+b.arg(hexOne(p.BeforeID))+"))")
		} else {
			b.where = append(b.where, "e.created_at <= "+until)
		}
	}
	if ceilingApplies(p) {
		b.where = append(b.where, "e.created_at <= "+b.arg(p.Ceiling.UTC()))
	}

	addressableOnly := len(f.Kinds) > 0
	for _, k := range f.Kinds {
		if !event.IsAddressable(k) {
			addressableOnly = false
		}
	}
	for name, values := range f.Tags {
		if len(values) == 0 || name == "h" {
			continue // #h is the access scope above
		}
		switch {
		case name == "p" && len(values) == 1 && event.IsHex64(values[0]):
			b.joinMention = true
			b.mention = append(b.mention, "m.community_id = "+cid, "m.pubkey_hex = "+b.arg(values[0]))
		case name == "d" && addressableOnly:
			b.where = append(b.where, "e.d_tag = ANY("+b.arg(values)+"::text[])")
		default:
			b.tagCondition(name, values)
		}
	}

	if b.joinMention {
		b.mentionCopies(p)
	}

	// Per-event visibility pushed down, so LIMIT counts visible rows only.
	if f.CanMatchAny(event.AuthorOnly) {
		b.where = append(b.where, "(e.kind NOT IN (30300, 30350) OR e.pubkey = "+b.arg(hexOne(p.Reader))+")")
	}
	if f.CanMatchAny(event.ResultGated) {
		b.where = append(b.where, "(e.kind NOT IN (30622, 44200) OR EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) t WHERE t->>0 = 'p' AND t->>1 = "+b.arg(p.Reader)+"))")
	}
	return b
}

// ceilingApplies reports whether p's ceiling bounds its read more tightly
// than the filter's own until.
func ceilingApplies(p EventQueryParams) bool {
	return !p.Ceiling.IsZero() && (p.Filter.Until == nil || *p.Filter.Until > p.Ceiling.Unix())
}

// FutureRows returns the newest created_at of the stored events dated
// after after, in any community, or the zero time when there is none. The
// read engine asks it once at start with its ceiling, so that rows stored
// before the importer refused events from the future, or under a clock
// that has since moved back, stay readable (docs/ARCHITECTURE.md
// "Created-at ceiling"). Only the partitions above after are scanned, and
// those normally hold nothing.
func (s *Store) FutureRows(ctx context.Context, after time.Time) (time.Time, error) {
	var newest *time.Time
	if err := s.q.QueryRow(ctx, `SELECT max(created_at) FROM events WHERE created_at > $1`, after.UTC()).Scan(&newest); err != nil {
		return time.Time{}, fmt.Errorf("future rows: %w", err)
	}
	if newest == nil {
		return time.Time{}, nil
	}
	return *newest, nil
}

// mentionCopies repeats the kind, time and channel predicates on the
// mention rows, so the walk over event_mentions skips what cannot match
// before any event is looked up. The predicates on e stay: these only
// narrow the candidates.
func (b *queryBuilder) mentionCopies(p EventQueryParams) {
	f := p.Filter
	if len(f.Kinds) > 0 {
		b.mention = append(b.mention, "m.event_kind = ANY("+b.arg(f.Kinds)+"::int[])")
	}
	if f.Since != nil {
		b.mention = append(b.mention, "m.event_created_at >= "+b.arg(time.Unix(*f.Since, 0).UTC()))
	}
	if f.Until != nil {
		b.mention = append(b.mention, "m.event_created_at <= "+b.arg(time.Unix(*f.Until, 0).UTC()))
	}
	if ceilingApplies(p) {
		b.mention = append(b.mention, "m.event_created_at <= "+b.arg(p.Ceiling.UTC()))
	}
	switch {
	case p.ChannelOnly:
		b.mention = append(b.mention, "m.channel_id = ANY("+b.arg(p.Channels)+"::uuid[])")
	case len(p.Channels) > 0:
		b.mention = append(b.mention, "(m.channel_id = ANY("+b.arg(p.Channels)+"::uuid[]) OR m.channel_id IS NULL)")
	default:
		b.mention = append(b.mention, "m.channel_id IS NULL")
	}
}

// tagCondition adds the GIN pre-filter (containment, OR-ed per value) and the
// exact positional test, so LIMIT counts exact matches only.
func (b *queryBuilder) tagCondition(name string, values []string) {
	ors := make([]string, 0, len(values))
	for _, v := range values {
		j, _ := json.Marshal([][]string{{name, v}})
		ors = append(ors, "e.tags @> "+b.arg(string(j))+"::jsonb")
	}
	b.where = append(b.where, "("+strings.Join(ors, " OR ")+")",
		"EXISTS (SELECT 1 FROM jsonb_array_elements(e.tags) t WHERE t->>0 = "+b.arg(name)+" AND t->>1 = ANY("+b.arg(values)+"::text[]))")
}

func scanEvents(rows pgx.Rows) ([]StoredEvent, error) { return scanEventsUpTo(rows, 0) }

// scanEventsUpTo is scanEvents that, with maxBytes above 0, stops after
// the row whose content and tags take the total over maxBytes.
func scanEventsUpTo(rows pgx.Rows, maxBytes int) ([]StoredEvent, error) {
	defer rows.Close()
	var out []StoredEvent
	total := 0
	for rows.Next() {
		var (
			id, pub, sig []byte
			ts           time.Time
			tags         []byte
			channel      *string
			se           StoredEvent
		)
		if err := rows.Scan(&id, &pub, &ts, &se.Event.Kind, &tags, &se.Event.Content, &sig, &channel); err != nil {
			return nil, err
		}
		se.Event.ID = hex.EncodeToString(id)
		se.Event.PubKey = hex.EncodeToString(pub)
		se.Event.Sig = hex.EncodeToString(sig)
		se.Event.CreatedAt = ts.Unix()
		if err := json.Unmarshal(tags, &se.Event.Tags); err != nil {
			return nil, fmt.Errorf("decode tags of %s: %w", se.Event.ID, err)
		}
		if channel != nil {
			se.Channel = *channel
		}
		out = append(out, se)
		if total += len(se.Event.Content) + len(tags); maxBytes > 0 && total > maxBytes {
			break
		}
	}
	return out, rows.Err()
}

// hexList decodes each value with hexOne.
func hexList(vals []string) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = hexOne(v)
	}
	return out
}

// hexOne decodes an id or pubkey for a statement's argument. Its callers pass
// values already checked as hex (event fields and tags by the ingest
// pipeline, filter ids, authors and before_id by the parsers), so there is
// no error to return; a value that is not hex anyway gives nil, SQL NULL,
// which equals no row and which a NOT NULL column refuses, never the bytes
// decoded before the bad digit.
func hexOne(v string) []byte {
	b, err := hex.DecodeString(v)
	if err != nil {
		return nil
	}
	return b
}
