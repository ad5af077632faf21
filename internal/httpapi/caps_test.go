package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/read"
)

// kindsFilter is a filter with kinds 1…n.
func kindsFilter(n int) string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = strconv.Itoa(i + 1)
	}
	return `{"kinds":[` + strings.Join(ks, ",") + `],"limit":1}`
}

// TestFilterCaps: the bridge's two read routes answer a filter at its cap
// and refuse one over it with 400 and the read door's exact text; NIP-11
// advertises the caps in force.
func TestFilterCaps(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("QueryAndCount", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		tags := func(n int) string {
			vs := make([]string, n)
			for i := range vs {
				vs[i] = `"t` + strconv.Itoa(i) + `"`
			}
			return `{"kinds":[1],"#t":[` + strings.Join(vs, ",") + `]}`
		}
		keys := func(n int) string {
			ks := make([]string, n)
			for i := range ks {
				ks[i] = `"#` + string(rune('i'+i)) + `":["x"]`
			}
			return `{"kinds":[1],` + strings.Join(ks, ",") + `}`
		}
		cases := []struct {
			name, at, over, msg string
		}{
			{"Kinds", kindsFilter(64), kindsFilter(65), `invalid: filter "kinds" has 65 values (maximum 64)`},
			{"TagValues", tags(1000), tags(1001), `invalid: filter "#t" has 1001 values (maximum 1000)`},
			{"TagKeys", keys(8), keys(9), `invalid: filter has 9 tag keys (maximum 8)`},
		}
		for _, tc := range cases {
			for _, route := range []string{"/query", "/count"} {
				res := b.signedPost(t, b.key, route, []byte("["+tc.at+"]"))
				require.Equal(t, http.StatusOK, res.status, "%s %s: %s", tc.name, route, res.body)
				res = b.signedPost(t, b.key, route, []byte(`[{"kinds":[1]},`+tc.over+"]"))
				require.Equal(t, http.StatusBadRequest, res.status, "%s %s: %s", tc.name, route, res.body)
				var body struct{ Error string }
				require.NoError(t, json.Unmarshal([]byte(res.body), &body))
				require.Equal(t, tc.msg, body.Error, "%s %s", tc.name, route)
			}
		}
	})

	t.Run("NIP11", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d, func(c *httpapi.Config) {
			c.Reader = read.New(read.Config{Pool: d.pool,
				Caps: read.Caps{MaxIDs: 11, MaxAuthors: 12, MaxKinds: 13, MaxTagValues: 14, MaxTagKeys: 15}})
			c.Settings.Filters.SubMaxIndexKeys, c.Settings.Filters.ConnMaxIndexKeys, c.Settings.Filters.ConnMaxFilterBytes = 16, 17, 18000
		})
		res := b.do(t, http.MethodGet, b.ta.Host, "/", nil, map[string]string{"Accept": nip11Accept})
		require.Equal(t, http.StatusOK, res.status)
		var doc struct{ Limitation map[string]any }
		require.NoError(t, json.Unmarshal([]byte(res.body), &doc))
		for key, want := range map[string]float64{
			"max_filter_ids": 11, "max_filter_authors": 12, "max_filter_kinds": 13, "max_filter_tag_values": 14,
			"max_filter_tag_keys": 15, "max_subscription_index_keys": 16, "max_connection_index_keys": 17,
			"max_connection_filter_bytes": 18000, "max_filters": 10, "max_limit": 1000,
		} {
			require.Equal(t, want, doc.Limitation[key], key)
		}
	})
}
