package search

import (
	"bytes"
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// windowRow is one inserted match and what decides its place: its rank
// class (how often the word occurs; ts_rank_cd's default normalisation
// ignores length, so more occurrences rank higher), its time and its id.
type windowRow struct {
	id    string
	times int
	at    int64
}

// rankOrder sorts rows as docs/PROTOCOL.md §12.4 orders a window: rank, then newest,
// then id ascending.
func rankOrder(rows []windowRow) []string {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b windowRow) int {
		if a.times != b.times {
			return b.times - a.times
		}
		if a.at != b.at {
			return int(b.at - a.at)
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].id
	}
	return out
}

// newestFirst sorts rows as the window is chosen: newest, then id ascending.
func newestFirst(rows []windowRow) []windowRow {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b windowRow) int {
		if a.at != b.at {
			return int(b.at - a.at)
		}
		return strings.Compare(a.id, b.id)
	})
	return s
}

// insertWindowRows inserts n matches of "common" in channel (kind 9): pairs
// share a second, so the id tie-break is exercised, and the rank class
// cycles through 1, 2 and 3 occurrences. The oldest rows are the densest,
// so ranking every match would put them first.
func insertWindowRows(t *testing.T, b *testBundle, channel string, n int, from int64) []windowRow {
	t.Helper()
	out := make([]windowRow, n)
	for i := range n {
		times := 1 + i%3
		if i < n/4 {
			times = 5
		}
		content := strings.TrimSpace(strings.Repeat("common ", times) + "filler text")
		at := from + int64(i/2)
		id := b.insert(t, row{kind: 9, content: content, channel: channel, at: at})[0]
		out[i] = windowRow{id: id, times: times, at: at}
	}
	return out
}

func TestRankWindow(t *testing.T) {
	t.Parallel()

	t.Run("NewestWRankedAndPaged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := New(Config{Pool: b.pool, RankWindow: 100})
		require.Equal(t, 100, s.RankWindow())
		ctx := context.Background()
		chanA, chanB := randUUID(t, b.pool), randUUID(t, b.pool)
		from := baseTime - 10_000
		rows := insertWindowRows(t, b, chanA, 150, from)
		newest := newestFirst(rows)
		window, older := newest[:100], newest[100:]

		// Newer matches the filter excludes must not take places in the
		// window: another channel, another kind, soft-deleted rows, another
		// community. Each of them alone would fill it.
		late := from + 1000
		for i := range 100 {
			b.insert(t, row{kind: 9, content: "common common common common common common", channel: chanB, at: late + int64(i)})
			b.insert(t, row{kind: 45001, content: "common common common common common common", channel: chanA, at: late + int64(i)})
			insertRows(t, b.pool, "", row{community: b.newCommunityOnce(t), kind: 9,
				content: "common common common common common common", channel: chanA, at: late + int64(i)})
		}
		deleted := make([]row, 100)
		for i := range deleted {
			deleted[i] = row{kind: 9, content: "common common common common common common", channel: chanA, at: late + int64(i)}
		}
		delIDs := b.insert(t, deleted...)
		for _, h := range delIDs {
			id, _ := hex.DecodeString(h)
			_, err := b.pool.Exec(ctx, "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", b.community, id)
			require.NoError(t, err)
		}

		q := Query{Community: b.community, Text: "common", Scope: Channels([]string{chanA}), Kinds: []int{9}, PerPage: 500}
		res, err := s.Search(ctx, q)
		require.NoError(t, err)
		require.Equal(t, rankOrder(window), hitIDs(res.Hits), "the newest 100 matches, by rank, then newest, then id")
		for i := 1; i < len(res.Hits); i++ {
			require.GreaterOrEqual(t, res.Hits[i-1].Rank, res.Hits[i].Rank)
		}

		// Pages walk the window and end.
		var walked []string
		for page := int64(1); ; page++ {
			q.Page, q.PerPage = page, 30
			res, err := s.Search(ctx, q)
			require.NoError(t, err)
			if len(res.Hits) == 0 {
				require.Equal(t, int64(5), page, "30+30+30+10, then an empty page")
				break
			}
			walked = append(walked, hitIDs(res.Hits)...)
		}
		require.Equal(t, rankOrder(window), walked)

		// until reaches the older matches: the next window back in time.
		q.Page, q.PerPage = 1, 500
		q.Until = ptr(window[len(window)-1].at - 1)
		res, err = s.Search(ctx, q)
		require.NoError(t, err)
		require.Equal(t, rankOrder(older), hitIDs(res.Hits))

		// The default window holds every one of these matches.
		q.Until = nil
		res, err = New(Config{Pool: b.pool}).Search(ctx, q)
		require.NoError(t, err)
		require.Equal(t, rankOrder(rows), hitIDs(res.Hits))
	})

	t.Run("OlderThanTheRecentSpan", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := New(Config{Pool: b.s.cfg.Pool, RankWindow: 100}) // traced
		chanA := randUUID(t, b.pool)
		old := time.Now().Add(-RecentSpan - 40*24*time.Hour).Unix()
		oldRows := insertWindowRows(t, b, chanA, 90, old)
		// An OR takes the recent-span path (no single lexeme is required,
		// so no day keys); "absentword" matches nothing.
		q := Query{Text: "common or absentword", Scope: Channels([]string{chanA}), PerPage: 500}
		before := b.tr.fts()
		require.Equal(t, rankOrder(oldRows), b.searchWith(t, s, q), "nothing in the recent span: the whole filter")
		require.Equal(t, 2, b.tr.fts()-before, "the recent span, then the whole filter")

		recent := insertWindowRows(t, b, chanA, 60, baseTime-500)
		window := append(slices.Clone(recent), newestFirst(oldRows)[:40]...)
		require.Equal(t, rankOrder(window), b.searchWith(t, s, q), "a recent span short of W is not the window")

		more := insertWindowRows(t, b, chanA, 40, baseTime-200)
		before = b.tr.fts()
		require.Equal(t, rankOrder(append(recent, more...)), b.searchWith(t, s, q), "a full recent span is the window")
		require.Equal(t, 1, b.tr.fts()-before, "one statement when the recent span fills the window")

		// A since inside the recent span needs no second bound.
		before = b.tr.fts()
		q.Since = ptr(baseTime - 300)
		require.Equal(t, rankOrder(more), b.searchWith(t, s, q))
		require.Equal(t, 1, b.tr.fts()-before)
	})

	t.Run("EqualSecondsCutByID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := New(Config{Pool: b.pool, RankWindow: 100})
		rows := make([]row, 101)
		ids := make([]string, len(rows))
		for i := range rows {
			id := randBytes(32)
			rows[i] = row{kind: 9, content: "tied", at: baseTime, id: id}
			ids[i] = hex.EncodeToString(id)
		}
		b.insert(t, rows...)
		slices.Sort(ids)
		got := b.searchWith(t, s, Query{Text: "tied", Scope: Any(), PerPage: 500})
		require.Equal(t, ids[:100], got, "same rank and second: the window keeps the lowest ids, in id order")
		last, _ := hex.DecodeString(ids[100])
		for _, h := range got {
			id, _ := hex.DecodeString(h)
			require.Negative(t, bytes.Compare(id, last))
		}
	})

	t.Run("Clamped", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, MinRankWindow, New(Config{RankWindow: 5}).RankWindow())
		require.Equal(t, MaxRankWindow, New(Config{RankWindow: 1_000_000}).RankWindow())
		require.Equal(t, DefaultRankWindow, New(Config{}).RankWindow())
	})
}

