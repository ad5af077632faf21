package search

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// fullTextQuery is the FullText tsquery of $2.
const fullTextQuery = `websearch_to_tsquery('simple', $2)`

// prefixQuery is the Prefix tsquery of $2 (docs/PROTOCOL.md §12.3): each raw token is
// parsed like the column, its lexemes are quoted, only the last token's get
// ":*", and everything is ANDed. Text that yields no lexeme is the empty
// tsquery, which matches nothing.
const prefixQuery = `(SELECT COALESCE(string_agg(quote_literal(lx.lexeme)
                              || CASE WHEN tk.token_ord = tk.last_ord THEN ':*' ELSE '' END,
                            ' & ' ORDER BY tk.token_ord, lx.lex_ord), '')::tsquery
   FROM (SELECT token, token_ord, max(token_ord) OVER () AS last_ord
           FROM regexp_split_to_table($2, '\s+') WITH ORDINALITY AS t(token, token_ord)) AS tk
   CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('simple', tk.token)))
        WITH ORDINALITY AS lx(lexeme, lex_ord))`

// statement is one built search statement.
type statement struct {
	sql  string
	args []any
	// candidates receives the size of the window, read from every row.
	candidates *int64
}

// RecentSpan is the first span a search tries (docs/PROTOCOL.md §12.4 fixes
// the result, not the plan): the window of [until-or-now − RecentSpan,
// until] alone. When that window is full it equals the window of the whole
// filter, and the statement plans and scans only the partitions of the
// span; otherwise the search runs again without the bound.
const RecentSpan = 62 * 24 * time.Hour

// recentFrom returns the lower bound of q's recent span, and false when
// the filter's own since already bounds it as tightly.
func recentFrom(q *Query, now time.Time) (time.Time, bool) {
	end := now
	if q.Until != nil {
		end = time.Unix(*q.Until, 0)
	}
	from := end.Add(-RecentSpan).UTC().Truncate(time.Second)
	if q.Since != nil && *q.Since >= from.Unix() {
		return time.Time{}, false
	}
	return from, true
}

// build returns the statement of a normalised query (docs/PROTOCOL.md §12.4). text is
// already normalised and non-empty; page and perPage already clamped;
// window is the rank window; from, when set, is the recent span's lower
// bound (recentFrom). community_id = $1 is always the first predicate.
//
// The inner query takes the newest window matches under every predicate
// (community, deleted, scope, kinds, authors, since, until) and computes no
// rank; its LIMIT is a barrier the planner cannot flatten, so ts_rank_cd
// runs on at most window rows, however common the word. The outer query
// orders that window and cuts the page from it.
func build(q *Query, text string, page, perPage int64, window int, from *time.Time) statement {
	st := statement{args: []any{q.Community, text}, candidates: new(int64)}
	arg := func(v any) string {
		st.args = append(st.args, v)
		return "$" + strconv.Itoa(len(st.args))
	}
	tsq := fullTextQuery
	if q.Mode == Prefix {
		tsq = prefixQuery
	}
	var b strings.Builder
	b.WriteString(`SELECT id, kind, pubkey, channel_id::text,
       EXTRACT(EPOCH FROM created_at)::bigint AS created_at_s,
       ts_rank_cd(search_tsv, query) AS rank, count(*) OVER () AS candidates
FROM (SELECT id, kind, pubkey, channel_id, created_at, search_tsv, search_query.query
FROM events CROSS JOIN LATERAL (SELECT `)
	b.WriteString(tsq)
	b.WriteString(` AS query) AS search_query
WHERE `)
	b.WriteString(predicates(q, arg))
	if from != nil {
		b.WriteString("\n  AND created_at >= " + arg(*from))
	}
	b.WriteString("\nORDER BY created_at DESC, id\nLIMIT " + arg(int64(window)) + ") AS candidates")
	b.WriteString("\nORDER BY ")
	if exactPriority(q, text) {
		b.WriteString("search_tsv @@ websearch_to_tsquery('simple', $2) DESC, ")
	}
	b.WriteString("rank DESC, created_at DESC, id")
	b.WriteString("\nLIMIT " + arg(perPage) + " OFFSET " + arg((page-1)*perPage))
	st.sql = b.String()
	return st
}

// predicates returns the conditions every match of q meets, community_id
// = $1 first (docs/PROTOCOL.md §12.4): not deleted, not expired
// (docs/PROTOCOL.md §6.6), the tsquery, then the scope, kinds, authors,
// since and until of the filter, binding values with arg.
func predicates(q *Query, arg func(any) string) string {
	var b strings.Builder
	b.WriteString(`community_id = $1
  AND deleted_at IS NULL
  AND (expires_at IS NULL OR expires_at > now())
  AND search_tsv @@ search_query.query`)
	if frag := q.Scope.fragment(arg); frag != "" {
		b.WriteString("\n  AND " + frag)
	}
	if len(q.Kinds) > 0 {
		b.WriteString("\n  AND kind = ANY(" + arg(q.Kinds) + "::int[])")
	}
	if len(q.Authors) > 0 {
		b.WriteString("\n  AND pubkey = ANY(" + arg(q.Authors) + "::bytea[])")
	}
	if q.Since != nil {
		b.WriteString("\n  AND created_at >= " + arg(time.Unix(*q.Since, 0).UTC()))
	}
	if q.Until != nil {
		b.WriteString("\n  AND created_at <= " + arg(time.Unix(*q.Until, 0).UTC()))
	}
	return b.String()
}

// exactPriority reports the exact-lexeme ordering of docs/PROTOCOL.md §12.4: Prefix
// mode, kinds exactly [0] and at most 2 code points of text, so a short
// exact name comes before longer names that start with it.
func exactPriority(q *Query, text string) bool {
	return q.Mode == Prefix && len(q.Kinds) == 1 && q.Kinds[0] == 0 && utf8.RuneCountInString(text) <= 2
}
