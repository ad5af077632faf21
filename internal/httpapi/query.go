package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
)

// parseFilters decodes the body of /query and /count: a JSON array of 1–10
// filters (spec 10 §8.4). Errors are 400 *apiErrors "invalid filters: …".
func parseFilters(body []byte) ([]event.Filter, error) {
	trimmed := bytes.TrimSpace(body)
	var raws []json.RawMessage
	if len(trimmed) == 0 || trimmed[0] != '[' || json.Unmarshal(trimmed, &raws) != nil {
		return nil, refuse(http.StatusBadRequest, "invalid filters: body must be a JSON array of filters")
	}
	switch {
	case len(raws) == 0:
		return nil, refuse(http.StatusBadRequest, "invalid filters: at least one filter is required")
	case len(raws) > maxFilters:
		return nil, refuse(http.StatusBadRequest, msgTooManyFilters)
	}
	filters := make([]event.Filter, len(raws))
	for i, raw := range raws {
		f, err := event.ParseFilter(raw)
		if err != nil {
			detail := err.Error()
			var pe *event.ParseError
			if errors.As(err, &pe) {
				detail = pe.Detail
			}
			return nil, refuse(http.StatusBadRequest, "invalid filters: "+detail)
		}
		filters[i] = f
	}
	return filters, nil
}

// checkFilters runs the request-wide read checks shared by /query and
// /count, in the order of spec 10 §1.4: at most 128 explicit channels
// (400), then the p-, engram and author-only gates on every filter (403).
func checkFilters(reader string, filters []event.Filter) error {
	if read.ExplicitChannels(filters) > read.MaxExplicitChannels {
		return refuse(http.StatusBadRequest, msgTooManyChannels)
	}
	judged := filters
	for i := range filters {
		if routeOf(&filters[i]) == routeLegacyThread && filters[i].Kinds == nil {
			// A legacy thread read returns replies from thread_metadata,
			// which only thread kinds have: it is judged as if it named
			// them, like a search filter without kinds, and so is not gated.
			if &judged[0] == &filters[0] {
				judged = append([]event.Filter(nil), filters...)
			}
			judged[i].Kinds = threadKinds
		}
	}
	if msg := read.Gate(reader, judged, read.SurfaceCount); msg != "" {
		return refuse(http.StatusForbidden, msg)
	}
	return nil
}

// threadKinds are the kinds that have thread rows.
var threadKinds = []int{event.KindStreamMessage, event.KindStreamMessage2, event.KindForumPost, event.KindForumComment}

// readScope is a reader's resolved access for one bridge request.
type readScope struct {
	sc  read.Scope
	acc *read.Access
	// confirmed holds the explicitly requested channels that are accessible.
	confirmed map[string]struct{}
}

// resolveScope resolves the reader's accessible channels and confirms the
// channels the filters name in "#h" (spec 10 §1.4).
func (s *Server) resolveScope(ctx context.Context, rq *bridgeRequest, filters []event.Filter) (*readScope, error) {
	sc := read.Scope{CommunityID: rq.tenant.CommunityID, Reader: rq.pubkey}
	acc, err := s.cfg.Reader.Accessible(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("resolve accessible channels: %w", err)
	}
	var requested []string
	seen := map[string]struct{}{}
	for i := range filters {
		for _, ch := range filters[i].Tags["h"] {
			if _, dup := seen[ch]; !dup {
				seen[ch] = struct{}{}
				requested = append(requested, ch)
			}
		}
	}
	rs := &readScope{sc: sc, acc: acc, confirmed: map[string]struct{}{}}
	if len(requested) == 0 {
		return rs, nil
	}
	ok, err := s.cfg.Reader.Confirm(ctx, sc, acc, requested)
	if err != nil {
		return nil, fmt.Errorf("confirm requested channels: %w", err)
	}
	for _, ch := range ok {
		rs.confirmed[ch] = struct{}{}
	}
	return rs, nil
}

// narrow returns f with its "#h" values cut to the confirmed channels, and
// false when the filter named channels and none of them is accessible: such
// a filter yields nothing and issues no SQL.
func (rs *readScope) narrow(f event.Filter) (event.Filter, bool) {
	hs := f.Tags["h"]
	if len(hs) == 0 {
		return f, true
	}
	kept := make([]string, 0, len(hs))
	for _, ch := range hs {
		if _, ok := rs.confirmed[ch]; ok {
			kept = append(kept, ch)
		}
	}
	if len(kept) == 0 {
		return f, false
	}
	tags := make(map[string][]string, len(f.Tags))
	for k, v := range f.Tags {
		tags[k] = v
	}
	tags["h"] = kept
	f.Tags = tags
	return f, true
}