// searchWith runs q on s in the bundle's community and returns hit ids.
func (b *testBundle) searchWith(t *testing.T, s *Searcher, q Query) []string {
	t.Helper()
	if q.Community == "" {
		q.Community = b.community
	}
	res, err := s.Search(context.Background(), q)
	require.NoError(t, err)
	return hitIDs(res.Hits)
}

// newCommunityOnce returns one second community per bundle.
func (b *testBundle) newCommunityOnce(t *testing.T) string {
	t.Helper()
	if b.other == "" {
		b.other = b.newCommunity(t)
	}
	return b.other
}

// fts counts the search statements the tracer has seen.
func (tr *tracer) fts() int { return tr.containing("ts_rank_cd(") }

// containing counts the statements the tracer has seen that contain part.
func (tr *tracer) containing(part string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, q := range tr.sql {
		if strings.Contains(q, part) {
			n++
		}
	}
	return n
}

func TestRecentFrom(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	from, ok := recentFrom(&Query{}, now)
	require.True(t, ok)
	require.Equal(t, now.Add(-RecentSpan).Unix(), from.Unix())
	from, ok = recentFrom(&Query{Until: ptr(int64(1_700_000_000))}, now)
	require.True(t, ok)
	require.Equal(t, int64(1_700_000_000)-int64(RecentSpan/time.Second), from.Unix(), "the span ends at until")
	_, ok = recentFrom(&Query{Since: ptr(now.Add(-time.Hour).Unix())}, now)
	require.False(t, ok, "a since inside the span bounds it already")
	_, ok = recentFrom(&Query{Since: ptr(now.Add(-RecentSpan - time.Hour).Unix())}, now)
	require.True(t, ok)
	st := build(&Query{Community: "c", Scope: Any()}, "x", 1, 100, 100, &from)
	require.Contains(t, st.sql, "\n  AND created_at >= $3\nORDER BY created_at DESC, id\nLIMIT $4) AS candidates")
}
