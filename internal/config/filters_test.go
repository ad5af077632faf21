package config

import (
	"bytes"
	"log/slog"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var defaultFilterLimits = FilterLimits{
	MaxIDs: 1000, MaxAuthors: 1000, MaxKinds: 64, MaxTagValues: 1000, MaxTagKeys: 8,
	SubMaxIndexKeys: 4096, ConnMaxIndexKeys: 16384, ConnMaxFilterBytes: 262144,
}

// Each filter cap takes its bound and refuses one past it, naming itself.
func TestFilterLimits(t *testing.T) {
	t.Parallel()
	bounds := []struct {
		variable string
		lo, hi   int
		field    func(FilterLimits) int
	}{
		{"BUZZ_FILTER_MAX_IDS", 1, 1000000, func(f FilterLimits) int { return f.MaxIDs }},
		{"BUZZ_FILTER_MAX_AUTHORS", 1, 1000000, func(f FilterLimits) int { return f.MaxAuthors }},
		{"BUZZ_FILTER_MAX_KINDS", 1, 65536, func(f FilterLimits) int { return f.MaxKinds }},
		{"BUZZ_FILTER_MAX_TAG_VALUES", 1, 1000000, func(f FilterLimits) int { return f.MaxTagValues }},
		{"BUZZ_FILTER_MAX_TAG_KEYS", 1, 1000, func(f FilterLimits) int { return f.MaxTagKeys }},
		{"BUZZ_SUB_MAX_INDEX_KEYS", 1, 10000000, func(f FilterLimits) int { return f.SubMaxIndexKeys }},
		{"BUZZ_CONN_MAX_INDEX_KEYS", 1, 10000000, func(f FilterLimits) int { return f.ConnMaxIndexKeys }},
		{"BUZZ_CONN_MAX_FILTER_BYTES", 1024, 1 << 30, func(f FilterLimits) int { return f.ConnMaxFilterBytes }},
	}
	for _, b := range bounds {
		t.Run(b.variable, func(t *testing.T) {
			t.Parallel()
			env := func(v int) []string {
				kv := []string{b.variable, strconv.Itoa(v)}
				if b.variable == "BUZZ_SUB_MAX_INDEX_KEYS" { // at most the connection cap
					kv = append(kv, "BUZZ_CONN_MAX_INDEX_KEYS", "10000000")
				}
				if b.variable == "BUZZ_CONN_MAX_INDEX_KEYS" {
					kv = append(kv, "BUZZ_SUB_MAX_INDEX_KEYS", "1")
				}
				return kv
			}
			for _, v := range []int{b.lo, b.hi} {
				c, warnings, err := load(t, env(v)...)
				require.NoError(t, err)
				require.Empty(t, warnings)
				require.Equal(t, v, b.field(c.Filters))
			}
			for _, v := range []int{b.lo - 1, b.hi + 1} {
				_, _, err := load(t, env(v)...)
				var ce *Error
				require.ErrorAs(t, err, &ce)
				require.Equal(t, b.variable, ce.Variable)
			}
		})
	}
	t.Run("SubAtMostConn", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_SUB_MAX_INDEX_KEYS", "500", "BUZZ_CONN_MAX_INDEX_KEYS", "500")
		require.NoError(t, err)
		require.Equal(t, 500, c.Filters.SubMaxIndexKeys)
		_, _, err = load(t, "BUZZ_SUB_MAX_INDEX_KEYS", "501", "BUZZ_CONN_MAX_INDEX_KEYS", "500")
		require.EqualError(t, err, "invalid BUZZ_SUB_MAX_INDEX_KEYS: must not exceed BUZZ_CONN_MAX_INDEX_KEYS (501 > 500)")
	})
	t.Run("Logged", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_FILTER_MAX_KINDS", "65")
		require.NoError(t, err)
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config loaded", slog.Any("config", c))
		require.Contains(t, buf.String(), `"filters":{"max_ids":1000,"max_authors":1000,"max_kinds":65,`)
		require.Contains(t, buf.String(), `"conn_max_filter_bytes":262144}`)
	})
}
