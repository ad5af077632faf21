package read_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
)

// capFilter returns a filter whose field holds n values.
func capFilter(field string, n int) string {
	vals := make([]string, n)
	for i := range vals {
		switch field {
		case "ids", "authors":
			vals[i] = fmt.Sprintf(`"%064x"`, i)
		case "kinds":
			vals[i] = strconv.Itoa(i + 1)
		default:
			vals[i] = `"v` + strconv.Itoa(i) + `"`
		}
	}
	kinds := `"kinds":[1],`
	if field == "kinds" {
		kinds = ""
	}
	return `{` + kinds + `"` + field + `":[` + strings.Join(vals, ",") + `],"limit":1}`
}

// tagKeysFilter returns a filter with n distinct "#x" keys.
func tagKeysFilter(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = `"#` + string(rune('i'+i)) + `":["x"]`
	}
	return `{"kinds":[1],` + strings.Join(keys, ",") + `}`
}

// TestCaps checks every filter cap at its value and one over, on every
// surface, with the defaults and with a configured engine: at the cap the
// door opens the read, one over it refuses with CodeFilterCap, the exact
// text naming the field as the client spelled it, and counts the refusal.
func TestCaps(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	w := newWorld(t, pool)
	small := read.New(read.Config{Pool: pool,
		Caps: read.Caps{MaxIDs: 2, MaxAuthors: 3, MaxKinds: 4, MaxTagValues: 5, MaxTagKeys: 2}})
	cases := []struct {
		name    string
		engine  *read.Engine
		at      string
		over    string
		refusal string
		label   string
	}{
		{"IDsDefault", w.engine, capFilter("ids", 1000), capFilter("ids", 1001),
			`invalid: filter "ids" has 1001 values (maximum 1000)`, "ids"},
		{"AuthorsDefault", w.engine, capFilter("authors", 1000), capFilter("authors", 1001),
			`invalid: filter "authors" has 1001 values (maximum 1000)`, "authors"},
		{"KindsDefault", w.engine, capFilter("kinds", 64), capFilter("kinds", 65),
			`invalid: filter "kinds" has 65 values (maximum 64)`, "kinds"},
		{"TagValuesDefault", w.engine, capFilter("#t", 1000), capFilter("#t", 1001),
			`invalid: filter "#t" has 1001 values (maximum 1000)`, "tag_values"},
		{"TagKeysDefault", w.engine, tagKeysFilter(8), tagKeysFilter(9),
			`invalid: filter has 9 tag keys (maximum 8)`, "tag_keys"},
		{"IDs", small, capFilter("ids", 2), capFilter("ids", 3), `invalid: filter "ids" has 3 values (maximum 2)`, "ids"},
		{"Authors", small, capFilter("authors", 3), capFilter("authors", 4),
			`invalid: filter "authors" has 4 values (maximum 3)`, "authors"},
		{"Kinds", small, capFilter("kinds", 4), capFilter("kinds", 5), `invalid: filter "kinds" has 5 values (maximum 4)`, "kinds"},
		{"TagValues", small, capFilter("#p", 5), capFilter("#p", 6), `invalid: filter "#p" has 6 values (maximum 5)`, "tag_values"},
		{"TagValuesOddName", small, capFilter("#Zz", 5), capFilter("#Zz", 6),
			`invalid: filter "#Zz" has 6 values (maximum 5)`, "tag_values"},
		{"TagKeys", small, tagKeysFilter(2), tagKeysFilter(3), `invalid: filter has 3 tag keys (maximum 2)`, "tag_keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for sname, s := range surfaces {
				open := func(raw string) error {
					f, err := event.ParseFilter([]byte(raw))
					require.NoError(t, err)
					_, err = tc.engine.Open(context.Background(), read.Request{
						Scope:   read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey},
						Surface: s, Filters: []event.Filter{{Kinds: []int{1}}, f},
					})
					return err
				}
				require.NoError(t, open(tc.at), sname)
				err := open(tc.over)
				var ref *read.Refusal
				require.True(t, errors.As(err, &ref), "%s: %v", sname, err)
				require.Equal(t, read.CodeFilterCap, ref.Code, sname)
				require.Equal(t, tc.refusal, ref.Reason, sname)
			}
		})
	}
	t.Run("HashHKeepsItsOwnCap", func(t *testing.T) {
		t.Parallel()
		f, err := event.ParseFilter([]byte(manyChannels(6)))
		require.NoError(t, err)
		_, err = small.Open(context.Background(), read.Request{
			Scope:   read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey},
			Surface: read.SurfaceCOUNT, Filters: []event.Filter{f},
		})
		require.NoError(t, err, "six #h values are within MaxExplicitChannels, whatever MaxTagValues says")
	})
	t.Run("FirstFilterFirstField", func(t *testing.T) {
		t.Parallel()
		var fs []event.Filter
		for _, raw := range []string{capFilter("kinds", 4), capFilter("#b", 6), capFilter("#a", 6)} {
			f, err := event.ParseFilter([]byte(raw))
			require.NoError(t, err)
			fs = append(fs, f)
		}
		fs[2].Kinds = []int{1, 2, 3, 4, 5}
		_, err := small.Open(context.Background(), read.Request{
			Scope:   read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey},
			Surface: read.SurfaceREQ, Filters: fs,
		})
		require.EqualError(t, err, `invalid: filter "#b" has 6 values (maximum 5)`)
		fs[1].Tags["a"] = fs[1].Tags["b"]
		_, err = small.Open(context.Background(), read.Request{
			Scope:   read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey},
			Surface: read.SurfaceREQ, Filters: fs,
		})
		require.EqualError(t, err, `invalid: filter "#a" has 6 values (maximum 5)`, "tags in name order")
	})
	t.Run("Counted", func(t *testing.T) {
		t.Parallel()
		e := read.New(read.Config{Pool: pool, Metrics: metrics.New(nil), Caps: read.Caps{MaxKinds: 1}})
		require.Equal(t, read.Caps{MaxIDs: 1000, MaxAuthors: 1000, MaxKinds: 1, MaxTagValues: 1000, MaxTagKeys: 8}, e.Caps())
		mm := metrics.New(nil)
		e = read.New(read.Config{Pool: pool, Metrics: mm, Caps: read.Caps{MaxKinds: 1}})
		f, err := event.ParseFilter([]byte(capFilter("kinds", 2)))
		require.NoError(t, err)
		_, err = e.Open(context.Background(), read.Request{
			Scope:   read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey},
			Surface: read.SurfaceQuery, Filters: []event.Filter{f},
		})
		require.Error(t, err)
		require.InDelta(t, 1, testutil.ToFloat64(mm.FilterCapRefusals.WithLabelValues("kinds")), 0)
		require.InDelta(t, 0, testutil.ToFloat64(mm.FilterCapRefusals.WithLabelValues("ids")), 0)
	})
}