// queryRoute is the read that serves one /query filter (spec 10 §8.4,
// first match wins).
type queryRoute int

const (
	routePlain queryRoute = iota
	routeSearch
	// routeWindow: top_level / resolve_thread_roots (50-windows.md).
	routeWindow
	// routeLegacyThread: exactly one "#e" root and an integer depth_limit.
	routeLegacyThread
)

func routeOf(f *event.Filter) queryRoute {
	switch {
	case f.Search != nil:
		return routeSearch
	case hasExtra(f, "top_level") || hasExtra(f, "resolve_thread_roots"):
		return routeWindow
	case len(f.Tags["e"]) == 1 && event.IsHexAnyCase64(f.Tags["e"][0]) && isJSONInteger(f.Extra["depth_limit"]):
		return routeLegacyThread
	}
	return routePlain
}

// legacyThreadParams reads the legacy thread read of spec 10 §8.4: the
// root from the single #e, depth_limit, limit (default 100, at most 500) and
// the cursor fields thread_cursor / thread_cursor_id (or their camelCase
// spellings). kinds does not restrict reply kinds on this path.
func legacyThreadParams(f *event.Filter) (read.ThreadParams, error) {
	p := read.ThreadParams{Root: strings.ToLower(f.Tags["e"][0]), Channels: f.Tags["h"]}
	var depth json.Number
	_ = json.Unmarshal(f.Extra["depth_limit"], &depth)
	d, _ := depth.Int64()
	p.DepthLimit = int(min(max(d, 0), 1<<31-1))
	if f.Limit != nil {
		p.Limit = *f.Limit
	}
	for _, name := range []string{"thread_cursor", "threadCursor"} {
		raw, ok := f.Extra[name]
		if !ok {
			continue
		}
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return p, refuse(http.StatusBadRequest, "invalid filters: "+name+" must be an integer")
		}
		v, err := n.Int64()
		if err != nil {
			return p, refuse(http.StatusBadRequest, "invalid filters: "+name+" must be an integer")
		}
		p.HasCursor, p.CursorTime = true, v
	}
	for _, name := range []string{"thread_cursor_id", "threadCursorId"} {
		raw, ok := f.Extra[name]
		if !ok {
			continue
		}
		var id string
		if json.Unmarshal(raw, &id) != nil || !event.IsHexAnyCase64(id) {
			return p, refuse(http.StatusBadRequest, "invalid filters: "+name+" must be a 64-char hex event id")
		}
		p.CursorID = strings.ToLower(id)
	}
	return p, nil
}

func hasExtra(f *event.Filter, name string) bool { _, ok := f.Extra[name]; return ok }

func isJSONInteger(raw json.RawMessage) bool {
	if raw == nil {
		return false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return false
	}
	_, err := n.Int64()
	return err == nil
}

