package search

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDayKeys proves the day-key path (buildDays) returns exactly the page
// of the plain statement (build without a recent bound, which reads every
// match) for the same query, over matches spread across every span, the
// branch older than the spans, deletions, kinds, channels, authors and
// another community's copies of the same words; that it is the path taken;
// and that a window filled by the newest span never runs the older ones.
func TestDayKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	s := New(Config{Pool: b.s.cfg.Pool, RankWindow: 100}) // traced
	chA, chB := randUUID(t, b.pool), randUUID(t, b.pool)
	other := b.newCommunityOnce(t)
	now := baseTime
	contents := []string{"alpha", "alpha alpha beta", "alpha gamma", "beta alpha delta", "alpha beta beta"}
	var rows []row
	add := func(r row) { rows = append(rows, r) }
	for day := range int64(46) { // three a day: the spans and beyond
		for i := range int64(3) {
			at := now - day*secondsPerDay - i*3600
			n := int(day*3 + i)
			r := row{kind: []int{9, 40002}[n%2], content: contents[n%len(contents)], at: at}
			switch n % 3 {
			case 0:
				r.channel = chA
			case 1:
				r.channel = chB
			}
			add(r)
		}
	}
	for day := int64(120); day < 131; day++ { // the old branch
		add(row{kind: 9, content: contents[day%int64(len(contents))], channel: chA, at: now - day*secondsPerDay})
	}
	ids := b.insert(t, rows...)
	for i := 0; i < len(rows); i++ { // the same words in another community
		insertRows(t, b.pool, other, row{kind: 9, content: rows[i].content, at: rows[i].at})
	}
	_, err := b.pool.Exec(ctx, `UPDATE events SET deleted_at = now() WHERE id = ANY($1::bytea[])`,
		[][]byte{hexID(t, ids[4]), hexID(t, ids[40]), hexID(t, ids[145])})
	require.NoError(t, err)
	var author []byte
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT pubkey FROM events WHERE id = $1", hexID(t, ids[7])).Scan(&author))

	plain := func(q Query) []Hit {
		t.Helper()
		text := NormalizeText(q.Text)
		st := build(&q, text, ClampPage(q.Page), ClampPerPage(q.PerPage), s.cfg.RankWindow, nil)
		hits, err := queryHits(ctx, b.pool, st)
		require.NoError(t, err)
		return hits
	}
	day := func(d int64) *int64 { v := now - d*secondsPerDay; return &v }
	cases := []Query{
		{Text: "alpha", Scope: Any(), PerPage: 40},
		{Text: "alpha", Scope: Any(), PerPage: 40, Page: 2},
		{Text: "alpha", Scope: Any(), PerPage: 40, Page: 3},
		{Text: "alpha", Scope: Any(), PerPage: 100},
		{Text: "alpha beta", Scope: Any(), PerPage: 100},
		{Text: `"alpha beta"`, Scope: Any(), PerPage: 100},
		{Text: "alpha -beta", Scope: Any(), PerPage: 100},
		{Text: "gamma", Scope: Any(), PerPage: 100},
		{Text: "alpha", Scope: Any(), PerPage: 100, Since: day(5)},
		{Text: "alpha", Scope: Any(), PerPage: 100, Since: day(20)},
		{Text: "alpha", Scope: Any(), PerPage: 100, Since: day(125)},
		{Text: "alpha", Scope: Any(), PerPage: 100, Until: day(10)},
		{Text: "alpha", Scope: Any(), PerPage: 100, Until: day(40), Since: day(122)},
		{Text: "alpha", Scope: Any(), PerPage: 100, Until: day(125)},
		{Text: "alpha", Scope: Any(), PerPage: 100, Kinds: []int{40002}},
		{Text: "alpha", Scope: Channels([]string{chA}), PerPage: 100},
		{Text: "alpha", Scope: ChannelsOrChannelLess([]string{chB}), PerPage: 100},
		{Text: "alpha", Scope: ChannelLessOnly(), PerPage: 100},
		{Text: "alpha", Scope: Any(), PerPage: 100, Authors: [][]byte{author}},
	}
	for i, q := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, strings.ReplaceAll(q.Text, " ", "_")), func(t *testing.T) {
			q.Community = b.community
			want := plain(q)
			before := b.tr.dayStatements()
			res, err := s.Search(ctx, q)
			require.NoError(t, err)
			require.Equal(t, 1, b.tr.dayStatements()-before, "the day-key statement ran")
			require.Equal(t, want, res.Hits, "the same page as the statement that reads every match")
			if q.Until == nil || *q.Until > now-100*secondsPerDay {
				require.NotEmpty(t, res.Hits)
			}
		})
	}

	t.Run("NoEventInBounds", func(t *testing.T) {
		before := b.tr.fts()
		res, err := s.Search(ctx, Query{Community: b.community, Text: "alpha", Scope: Any(), Until: day(400)})
		require.NoError(t, err)
		require.Empty(t, res.Hits)
		require.Equal(t, 0, b.tr.fts()-before, "no search statement when the community has no event in bounds")
	})

	t.Run("NewestSpanFillsTheWindow", func(t *testing.T) {
		dense := make([]row, 120)
		for i := range dense {
			dense[i] = row{kind: 9, content: "densely packed", at: now + 60 + int64(i)}
		}
		b.insert(t, dense...)
		// A newer event that no search can match (kind 1 has no search
		// column) does not move the anchor.
		b.insert(t, row{kind: 1, content: "densely", at: now + 90*secondsPerDay})
		q := Query{Community: b.community, Text: "densely", Scope: Any(), PerPage: 100}
		res, err := s.Search(ctx, q)
		require.NoError(t, err)
		require.Equal(t, plain(q), res.Hits)
		plan, err := s.Explain(ctx, q)
		require.NoError(t, err)
		require.Contains(t, plan, "search_day_matches")
		// The second span, the third and the older branch never run.
		require.GreaterOrEqual(t, strings.Count(plan, "(never executed)"), 3, plan)
	})
}

