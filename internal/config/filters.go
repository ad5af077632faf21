package config

import "log/slog"

// Defaults of the filter caps (docs/OPERATIONS.md "Running a public relay",
// "Filter caps"). Each bounds work that grows with a client's filter.
const (
	DefaultFilterMaxIDs       = 1000
	DefaultFilterMaxAuthors   = 1000
	DefaultFilterMaxKinds     = 64
	DefaultFilterMaxTagValues = 1000
	DefaultFilterMaxTagKeys   = 8
	DefaultSubMaxIndexKeys    = 4096
	DefaultConnMaxIndexKeys   = 16384
	DefaultConnMaxFilterBytes = 262144
	maxFilterArrayCap         = 1000000
	maxFilterTagKeysCap       = 1000
	maxIndexKeysCap           = 10000000
	minConnFilterBytes        = 1024
	maxConnFilterBytes        = 1 << 30
	filterMaxKindsCap         = 65536
)

// FilterLimits are the caps on what one read filter, one subscription and
// one connection's subscriptions may ask of the relay. The array caps apply
// on every read surface (REQ, COUNT, POST /query, POST /count); the index
// and byte caps to WebSocket subscriptions only.
type FilterLimits struct {
	// MaxIDs bounds a filter's "ids" (BUZZ_FILTER_MAX_IDS), 1–1000000.
	// Default 1000.
	MaxIDs int
	// MaxAuthors bounds a filter's "authors" (BUZZ_FILTER_MAX_AUTHORS),
	// 1–1000000. Default 1000.
	MaxAuthors int
	// MaxKinds bounds a filter's "kinds" (BUZZ_FILTER_MAX_KINDS), 1–65536.
	// Default 64.
	MaxKinds int
	// MaxTagValues bounds each "#x" array of a filter except "#h", which
	// keeps its own cap of 128 channels (BUZZ_FILTER_MAX_TAG_VALUES),
	// 1–1000000. Default 1000.
	MaxTagValues int
	// MaxTagKeys bounds the distinct "#x" keys of one filter
	// (BUZZ_FILTER_MAX_TAG_KEYS), 1–1000. Default 8.
	MaxTagKeys int
	// SubMaxIndexKeys bounds the live index keys one subscription adds
	// (BUZZ_SUB_MAX_INDEX_KEYS), 1–10000000, at most ConnMaxIndexKeys.
	// Default 4096.
	SubMaxIndexKeys int
	// ConnMaxIndexKeys bounds the live index keys of one connection's
	// subscriptions together (BUZZ_CONN_MAX_INDEX_KEYS), 1–10000000.
	// Default 16384.
	ConnMaxIndexKeys int
	// ConnMaxFilterBytes bounds the filters one connection's live
	// subscriptions retain, measured as their JSON encoding
	// (BUZZ_CONN_MAX_FILTER_BYTES), 1024–1073741824. Default 262144.
	ConnMaxFilterBytes int
}

// filterLimits reads the filter caps.
func (l *loader) filterLimits() FilterLimits {
	f := FilterLimits{
		MaxIDs:             l.integer("BUZZ_FILTER_MAX_IDS", DefaultFilterMaxIDs, 1, maxFilterArrayCap),
		MaxAuthors:         l.integer("BUZZ_FILTER_MAX_AUTHORS", DefaultFilterMaxAuthors, 1, maxFilterArrayCap),
		MaxKinds:           l.integer("BUZZ_FILTER_MAX_KINDS", DefaultFilterMaxKinds, 1, filterMaxKindsCap),
		MaxTagValues:       l.integer("BUZZ_FILTER_MAX_TAG_VALUES", DefaultFilterMaxTagValues, 1, maxFilterArrayCap),
		MaxTagKeys:         l.integer("BUZZ_FILTER_MAX_TAG_KEYS", DefaultFilterMaxTagKeys, 1, maxFilterTagKeysCap),
		SubMaxIndexKeys:    l.integer("BUZZ_SUB_MAX_INDEX_KEYS", DefaultSubMaxIndexKeys, 1, maxIndexKeysCap),
		ConnMaxIndexKeys:   l.integer("BUZZ_CONN_MAX_INDEX_KEYS", DefaultConnMaxIndexKeys, 1, maxIndexKeysCap),
		ConnMaxFilterBytes: l.integer("BUZZ_CONN_MAX_FILTER_BYTES", DefaultConnMaxFilterBytes, minConnFilterBytes, maxConnFilterBytes),
	}
	if l.err == nil && f.SubMaxIndexKeys > f.ConnMaxIndexKeys {
		l.fail("BUZZ_SUB_MAX_INDEX_KEYS", "must not exceed BUZZ_CONN_MAX_INDEX_KEYS (%d > %d)",
			f.SubMaxIndexKeys, f.ConnMaxIndexKeys)
	}
	return f
}

// LogValue is the caps as logged at start.
func (f FilterLimits) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("max_ids", f.MaxIDs),
		slog.Int("max_authors", f.MaxAuthors),
		slog.Int("max_kinds", f.MaxKinds),
		slog.Int("max_tag_values", f.MaxTagValues),
		slog.Int("max_tag_keys", f.MaxTagKeys),
		slog.Int("sub_max_index_keys", f.SubMaxIndexKeys),
		slog.Int("conn_max_index_keys", f.ConnMaxIndexKeys),
		slog.Int("conn_max_filter_bytes", f.ConnMaxFilterBytes),
	)
}
