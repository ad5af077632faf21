package search

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Day keys (migration 0010; docs/PERFORMANCE.md, "Search: day keys"). The
// newest W matches of a common word are found without reading all of its
// matches: the index idx_events_search_day_keys holds one key per
// (community, UTC day, lexeme), so the matches of one word on a few days
// are one small GIN probe. A FullText search whose query requires some
// lexeme walks back from the community's newest searchable event (the
// anchor) over daySpans, newest first, and stops as soon as W matches are
// found; what is older than the last span comes from the search_tsv GIN
// as before.

// secondsPerDay is the width of a day key: UTC days since the Unix epoch.
const secondsPerDay = 86400

// daySpans are the widths, in days, of the spans a day-key search walks
// back from the anchor's day, newest first: 2, 6 and 24 days (32 in all).
// Each span reads the matches of its days only, and the next one runs
// only when the spans before it held fewer than W matches, so a search
// reads at most W matches plus those of its last span. Finer spans (1, 1,
// 2, 4, 8, 16) read no fewer rows for a common word and cost a branch each:
// measured slower for both a common and a rare word (docs/PERFORMANCE.md).
var daySpans = []int64{2, 6, 24}

// dayOf returns the day number of Unix time sec, rounded down as the SQL
// floor(extract(epoch FROM created_at) / 86400) is.
func dayOf(sec int64) int64 {
	d := sec / secondsPerDay
	if sec%secondsPerDay < 0 {
		d--
	}
	return d
}

// communityKeyPrefix returns the community part of community's day keys:
// the base64 of its 16 bytes, as encode(uuid_send(id), 'base64'), and false
// when community is not a UUID.
func communityKeyPrefix(community string) (string, bool) {
	id, err := uuid.Parse(community)
	if err != nil {
		return "", false
	}
	return base64.StdEncoding.EncodeToString(id[:]), true
}

// dayKeys returns the keys of lexeme on days lo..hi inclusive, newest first.
func dayKeys(prefix string, lo, hi int64, lexeme string) []string {
	keys := make([]string, 0, hi-lo+1)
	for d := hi; d >= lo; d-- {
		keys = append(keys, prefix+":"+strconv.FormatInt(d, 10)+":"+lexeme)
	}
	return keys
}

