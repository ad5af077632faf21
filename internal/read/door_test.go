package read_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// world is one community as a reader sees it: an open channel, a private
// channel the reader is not in, events in both and a global one, and a
// second community whose rows must never show.
type world struct {
	engine  *read.Engine
	cid     string
	reader  eventtest.Key
	other   eventtest.Key
	open    string
	private string
	inOpen  event.Event
	inPriv  event.Event
	global  event.Event
	foreign event.Event
}

func setup(t *testing.T) *world {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	return newWorld(t, pool)
}

func newWorld(t *testing.T, pool *pgxpool.Pool) *world {
	t.Helper()
	w := &world{engine: read.New(read.Config{Pool: pool}), reader: eventtest.NewKey(), other: eventtest.NewKey()}
	w.cid = fixture.Community(t, pool).ID
	w.open = fixture.Channel(t, pool, w.cid, w.other)
	w.private = fixture.Channel(t, pool, w.cid, w.other, fixture.Private())
	w.inOpen = fixture.Event(t, pool, w.cid, w.other, 9, eventtest.Channel(w.open), eventtest.Content("open"))
	w.inPriv = fixture.Event(t, pool, w.cid, w.other, 9, eventtest.Channel(w.private), eventtest.Content("private"))
	w.global = fixture.Event(t, pool, w.cid, w.other, 1, eventtest.Content("global"))
	foreign := fixture.Community(t, pool).ID
	w.foreign = fixture.Event(t, pool, foreign, w.other, 1, eventtest.Content("elsewhere"))
	return w
}

func (w *world) open2(t *testing.T, s read.Surface, filters ...string) (*read.Read, error) {
	t.Helper()
	fs := make([]event.Filter, len(filters))
	for i, raw := range filters {
		f, err := event.ParseFilter([]byte(raw))
		require.NoError(t, err, raw)
		fs[i] = f
	}
	return w.engine.Open(context.Background(), read.Request{
		Scope:   read.Scope{CommunityID: w.cid, Reader: w.reader.PubKey},
		Surface: s, Filters: fs,
	})
}

// rows runs a row read and returns the ids in the order handed over.
func (w *world) rows(t *testing.T, s read.Surface, filters ...string) []string {
	t.Helper()
	rd, err := w.open2(t, s, filters...)
	require.NoError(t, err)
	var ids []string
	require.NoError(t, rd.Rows(context.Background(), func(r read.Row) bool {
		var back event.Event
		require.NoError(t, json.Unmarshal(r.JSON, &back), "Row.JSON is the event")
		require.Equal(t, r.Event.ID, back.ID)
		ids = append(ids, r.Event.ID)
		return true
	}))
	return ids
}

func (w *world) count(t *testing.T, s read.Surface, filters ...string) int64 {
	t.Helper()
	rd, err := w.open2(t, s, filters...)
	require.NoError(t, err)
	n, err := rd.Count(context.Background())
	require.NoError(t, err)
	return n
}

var surfaces = map[string]read.Surface{
	"REQ": read.SurfaceREQ, "COUNT": read.SurfaceCOUNT, "Query": read.SurfaceQuery, "CountHTTP": read.SurfaceCountHTTP,
	"NEG": read.SurfaceNEG,
}

func manyChannels(n int) string {
	hs := make([]string, n)
	for i := range hs {
		hs[i] = `"00000000-0000-4000-8000-` + strings.Repeat("0", 8) + string(rune('a'+i%6)) + strings.Repeat("0", 3) + `"`
	}
	return `{"kinds":[9],"#h":[` + strings.Join(hs, ",") + `]}`
}

