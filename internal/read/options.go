package read

import (
	"encoding/json"
	"strings"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/search"
	"github.com/buzz-relay/buzz/internal/window"
)

// Texts of the bridge's extension-field refusals (docs/PROTOCOL.md §8.4).
const (
	msgBadBeforeID        = "before_id must be a 64-char hex event id"
	msgBeforeIDNeedsUntil = "before_id requires until to be set"
)

// filterOptions are one /query filter's extension fields.
type filterOptions struct {
	// beforeID, with the filter's until, makes a keyset cursor: rows with
	// created_at < until, or created_at = until and id > beforeID.
	beforeID string
	// window is the filter's channel-mode or summary-recovery request.
	window windowRequest
}

// parsePlainOptions reads before_id (docs/PROTOCOL.md §8.4).
func parsePlainOptions(f *event.Filter) (filterOptions, error) {
	raw, ok := f.Extra["before_id"]
	if !ok {
		return filterOptions{}, nil
	}
	var id string
	if json.Unmarshal(raw, &id) != nil || !event.IsHexAnyCase64(id) {
		return filterOptions{}, refuse(CodeInvalidFilter, msgBadBeforeID)
	}
	if f.Until == nil {
		return filterOptions{}, refuse(CodeInvalidFilter, msgBeforeIDNeedsUntil)
	}
	return filterOptions{beforeID: strings.ToLower(id)}, nil
}

// route is the read that serves one /query filter (docs/PROTOCOL.md §8.4, first
// match wins).
type route int

const (
	routePlain route = iota
	routeSearch
	// routeResolveRoots: resolve_thread_roots true (docs/NIP-CW.md §4).
	routeResolveRoots
	// routeChannelWindow: top_level true (docs/NIP-CW.md §3).
	routeChannelWindow
	// routeLegacyThread: exactly one "#e" root and an integer depth_limit.
	routeLegacyThread
)

func routeOf(f *event.Filter) route {
	switch {
	case f.Search != nil:
		return routeSearch
	case window.IsResolve(f):
		return routeResolveRoots
	case window.IsChannel(f):
		return routeChannelWindow
	case len(f.Tags["e"]) == 1 && event.IsHexAnyCase64(f.Tags["e"][0]) && isJSONInteger(f.Extra["depth_limit"]):
		return routeLegacyThread
	}
	return routePlain
}

// parseLegacyThread reads the legacy thread read of docs/PROTOCOL.md §8.4: the root
// from the single #e, depth_limit, limit (default 100, at most 500) and the
// cursor fields thread_cursor / thread_cursor_id (or their camelCase
// spellings). kinds does not restrict reply kinds on this path. channels
// is the filter's channel scope (named: it has "#h").
func parseLegacyThread(f *event.Filter, channels []string, named bool) (threadParams, error) {
	p := threadParams{Root: strings.ToLower(f.Tags["e"][0]), IncludeAux: isTrue(f.Extra["include_aux"])}
	if named {
		p.Channels = channels
	}
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
			return p, refuse(CodeInvalidFilter, "invalid filters: "+name+" must be an integer")
		}
		v, err := n.Int64()
		if err != nil {
			return p, refuse(CodeInvalidFilter, "invalid filters: "+name+" must be an integer")
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
			return p, refuse(CodeInvalidFilter, "invalid filters: "+name+" must be a 64-char hex event id")
		}
		p.CursorID = strings.ToLower(id)
	}
	return p, nil
}

// parseSearchOptions reads the bridge's search extensions
// (docs/PROTOCOL.md §12.7): search_mode, else searchMode ("prefix" selects Prefix); page, else
// search_page, else searchPage (the first key present wins; a positive
// integer that fits in 32 bits, anything else is 1).
func parseSearchOptions(f *event.Filter) searchOptions {
	opt := searchOptions{OnePage: true, Page: 1}
	for _, name := range []string{"search_mode", "searchMode"} {
		if raw, ok := f.Extra[name]; ok {
			var mode string
			if json.Unmarshal(raw, &mode) == nil && mode == "prefix" {
				opt.Mode = search.Prefix
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

// isTrue reports whether raw is the JSON literal true.
func isTrue(raw json.RawMessage) bool {
	var b bool
	return raw != nil && json.Unmarshal(raw, &b) == nil && b
}

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