func hexID(t *testing.T, h string) []byte {
	t.Helper()
	out, err := hex.DecodeString(h)
	require.NoError(t, err)
	return out
}

// TestDayKeysMatchSQL checks that the keys the relay probes are the keys
// migration 0010 indexes: same community prefix, same day rounding (also
// before 1970 and at midnight), same lexeme.
func TestDayKeysMatchSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prefix, ok := communityKeyPrefix(b.community)
	require.True(t, ok)
	for _, sec := range []int64{0, -1, -86400, -86401, 86399, 86400, baseTime, 4102444800} {
		var got []string
		require.NoError(t, b.pool.QueryRow(context.Background(),
			"SELECT search_day_keys($1::uuid, to_timestamp($2), to_tsvector('simple', 'Word'))",
			b.community, sec).Scan(&got))
		require.Equal(t, dayKeys(prefix, dayOf(sec), dayOf(sec), "word"), got, "at %d", sec)
	}
	_, ok = communityKeyPrefix("not-a-uuid")
	require.False(t, ok)
}

func TestRequiredLexeme(t *testing.T) {
	t.Parallel()
	for tree, want := range map[string]string{
		"'alpha'":                      "alpha",
		"'alpha' & 'beta'":             "alpha",
		"'be' & 'alphabet'":            "alphabet",
		"'alpha' <-> 'beta'":           "alpha",
		"( 'ab' <2> 'cde' ) & 'f'":     "cde",
		"'it''s' & 'x'":                "it's",
		"'über' & 'ca'":                "über",
		"'a' | 'b'":                    "",
		"!'a' & 'b'":                   "",
		"T":                            "",
		"'open":                        "",
		"'a':*":                        "",
		"'a' <x> 'b'":                  "",
		"":                             "",
		"'a' & ( 'b' | 'c' )":          "",
		"'alpha' <-> 'beta' & 'gamma'": "alpha",
	} {
		got, ok := requiredLexeme(tree)
		require.Equal(t, want != "", ok, tree)
		require.Equal(t, want, got, tree)
	}
	require.Equal(t, int64(-1), dayOf(-1))
	require.Equal(t, int64(0), dayOf(86399))
	require.Equal(t, int64(1), dayOf(86400))
}

// TestDayKeysSkipAWordInMostRows shows that a word the planner's
// statistics put in most rows of the anchor's partition is searched
// without day keys (walkDensity), with the same page.
func TestDayKeysSkipAWordInMostRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rows := make([]row, 400)
	for i := range rows {
		content := "hyper filler"
		if i%40 == 0 {
			content = "hyper scarce"
		}
		rows[i] = row{kind: 9, content: content, at: baseTime - int64(i)*60}
	}
	b.insert(t, rows...)
	_, err := b.pool.Exec(ctx, "ANALYZE events")
	require.NoError(t, err)
	s := New(Config{Pool: b.s.cfg.Pool, RankWindow: 100}) // traced, statistics read after ANALYZE
	for _, c := range []struct {
		text     string
		viaDays  bool
		wantHits int
	}{{"hyper", false, 100}, {"scarce", true, 10}} {
		q := Query{Community: b.community, Text: c.text, Scope: Any(), PerPage: 100}
		before := b.tr.dayStatements()
		res, err := s.Search(ctx, q)
		require.NoError(t, err)
		require.Len(t, res.Hits, c.wantHits)
		want, err := queryHits(ctx, b.pool, build(&q, c.text, 1, 100, 100, nil))
		require.NoError(t, err)
		require.Equal(t, want, res.Hits, c.text)
		require.Equal(t, c.viaDays, b.tr.dayStatements() > before, "%s: day keys used", c.text)
	}
}

// dayStatements counts the day-key statements the pool has sent.
func (tr *tracer) dayStatements() int { return tr.containing("search_day_matches(") }
