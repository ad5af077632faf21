// Package search is NIP-50 over PostgreSQL full-text search (docs/PROTOCOL.md §12.2):
// the query side of the search_tsv generated column of events, and the
// operator's view and rewrite of the kind policy that column encodes.
//
// It owns SearchQuery normalisation and clamps, the four channel scopes, the
// FullText and Prefix tsqueries (user text is always a bound parameter, and
// Prefix re-parses every token and quotes each lexeme, so punctuation never
// becomes tsquery syntax), the rank window (only the newest
// BUZZ_SEARCH_RANK_WINDOW matches of a query are ranked, the window
// passed in through Config), ts_rank_cd ordering
// with its tie-breaks, OFFSET paging over the window, batched hydration of
// hits, and the search_tsv catalog functions used by `buzz-relay
// maintenance search-kinds`.
//
// It does NOT decide who may read what: it returns candidates, and the read
// engine re-authorises every one (search is never the access boundary). It
// does NOT resolve communities: the caller passes the community it resolved
// from the request Host, and every statement starts its WHERE clause with
// community_id = $1. It does NOT index anything: PostgreSQL computes
// search_tsv in the inserting transaction, so there is nothing to keep in
// sync.
package search