// plainOptions reads the plain-read extension fields of a filter
// (before_id, spec 10 §8.4).
func plainOptions(f *event.Filter) (read.QueryOptions, error) {
	raw, ok := f.Extra["before_id"]
	if !ok {
		return read.QueryOptions{}, nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil || !event.IsHexAnyCase64(id) {
		return read.QueryOptions{}, refuse(http.StatusBadRequest, msgBadBeforeID)
	}
	if f.Until == nil {
		return read.QueryOptions{}, refuse(http.StatusBadRequest, msgBeforeIDNeedsUntil)
	}
	return read.QueryOptions{BeforeID: strings.ToLower(id)}, nil
}

// query is POST /query (spec 10 §8.4).
func (s *Server) query(ctx context.Context, rq *bridgeRequest) (any, error) {
	filters, err := parseFilters(rq.body)
	if err != nil {
		return nil, err
	}
	opts := make([]read.QueryOptions, len(filters))
	for i := range filters {
		if opts[i], err = plainOptions(&filters[i]); err != nil {
			return nil, err
		}
	}
	if err := checkFilters(rq.pubkey, filters); err != nil {
		return nil, err
	}
	// ROUTING HOOK (50-windows.md §3): a request with a thread_window filter
	// is a thread-window batch and is recognised before anything else. Not
	// implemented yet: such filters are served below as plain reads.
	searches := 0
	for i := range filters {
		if filters[i].Search != nil {
			searches++
		}
	}
	if searches > 0 && searches < len(filters) {
		return nil, refuse(http.StatusBadRequest, msgMixedSearch)
	}
	rs, err := s.resolveScope(ctx, rq, filters)
	if err != nil {
		return nil, err
	}

	out := []byte{'['}
	seen := map[string]struct{}{}
	for i := range filters {
		f, ok := rs.narrow(filters[i])
		if !ok || f.MatchesNothing() || (f.Limit != nil && *f.Limit == 0) {
			continue
		}
		switch routeOf(&f) {
		case routeSearch:
			if read.SearchText(*f.Search) == "" {
				continue // empty search text: no events and no SQL (20-search.md §5)
			}
		case routeWindow:
			// ROUTING HOOK (50-windows.md): top_level / resolve_thread_roots
			// windows. Not implemented yet: served as a plain read.
		case routeLegacyThread:
		case routePlain:
		}
		var rows []read.Row
		if routeOf(&f) == routeSearch {
			if rows, err = s.search(ctx, rs, &f, i); err != nil {
				return nil, err
			}
		} else if routeOf(&f) == routeLegacyThread {
			tp, err := legacyThreadParams(&f)
			if err != nil {
				return nil, err
			}
			if rows, err = s.cfg.Reader.ThreadReplies(ctx, rs.sc, rs.acc, tp); err != nil {
				return nil, fmt.Errorf("thread read filter %d: %w", i, err)
			}
		} else if rows, err = s.cfg.Reader.Query(ctx, rs.sc, rs.acc, &f, opts[i]); err != nil {
			return nil, fmt.Errorf("query filter %d: %w", i, err)
		}
		for _, row := range rows {
			if _, dup := seen[row.Event.ID]; dup {
				continue
			}
			seen[row.Event.ID] = struct{}{}
			if len(out) > 1 {
				out = append(out, ',')
			}
			if row.JSON != nil {
				out = append(out, row.JSON...)
			} else {
				out = row.Event.AppendJSON(out)
			}
		}
	}
	return json.RawMessage(append(out, ']')), nil
}

// searchReader is the read engine's NIP-50 branch. A Reader without it
// serves search filters through Query.
type searchReader interface {
	Search(ctx context.Context, sc read.Scope, acc *read.Access, f *event.Filter, opt read.SearchOptions) ([]read.Row, error)
}

// searchOptions reads the bridge's search extensions from the raw filter
// (20-search.md §5): search_mode, else searchMode ("prefix" selects
// Prefix); page, else search_page, else searchPage (the first key present
// wins; a positive integer that fits in 32 bits, anything else is 1).
func searchOptions(f *event.Filter) read.SearchOptions {
	opt := read.SearchOptions{OnePage: true, Page: 1}
	for _, name := range []string{"search_mode", "searchMode"} {
		if raw, ok := f.Extra[name]; ok {
			var mode string
			if json.Unmarshal(raw, &mode) == nil && mode == "prefix" {
				opt.Mode = read.SearchPrefix
			}
			break
		}
	}
	for _, name := range []string{"page", "search_page", "searchPage"} {
		if raw, ok := f.Extra[name]; ok {
			var n json.Number
			if json.Unmarshal(raw, &n) == nil {
				if v, err := n.Int64(); err == nil && v > 0 && v <= 1<<31-1 {
					opt.Page = v
				}
			}
			break
		}
	}
	return opt
}

// search serves one search filter of /query: one FTS statement, one
// hydration, the acceptance checks of the read engine. A failure is logged
// here without the search text and answered 500.
func (s *Server) search(ctx context.Context, rs *readScope, f *event.Filter, i int) ([]read.Row, error) {
	sr, ok := s.cfg.Reader.(searchReader)
	if !ok {
		rows, err := s.cfg.Reader.Query(ctx, rs.sc, rs.acc, f, read.QueryOptions{})
		if err != nil {
			return nil, fmt.Errorf("search filter %d: %w", i, err)
		}
		return rows, nil
	}
	rows, err := sr.Search(ctx, rs.sc, rs.acc, f, searchOptions(f))
	if err != nil {
		return nil, fmt.Errorf("search filter %d (text length %d): %w", i, len(*f.Search), err)
	}
	return rows, nil
}