// TestRefusals is the table of every refusal the door decides, per
// surface: which one applies, with which code and exact text, and which
// wins when several could.
func TestRefusals(t *testing.T) {
	t.Parallel()
	w := setup(t)
	self := w.reader.PubKey
	cases := []struct {
		name    string
		filters []string
		// want maps a surface to its refusal; a surface missing from it serves the request.
		want map[string]*read.Refusal
	}{
		{"TooManyChannels", []string{manyChannels(read.MaxExplicitChannels + 1)}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels}, "COUNT": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels},
			"Query": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels}, "CountHTTP": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels},
		}},
		{"ChannelCapIsInclusive", []string{manyChannels(read.MaxExplicitChannels)}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeNotChannelMember, Reason: wire.MsgNotChannelMember},
		}},
		{"PGate", []string{`{"kinds":[1059]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeGated, Reason: wire.MsgPGateREQ}, "COUNT": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
			"Query": {Code: read.CodeGated, Reason: wire.MsgPGateCount}, "CountHTTP": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
		}},
		{"PGatePassesForSelf", []string{`{"kinds":[1059],"#p":["` + self + `"]}`}, nil},
		{"Engram", []string{`{"kinds":[30174]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeGated, Reason: wire.MsgEngram}, "COUNT": {Code: read.CodeGated, Reason: wire.MsgEngram},
			"Query": {Code: read.CodeGated, Reason: wire.MsgEngram}, "CountHTTP": {Code: read.CodeGated, Reason: wire.MsgEngram},
		}},
		{"EngramPassesForOwnAuthor", []string{`{"kinds":[30174],"authors":["` + self + `"]}`}, nil},
		{"AuthorOnly", []string{`{"kinds":[30300]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeGated, Reason: wire.MsgAuthorOnly}, "COUNT": {Code: read.CodeGated, Reason: wire.MsgAuthorOnly},
			"Query": {Code: read.CodeGated, Reason: wire.MsgAuthorOnly}, "CountHTTP": {Code: read.CodeGated, Reason: wire.MsgAuthorOnly},
		}},
		// A REQ whose every filter names a channel is a channel
		// subscription: gated only by channel access, never by the gates.
		{"ChannelSubscriptionIsNotGated", []string{`{"kinds":[1059],"#h":["` + w.open + `"]}`}, map[string]*read.Refusal{
			"COUNT": {Code: read.CodeGated, Reason: wire.MsgPGateCount}, "Query": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
			"CountHTTP": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
		}},
		{"NotChannelMember", []string{`{"kinds":[9],"#h":["` + w.private + `"]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeNotChannelMember, Reason: wire.MsgNotChannelMember},
		}},
		{"MixedSearch", []string{`{"search":"x"}`, `{"kinds":[1]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeMixedSearch, Reason: wire.MsgMixedSearch}, "Query": {Code: read.CodeMixedSearch, Reason: wire.MsgMixedSearch},
			"COUNT": {Code: read.CodeSearchInCount, Reason: wire.MsgSearchInCount}, "CountHTTP": {Code: read.CodeSearchInCount, Reason: wire.MsgSearchInCount},
			"NEG": {Code: read.CodeSearchInNeg, Reason: wire.MsgSearchInNeg},
		}},
		{"SearchInCount", []string{`{"search":"x"}`}, map[string]*read.Refusal{
			"COUNT": {Code: read.CodeSearchInCount, Reason: wire.MsgSearchInCount}, "CountHTTP": {Code: read.CodeSearchInCount, Reason: wire.MsgSearchInCount},
			"NEG": {Code: read.CodeSearchInNeg, Reason: wire.MsgSearchInNeg},
		}},
		{"SearchInNegAfterScope", []string{`{"search":"x","#h":["` + w.private + `"]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeNotChannelMember, Reason: wire.MsgNotChannelMember}, "NEG": {Code: read.CodeNotChannelMember, Reason: wire.MsgNotChannelMember},
			"COUNT": {Code: read.CodeSearchInCount, Reason: wire.MsgSearchInCount}, "CountHTTP": {Code: read.CodeSearchInCount, Reason: wire.MsgSearchInCount},
		}},
		// A search filter without kinds is judged as naming only the
		// searchable kinds: never gated, so the count refusal is the search one.
		{"GateBeforeSearchInCount", []string{`{"kinds":[1059],"search":"x"}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeGated, Reason: wire.MsgPGateREQ}, "Query": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
			"COUNT": {Code: read.CodeGated, Reason: wire.MsgPGateCount}, "CountHTTP": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
		}},
		{"CapBeforeGate", []string{`{"kinds":[1059]}`, manyChannels(read.MaxExplicitChannels + 1)}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels}, "COUNT": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels},
			"Query": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels}, "CountHTTP": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels},
		}},
		// The bridge's extension fields are read first, on /query only.
		{"BeforeIDShape", []string{manyChannels(read.MaxExplicitChannels + 1), `{"until":5,"before_id":"zz"}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels}, "COUNT": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels},
			"Query": {Code: read.CodeInvalidFilter, Reason: "before_id must be a 64-char hex event id"}, "CountHTTP": {Code: read.CodeTooManyChannels, Reason: wire.MsgTooManyChannels},
		}},
		{"BeforeIDNeedsUntil", []string{`{"kinds":[1],"before_id":"` + strings.Repeat("a", 64) + `"}`}, map[string]*read.Refusal{
			"Query": {Code: read.CodeInvalidFilter, Reason: "before_id requires until to be set"},
		}},
		// A legacy thread read on /query returns thread rows only: judged
		// as naming the thread kinds, so not gated.
		{"LegacyThreadIsNotGatedOnTheBridge", []string{`{"#e":["` + strings.Repeat("b", 64) + `"],"depth_limit":3}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeGated, Reason: wire.MsgPGateREQ}, "COUNT": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
		}},
		{"LegacyThreadWithGatedKinds", []string{`{"#e":["` + strings.Repeat("b", 64) + `"],"depth_limit":3,"kinds":[1059]}`}, map[string]*read.Refusal{
			"REQ": {Code: read.CodeGated, Reason: wire.MsgPGateREQ}, "COUNT": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
			"Query": {Code: read.CodeGated, Reason: wire.MsgPGateCount}, "CountHTTP": {Code: read.CodeGated, Reason: wire.MsgPGateCount},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for name, s := range surfaces {
				rd, err := w.open2(t, s, tc.filters...)
				want := tc.want[name]
				if neg, ok := tc.want["NEG"]; name == "NEG" && !ok {
					want = tc.want["REQ"] // a NEG-OPEN is refused what a REQ is
				} else if name == "NEG" {
					want = neg
				}
				if want == nil {
					require.NoError(t, err, name)
					require.NotNil(t, rd, name)
					continue
				}
				var ref *read.Refusal
				require.ErrorAs(t, err, &ref, name)
				require.Equal(t, *want, *ref, name)
				require.Nil(t, rd, name)
			}
		})
	}
}

func TestRefusalText(t *testing.T) {
	t.Parallel()
	for reason, text := range map[string]string{
		wire.MsgTooManyChannels:              "too many explicit channels",
		wire.MsgMixedSearch:                  "mixed search and non-search filters not supported",
		wire.MsgSearchInCount:                "search is not supported in COUNT",
		"before_id requires until to be set": "before_id requires until to be set",
	} {
		require.Equal(t, text, (&read.Refusal{Reason: reason}).Text())
	}
}

// TestScope checks, per surface, what the door lets a reader see: open
// channels and global events of its own community, never a private
// channel it is not in, never another community.
func TestScope(t *testing.T) {
	t.Parallel()
	w := setup(t)
	all := `{"kinds":[1,9]}`
	t.Run("Rows", func(t *testing.T) {
		t.Parallel()
		for _, s := range []read.Surface{read.SurfaceREQ, read.SurfaceQuery} {
			got := w.rows(t, s, all)
			require.ElementsMatch(t, []string{w.inOpen.ID, w.global.ID}, got, "surface %d", s)
		}
	})
	t.Run("Counts", func(t *testing.T) {
		t.Parallel()
		for _, s := range []read.Surface{read.SurfaceCOUNT, read.SurfaceCountHTTP} {
			require.EqualValues(t, 2, w.count(t, s, all), "surface %d", s)
		}
	})
	t.Run("NamedPrivateChannelYieldsNothing", func(t *testing.T) {
		t.Parallel()
		f := `{"kinds":[9],"#h":["` + w.private + `","` + w.open + `"]}`
		for _, s := range []read.Surface{read.SurfaceREQ, read.SurfaceQuery} {
			require.Equal(t, []string{w.inOpen.ID}, w.rows(t, s, f), "surface %d", s)
		}
		for _, s := range []read.Surface{read.SurfaceCOUNT, read.SurfaceCountHTTP} {
			require.EqualValues(t, 1, w.count(t, s, f), "surface %d", s)
		}
		only := `{"kinds":[9],"#h":["` + w.private + `"]}`
		require.Empty(t, w.rows(t, read.SurfaceQuery, only))
		require.Zero(t, w.count(t, read.SurfaceCOUNT, only))
		require.Zero(t, w.count(t, read.SurfaceCountHTTP, only))
	})
	t.Run("ChannelSubscriptionScope", func(t *testing.T) {
		t.Parallel()
		rd, err := w.open2(t, read.SurfaceREQ, `{"kinds":[9],"#h":["`+w.open+`","`+w.private+`"]}`, `{"#h":["`+w.open+`"],"kinds":[9]}`)
		require.NoError(t, err)
		require.Equal(t, []string{w.open}, rd.Channels)
		require.False(t, rd.Search)
		rd, err = w.open2(t, read.SurfaceREQ, `{"kinds":[9],"#h":["`+w.open+`"]}`, `{"kinds":[1]}`)
		require.NoError(t, err)
		require.Nil(t, rd.Channels, "a REQ with one filter without #h is global")
	})
	t.Run("SearchIsOneShot", func(t *testing.T) {
		t.Parallel()
		rd, err := w.open2(t, read.SurfaceREQ, `{"search":"open"}`)
		require.NoError(t, err)
		require.True(t, rd.Search)
	})
	t.Run("Deduplicated", func(t *testing.T) {
		t.Parallel()
		for _, s := range []read.Surface{read.SurfaceREQ, read.SurfaceQuery} {
			got := w.rows(t, s, `{"ids":["`+w.inOpen.ID+`"]}`, `{"kinds":[9]}`, `{"ids":["`+w.global.ID+`","`+w.inOpen.ID+`"]}`)
			require.Equal(t, []string{w.inOpen.ID, w.global.ID}, got, "filter order, each id once (surface %d)", s)
		}
	})
	t.Run("NoSQLForFiltersThatMatchNothing", func(t *testing.T) {
		t.Parallel()
		for _, s := range []read.Surface{read.SurfaceREQ, read.SurfaceQuery} {
			require.Empty(t, w.rows(t, s, `{"kinds":[]}`, `{"kinds":[1],"limit":0}`), "surface %d", s)
		}
		require.Zero(t, w.count(t, read.SurfaceCOUNT, `{"kinds":[]}`))
	})
}

// TestChannelSpelling: "#h" values are matched against stored h tags
// exactly (NIP-01), so a channel id spelled in upper case finds no event
// whose tag is lower case — on every surface alike, the COUNT(*) fast path
// included.
func TestChannelSpelling(t *testing.T) {
	t.Parallel()
	w := setup(t)
	upper := `{"kinds":[9],"#h":["` + strings.ToUpper(w.open) + `"]}`
	require.Empty(t, w.rows(t, read.SurfaceREQ, upper))
	require.Empty(t, w.rows(t, read.SurfaceQuery, upper))
	require.Zero(t, w.count(t, read.SurfaceCOUNT, upper))
	require.Zero(t, w.count(t, read.SurfaceCountHTTP, upper))
	lower := `{"kinds":[9],"#h":["` + w.open + `"]}`
	require.Equal(t, []string{w.inOpen.ID}, w.rows(t, read.SurfaceREQ, lower))
	require.EqualValues(t, 1, w.count(t, read.SurfaceCOUNT, lower))
}

// TestEmitStops: a false from emit ends the read at once.
func TestEmitStops(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, s := range []read.Surface{read.SurfaceREQ, read.SurfaceQuery} {
		rd, err := w.open2(t, s, `{"kinds":[1,9]}`)
		require.NoError(t, err)
		n := 0
		require.NoError(t, rd.Rows(context.Background(), func(read.Row) bool { n++; return false }))
		require.Equal(t, 1, n)
	}
}

// TestConfirmUncached: a reader added to a private channel a moment ago
// is served at once, although its cached access does not have the
// channel yet.
func TestConfirmUncached(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	w := newWorld(t, pool)
	require.Empty(t, w.rows(t, read.SurfaceQuery, `{"kinds":[9]}`, `{"kinds":[9],"#h":["`+w.private+`"]}`)[1:]) // caches the access set
	fixture.ChannelMember(t, pool, w.cid, w.private, w.reader, "member")
	got := w.rows(t, read.SurfaceQuery, `{"kinds":[9],"#h":["`+w.private+`"]}`)
	require.Equal(t, []string{w.inPriv.ID}, got)
	rd, err := w.open2(t, read.SurfaceREQ, `{"kinds":[9],"#h":["`+w.private+`"]}`)
	require.NoError(t, err)
	require.True(t, slices.Contains(rd.Channels, w.private))
}

// The membership cache metrics: a named channel found in the cached
// access set is a hit, one the uncached query had to confirm is a miss.
func TestMembershipCacheMetrics(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	m := metrics.New(nil)
	w := newWorld(t, pool)
	w.engine = read.New(read.Config{Pool: pool, Metrics: m})
	fixture.ChannelMember(t, pool, w.cid, w.private, w.reader, "member")
	w.rows(t, read.SurfaceQuery, `{"kinds":[9],"#h":["`+w.open+`"]}`)
	require.Equal(t, 1.0, testutil.ToFloat64(m.MembershipCacheHits), "the open channel is in the access set")
	require.Zero(t, testutil.ToFloat64(m.MembershipCacheMisses))
	nowhere := uuid.NewString()
	w.rows(t, read.SurfaceQuery, `{"kinds":[9],"#h":["`+w.private+`","`+nowhere+`"]}`)
	require.Equal(t, 2.0, testutil.ToFloat64(m.MembershipCacheHits), "the private channel the reader belongs to")
	require.Equal(t, 1.0, testutil.ToFloat64(m.MembershipCacheMisses), "an unknown channel is confirmed uncached")
}
