package event

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Filter is a NIP-01 filter. A nil slice means the field is absent; Kinds set
// to a non-nil empty slice matches nothing. Empty IDs, Authors and tag lists
// are treated as absent. Hex values are stored lowercase.
type Filter struct {
	IDs     []string
	Authors []string
	Kinds   []int
	Since   *int64
	Until   *int64
	Limit   *int
	// Tags maps a tag name (without '#') to the values that match it.
	Tags map[string][]string
	// Search is the NIP-50 query when present.
	Search *string
	// Extra holds fields NIP-01 does not define (HTTP bridge extensions such
	// as before_id or depth_limit), keyed by name, raw JSON values.
	Extra map[string]json.RawMessage
}

// TagValues returns the values of the "#name" constraint, or nil.
func (f *Filter) TagValues(name string) []string { return f.Tags[name] }

// HasKinds reports whether the filter constrains kinds at all.
func (f *Filter) HasKinds() bool { return f.Kinds != nil }

// MatchesNothing reports whether the filter can never match: kinds: [].
func (f *Filter) MatchesNothing() bool { return f.Kinds != nil && len(f.Kinds) == 0 }

// CanMatchKind reports whether the filter could match an event of kind k
// (no kinds constraint, or k listed).
func (f *Filter) CanMatchKind(k int) bool { return f.Kinds == nil || slices.Contains(f.Kinds, k) }

// CanMatchAny reports whether the filter could match some kind of set.
func (f *Filter) CanMatchAny(set KindSet) bool {
	if f.Kinds == nil {
		return true
	}
	for _, k := range f.Kinds {
		if set.Has(k) {
			return true
		}
	}
	return false
}

// Matches reports whether ev matches every constraint of the filter except
// limit and search. channel is the event's stored channel id ("" for none):
// a "#h" constraint falls back to it when the event carries no h tag.
func (f *Filter) Matches(ev *Event, channel string) bool {
	if f.MatchesNothing() {
		return false
	}
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, ev.ID) {
		return false
	}
	if len(f.Authors) > 0 && !slices.Contains(f.Authors, ev.PubKey) {
		return false
	}
	if f.Kinds != nil && !slices.Contains(f.Kinds, ev.Kind) {
		return false
	}
	if f.Since != nil && ev.CreatedAt < *f.Since {
		return false
	}
	if f.Until != nil && ev.CreatedAt > *f.Until {
		return false
	}
	for name, values := range f.Tags {
		if len(values) == 0 {
			continue
		}
		if name == "h" && ev.Tags.First("h") == nil {
			if channel == "" || !slices.Contains(values, channel) {
				return false
			}
			continue
		}
		if !tagMatch(ev.Tags, name, values) {
			return false
		}
	}
	return true
}

func tagMatch(tags Tags, name string, values []string) bool {
	for _, t := range tags {
		if len(t) > 1 && t[0] == name && slices.Contains(values, t[1]) {
			return true
		}
	}
	return false
}

// ParseFilter decodes one JSON filter object and checks its field types:
// ids/authors 64-hex strings (either case, stored lowercase), kinds integers
// 0–65535, since/until/limit non-negative integers, "#x" arrays of strings,
// search a string. Unknown fields land in Extra. Errors are *ParseError.
func ParseFilter(b []byte) (Filter, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return Filter{}, parseErr("filter must be a JSON object")
	}
	var f Filter
	for key, v := range raw {
		var err error
		switch {
		case key == "ids":
			f.IDs, err = parseHexList(v, "ids")
		case key == "authors":
			f.Authors, err = parseHexList(v, "authors")
		case key == "kinds":
			f.Kinds, err = parseKinds(v)
		case key == "since" || key == "until":
			var n int64
			n, err = parseNonNeg(v, key)
			if err == nil {
				if key == "since" {
					f.Since = &n
				} else {
					f.Until = &n
				}
			}
		case key == "limit":
			var n int64
			n, err = parseNonNeg(v, key)
			if err == nil {
				l := int(min(n, 1<<31-1))
				f.Limit = &l
			}
		case key == "search":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return Filter{}, parseErr("search must be a string")
			}
			f.Search = &s
		case len(key) > 1 && key[0] == '#':
			var vals []string
			if json.Unmarshal(v, &vals) != nil || vals == nil {
				return Filter{}, parseErr("%s must be an array of strings", key)
			}
			if f.Tags == nil {
				f.Tags = map[string][]string{}
			}
			f.Tags[key[1:]] = vals
		default:
			if f.Extra == nil {
				f.Extra = map[string]json.RawMessage{}
			}
			f.Extra[key] = v
		}
		if err != nil {
			return Filter{}, err
		}
	}
	return f, nil
}

