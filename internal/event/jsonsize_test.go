package event

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJSONSize(t *testing.T) {
	t.Parallel()
	for name, e := range map[string]Event{
		"Empty":    {},
		"Negative": {CreatedAt: math.MinInt64, Kind: -7},
		"Escapes": {ID: "ab", PubKey: "cd", Sig: "ef", CreatedAt: 1751500200, Kind: 1,
			Content: "q\"b\\n\nr\rt\tb\bf\f\x01\x1f ü \xff€",
			Tags:    Tags{{}, {"e"}, {"p", "x\x00y", ""}, {"\xc3"}}},
		"NoTags": {Tags: Tags{}, Content: "hello", CreatedAt: 9, Kind: 30023},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, len(e.AppendJSON(nil)), e.JSONSize())
		})
	}
}

func FuzzJSONSize(f *testing.F) {
	f.Add("content", "tag", int64(1), 1)
	f.Add("\x00\"\\\xff", "\n", int64(-5), 40002)
	f.Fuzz(func(t *testing.T, content, tag string, at int64, kind int) {
		e := Event{Content: content, Tags: Tags{{tag, content}, {}}, CreatedAt: at, Kind: kind}
		require.Equal(t, len(e.AppendJSON(nil)), e.JSONSize())
	})
}
