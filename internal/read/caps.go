package read

import (
	"slices"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Default filter caps (docs/OPERATIONS.md "Filter caps"); Config.Caps
// fields left zero take them.
const (
	DefaultMaxIDs       = 1000
	DefaultMaxAuthors   = 1000
	DefaultMaxKinds     = 64
	DefaultMaxTagValues = 1000
	DefaultMaxTagKeys   = 8
)

// Caps bound each filter of every read surface, so that no step after the
// door does work that grows past them: every array, and the distinct tag
// keys. "#h" is bounded by MaxExplicitChannels across the request instead
// of MaxTagValues.
type Caps struct {
	// MaxIDs bounds "ids" (BUZZ_FILTER_MAX_IDS).
	MaxIDs int
	// MaxAuthors bounds "authors" (BUZZ_FILTER_MAX_AUTHORS).
	MaxAuthors int
	// MaxKinds bounds "kinds" (BUZZ_FILTER_MAX_KINDS).
	MaxKinds int
	// MaxTagValues bounds each "#x" array but "#h" (BUZZ_FILTER_MAX_TAG_VALUES).
	MaxTagValues int
	// MaxTagKeys bounds the distinct "#x" keys of a filter
	// (BUZZ_FILTER_MAX_TAG_KEYS).
	MaxTagKeys int
}

// withDefaults fills the zero fields.
func (c Caps) withDefaults() Caps {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxIDs, DefaultMaxIDs)
	def(&c.MaxAuthors, DefaultMaxAuthors)
	def(&c.MaxKinds, DefaultMaxKinds)
	def(&c.MaxTagValues, DefaultMaxTagValues)
	def(&c.MaxTagKeys, DefaultMaxTagKeys)
	return c
}

// Caps returns the filter caps in force, for NIP-11.
func (e *Engine) Caps() Caps { return e.cfg.Caps }

// checkCaps refuses the first filter, in request order, with an array or a
// tag-key count over its cap; within a filter ids, authors, kinds, the tag
// key count, then each "#x" by name. It reads lengths only, so it costs
// the number of tag keys, never the number of values. which is the cap's
// label in buzz_filter_cap_refusals_total.
func (c Caps) checkCaps(filters []event.Filter) (ref *Refusal, which string) {
	for i := range filters {
		f := &filters[i]
		switch {
		case len(f.IDs) > c.MaxIDs:
			return refuse(CodeFilterCap, wire.FilterTooManyValues("ids", len(f.IDs), c.MaxIDs)), "ids"
		case len(f.Authors) > c.MaxAuthors:
			return refuse(CodeFilterCap, wire.FilterTooManyValues("authors", len(f.Authors), c.MaxAuthors)), "authors"
		case len(f.Kinds) > c.MaxKinds:
			return refuse(CodeFilterCap, wire.FilterTooManyValues("kinds", len(f.Kinds), c.MaxKinds)), "kinds"
		case len(f.Tags) > c.MaxTagKeys:
			return refuse(CodeFilterCap, wire.FilterTooManyTagKeys(len(f.Tags), c.MaxTagKeys)), "tag_keys"
		}
		var over []string
		for name, values := range f.Tags {
			if name != "h" && len(values) > c.MaxTagValues {
				over = append(over, name)
			}
		}
		if len(over) > 0 {
			name := slices.Min(over)
			return refuse(CodeFilterCap, wire.FilterTooManyValues("#"+name, len(f.Tags[name]), c.MaxTagValues)), "tag_values"
		}
	}
	return nil, ""
}