// requiredLexeme returns a lexeme that every match of a tsquery contains,
// read from PostgreSQL's querytree() of it: the longest (a proxy for the
// rarest, so the fewest candidates) of the quoted lexemes when the tree
// has only AND and phrase operators, and false when it has an OR, a NOT
// or no lexeme (querytree gives "T" for a query no index can serve), when
// it is not well formed, or when a lexeme has a prefix or weight marker.
func requiredLexeme(tree string) (string, bool) {
	best := ""
	for i := 0; i < len(tree); {
		switch tree[i] {
		case '\'':
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(tree) {
				if tree[j] == '\'' {
					if j+1 < len(tree) && tree[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					closed = true
					j++
					break
				}
				b.WriteByte(tree[j])
				j++
			}
			if !closed || (j < len(tree) && tree[j] == ':') {
				return "", false
			}
			if lx := b.String(); len(lx) > len(best) {
				best = lx
			}
			i = j
		case ' ', '&', '(', ')':
			i++
		case '<':
			// A phrase operator: <-> or <N>.
			j := strings.IndexByte(tree[i:], '>')
			if j < 0 {
				return "", false
			}
			op := tree[i+1 : i+j]
			if op != "-" {
				if _, err := strconv.Atoi(op); err != nil {
					return "", false
				}
			}
			i += j + 1
		default:
			// '|', '!', 'T' or anything unexpected.
			return "", false
		}
	}
	return best, best != ""
}

// daysPlan is what the preflight of a FullText search found: the anchor
// day (preflightSQL) and the lexeme whose day keys the spans probe.
type daysPlan struct {
	anchor int64
	lexeme string
	prefix string
}

// preflightSQL returns the statement that reads a FullText search's anchor
// (search_anchor of migration 0010: the day of the community's newest
// searchable event of the filter's kinds within since..until and the
// partition holding it, NULLs when there is none; no match can be newer,
// so the spans that start there miss nothing) and the querytree of its
// tsquery. community_id = $1 and the text $2 are bound as in build.
func preflightSQL(q *Query) (string, []any) {
	var kinds []int
	if len(q.Kinds) > 0 {
		kinds = q.Kinds
	}
	var since, until *time.Time
	if q.Since != nil {
		t := time.Unix(*q.Since, 0).UTC()
		since = &t
	}
	if q.Until != nil {
		t := time.Unix(*q.Until, 0).UTC()
		until = &t
	}
	return `SELECT a.day, a.part::text, querytree(` + fullTextQuery + `)
FROM search_anchor($1, $3::int[], $4::timestamptz, $5::timestamptz) AS a`,
		[]any{q.Community, "", kinds, since, until}
}

// buildDays returns the statement of a FullText query over day keys
// (docs/PROTOCOL.md §12.4, the same window, order and page as build): one branch per
// day span, newest first, each the newest window matches of its days under
// every predicate, then a branch for everything older than the last span
// from the search_tsv GIN. The branches are disjoint in time and each is
// ordered newest first, so their concatenation is the newest-first order
// of all matches, and the outer LIMIT takes the window from the first
// branches only: PostgreSQL's Append runs its branches one after the other
// (the search transaction disables parallel plans, the one case where an
// Append interleaves), and a branch after the window is never executed.
func buildDays(q *Query, text string, page, perPage int64, window int, p daysPlan) statement {
	st := statement{args: []any{q.Community, text}, candidates: new(int64)}
	arg := func(v any) string {
		st.args = append(st.args, v)
		return "$" + strconv.Itoa(len(st.args))
	}
	// The predicates every branch shares, bound once.
	preds := predicates(q, arg)
	var sinceDay int64
	if q.Since != nil {
		sinceDay = dayOf(*q.Since)
	}
	w := arg(int64(window))
	// A day-key branch ranks each match as it reads it and sorts narrow
	// rows: its matches are one span's, already in memory (the function's
	// result), and carrying every tsvector through the sorts cost more than
	// ranking the few past the window (docs/PERFORMANCE.md "Day-key
	// branches rank as they read"). The older branch ranks only the window
	// it keeps, since it may match far more rows than it returns.
	const rankedCols = "SELECT id, kind, pubkey, channel_id, created_at, ts_rank_cd(search_tsv, search_query.query) AS rank\n"
	const cols = "SELECT id, kind, pubkey, channel_id, created_at, search_tsv, search_query.query\n"
	const lateral = " AS events CROSS JOIN LATERAL (SELECT " + fullTextQuery + " AS query) AS search_query\nWHERE "
	tail := "\nORDER BY created_at DESC, id\nLIMIT " + w + ")"

	var b strings.Builder
	// No window count: only the recent-span statement of build reads it.
	b.WriteString(`SELECT id, kind, pubkey, channel_id::text,
       EXTRACT(EPOCH FROM created_at)::bigint AS created_at_s,
       rank, 0::bigint AS candidates
FROM (SELECT * FROM (`)
	var branches []string
	hi := p.anchor
	for _, width := range daySpans {
		lo := hi - width + 1
		last := q.Since != nil && lo <= sinceDay
		if last {
			lo = sinceDay
		}
		branches = append(branches, "("+rankedCols+"FROM search_day_matches("+arg(dayKeys(p.prefix, lo, hi, p.lexeme))+
			"::text[])"+lateral+preds+tail)
		hi = lo - 1
		if last {
			break
		}
	}
	if q.Since == nil || hi >= sinceDay {
		// Everything older than the spans, from the search_tsv GIN.
		branches = append(branches, "(SELECT id, kind, pubkey, channel_id, created_at, ts_rank_cd(search_tsv, query) AS rank\nFROM ("+
			cols+"FROM events"+lateral+preds+
			"\n  AND created_at < "+arg(time.Unix((hi+1)*secondsPerDay, 0).UTC())+tail+" AS older)")
	}
	b.WriteString(strings.Join(branches, "\nUNION ALL\n"))
	b.WriteString(") AS spans\nLIMIT " + w + ") AS candidates")
	b.WriteString("\nORDER BY rank DESC, created_at DESC, id")
	b.WriteString("\nLIMIT " + arg(perPage) + " OFFSET " + arg((page-1)*perPage))
	st.sql = b.String()
	return st
}