func parseHexList(v json.RawMessage, field string) ([]string, error) {
	var vals []string
	if json.Unmarshal(v, &vals) != nil || vals == nil {
		return nil, parseErr("%s must be an array of 64-character hex strings", field)
	}
	for i, s := range vals {
		if !IsHexAnyCase64(s) {
			return nil, parseErr("%s must be an array of 64-character hex strings", field)
		}
		vals[i] = strings.ToLower(s)
	}
	return vals, nil
}

func parseKinds(v json.RawMessage) ([]int, error) {
	var nums []json.Number
	if json.Unmarshal(v, &nums) != nil || nums == nil {
		return nil, parseErr("kinds must be an array of integers between 0 and 65535")
	}
	out := make([]int, 0, len(nums))
	for _, n := range nums {
		k, err := parseUint(n, 65535)
		if err != nil {
			return nil, parseErr("kinds must be an array of integers between 0 and 65535")
		}
		out = append(out, int(k))
	}
	return out, nil
}

func parseNonNeg(v json.RawMessage, field string) (int64, error) {
	var n json.Number
	if json.Unmarshal(v, &n) != nil {
		return 0, parseErr("%s must be a non-negative integer", field)
	}
	x, err := parseUint(n, 1<<62)
	if err != nil {
		return 0, parseErr("%s must be a non-negative integer", field)
	}
	return x, nil
}

// MarshalJSON encodes the filter; ParseFilter of the output yields an equal filter.
func (f Filter) MarshalJSON() ([]byte, error) { return f.AppendJSON(nil), nil }

// AppendJSON appends the filter's JSON object to b, keys in a stable order.
func (f *Filter) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	key := func(k string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = AppendString(b, k)
		b = append(b, ':')
	}
	strs := func(vals []string) {
		b = append(b, '[')
		for i, v := range vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, v)
		}
		b = append(b, ']')
	}
	if f.IDs != nil {
		key("ids")
		strs(f.IDs)
	}
	if f.Authors != nil {
		key("authors")
		strs(f.Authors)
	}
	if f.Kinds != nil {
		key("kinds")
		b = append(b, '[')
		for i, k := range f.Kinds {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(k), 10)
		}
		b = append(b, ']')
	}
	if f.Since != nil {
		key("since")
		b = strconv.AppendInt(b, *f.Since, 10)
	}
	if f.Until != nil {
		key("until")
		b = strconv.AppendInt(b, *f.Until, 10)
	}
	if f.Limit != nil {
		key("limit")
		b = strconv.AppendInt(b, int64(*f.Limit), 10)
	}
	if f.Search != nil {
		key("search")
		b = AppendString(b, *f.Search)
	}
	names := make([]string, 0, len(f.Tags))
	for n := range f.Tags {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		key("#" + n)
		strs(f.Tags[n])
	}
	extras := make([]string, 0, len(f.Extra))
	for n := range f.Extra {
		extras = append(extras, n)
	}
	sort.Strings(extras)
	for _, n := range extras {
		key(n)
		b = append(b, compactJSON(f.Extra[n])...)
	}
	return append(b, '}')
}

func compactJSON(v json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return []byte("null")
	}
	return buf.Bytes()
}

// CanMatchAnyListed reports whether the filter's kinds explicitly name a
// member of set (false when kinds is absent).
func (f *Filter) CanMatchAnyListed(set KindSet) bool {
	for _, k := range f.Kinds {
		if set.Has(k) {
			return true
		}
	}
	return false
}
