package search

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func TestBuildStartsWithCommunity(t *testing.T) {
	t.Parallel()
	scopes := []ChannelScope{Any(), Channels(nil), Channels([]string{"a"}), ChannelsOrChannelLess([]string{"a"}), ChannelsOrChannelLess(nil), ChannelLessOnly()}
	for _, sc := range scopes {
		for _, mode := range []Mode{FullText, Prefix} {
			for mask := range 16 {
				q := Query{Community: "c", Scope: sc, Mode: mode}
				if mask&1 != 0 {
					q.Kinds = []int{0}
				}
				if mask&2 != 0 {
					q.Authors = [][]byte{make([]byte, 32)}
				}
				if mask&4 != 0 {
					q.Since = ptr(int64(1))
				}
				if mask&8 != 0 {
					q.Until = ptr(int64(2))
				}
				st := build(&q, "jm", 1, 100, DefaultRankWindow, nil)
				_, where, ok := strings.Cut(st.sql, "\nWHERE ")
				require.True(t, ok, st.sql)
				require.True(t, strings.HasPrefix(where, "community_id = $1\n"), st.sql)
				require.Equal(t, "c", st.args[0])
				require.Equal(t, "jm", st.args[1])
			}
		}
	}
}

func TestNormalizeText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", NormalizeText(""))
	require.Equal(t, "", NormalizeText(" \t\n\u00a0\u2003"))
	require.Equal(t, "", NormalizeText("\x00"))
	require.Equal(t, "", NormalizeText(" \x00 \x00 "))
	require.Equal(t, "foo bar", NormalizeText("foo\x00bar"))
	long := strings.Repeat("é", 5000)
	require.Equal(t, TextCap, len([]rune(NormalizeText(long))))
	require.Equal(t, int64(1), ClampPage(0))
	require.Equal(t, int64(MaxPage), ClampPage(4_000_000_000))
	require.Equal(t, int64(DefaultPerPage), ClampPerPage(0))
	require.Equal(t, int64(MaxPerPage), ClampPerPage(10_000))
}

func TestSearch(t *testing.T) {
	t.Parallel()

	t.Run("CommunityIsolation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.newCommunity(t)
		b.insert(t, row{kind: 9, content: "isolation token"}, row{community: other, kind: 9, content: "isolation token"})
		idsB := insertRows(t, b.pool, other, row{kind: 9, content: "isolation token again"})
		got := b.search(t, Query{Community: other, Text: "isolation", Scope: Any()})
		require.Len(t, got, 2)
		require.Contains(t, got, idsB[0])
		mine := b.search(t, Query{Text: "isolation", Scope: Any()})
		require.Len(t, mine, 1)
		require.NotContains(t, got, mine[0])

		before := b.tr.count()
		_, err := b.s.Search(context.Background(), Query{Text: "isolation", Scope: Any()})
		require.ErrorIs(t, err, ErrNoCommunity)
		require.Equal(t, before, b.tr.count(), "a zero community issues no SQL")
	})

	t.Run("FullTextAndPrefix", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.insert(t,
			row{kind: 9, content: "project planning milestone"},
			row{kind: 9, content: "project kickoff notes"},
			row{kind: 9, content: "projectile planning distractor"})
		require.Empty(t, b.search(t, Query{Text: "pro", Scope: Any()}))
		require.ElementsMatch(t, ids, b.search(t, Query{Text: "pro", Scope: Any(), Mode: Prefix}))
		require.ElementsMatch(t, ids, b.search(t, Query{Text: "project", Scope: Any(), Mode: Prefix}), "projectile starts with project")
		require.Equal(t, ids[:1], b.search(t, Query{Text: "project pla", Scope: Any(), Mode: Prefix}))
		require.Equal(t, ids[:1], b.search(t, Query{Text: "project pl", Scope: Any(), Mode: Prefix}))
		require.Equal(t, ids[:1], b.search(t, Query{Text: "planning milestone", Scope: Any()}))
		require.Empty(t, b.search(t, Query{Text: "planning -milestone project", Scope: Any()}))
		require.Equal(t, ids[2:], b.search(t, Query{Text: `"projectile planning"`, Scope: Any()}))
	})

	t.Run("PunctuationAndInjection", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.insert(t, row{kind: 9, content: "operators ' : & | ( ) ! alpha beta marker"})
		require.Equal(t, ids, b.search(t, Query{Text: "operators ' : & | ( ) ! alpha be", Scope: Any(), Mode: Prefix}))
		require.Empty(t, b.search(t, Query{Text: "' & |", Scope: Any(), Mode: Prefix}))
		require.Empty(t, b.search(t, Query{Text: "' : & |", Scope: Any()}))
		require.Equal(t, ids, b.search(t, Query{Text: "alpha !", Scope: Any(), Mode: Prefix}), "a last token without lexemes gets no :*")
		require.Empty(t, b.search(t, Query{Text: "'); DROP TABLE events; --", Scope: Any(), Mode: Prefix}))
		require.Empty(t, b.search(t, Query{Text: "'); DROP TABLE events; --", Scope: Any()}))
		require.Equal(t, ids, b.search(t, Query{Text: "marker", Scope: Any()}), "events survived")
	})

	t.Run("EmptyNulAndLongText", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.insert(t, row{kind: 9, content: "foo bar search text"},
			row{kind: 9, content: strings.Repeat("y ", 2100) + "tailtoken"})
		before := b.tr.count()
		for _, q := range []string{"", "   ", "\x00"} {
			res, err := b.s.Search(context.Background(), Query{Community: b.community, Text: q, Scope: Any(), Page: 7})
			require.NoError(t, err)
			require.Empty(t, res.Hits)
			require.Equal(t, int64(7), res.Page)
		}
		require.Equal(t, before, b.tr.count(), "empty text issues no SQL")
		require.Equal(t, ids[:1], b.search(t, Query{Text: "foo\x00bar", Scope: Any()}))
		for _, mode := range []Mode{FullText, Prefix} {
			require.Empty(t, b.search(t, Query{Text: strings.Repeat("x", 10_000), Scope: Any(), Mode: mode}))
		}
		// "absenttoken" starts at code point 4097 of the query text and is in
		// no event: only a cut before it lets the query match ids[1], whose
		// terms are y and tailtoken. Without the cap both modes find nothing.
		q := strings.Repeat("y ", TextCap/2) + "absenttoken"
		require.Equal(t, TextCap, len([]rune(strings.Repeat("y ", TextCap/2))))
		for _, mode := range []Mode{FullText, Prefix} {
			require.Equal(t, ids[1:], b.search(t, Query{Text: q, Scope: Any(), Mode: mode}), "the text was cut before the token")
		}
		// A token that ends within the first TextCap code points is kept, so
		// the cap is not smaller than TextCap either.
		within := strings.Repeat("y ", TextCap/2-6) + "absenttoken"
		require.LessOrEqual(t, len([]rune(within)), TextCap)
		for _, mode := range []Mode{FullText, Prefix} {
			require.Empty(t, b.search(t, Query{Text: within, Scope: Any(), Mode: mode}), "a token inside the cap counts")
		}
		require.Equal(t, ids[1:], b.search(t, Query{Text: "y tailtoken", Scope: Any()}))
		require.Empty(t, b.search(t, Query{Text: "foo tailtoken", Scope: Any()}))
		require.Equal(t, ids[:1], b.search(t, Query{Text: strings.Repeat(" ", 4100) + "foo", Scope: Any()}), "leading space is trimmed before the cap")
	})

	t.Run("PagingClamps", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rows := make([]row, 520)
		for i := range rows {
			rows[i] = row{kind: 9, content: "clamp", at: baseTime + int64(i)}
		}
		b.insert(t, rows...)
		ctx := context.Background()
		res, err := b.s.Search(ctx, Query{Community: b.community, Text: "clamp", Scope: Any()})
		require.NoError(t, err)
		require.Len(t, res.Hits, 100)
		res, err = b.s.Search(ctx, Query{Community: b.community, Text: "clamp", Scope: Any(), PerPage: 10_000})
		require.NoError(t, err)
		require.Len(t, res.Hits, 500)
		p0, err := b.s.Search(ctx, Query{Community: b.community, Text: "clamp", Scope: Any(), Page: 0, PerPage: 7})
		require.NoError(t, err)
		p1, err := b.s.Search(ctx, Query{Community: b.community, Text: "clamp", Scope: Any(), Page: 1, PerPage: 7})
		require.NoError(t, err)
		require.Equal(t, int64(1), p0.Page)
		require.Equal(t, hitIDs(p1.Hits), hitIDs(p0.Hits))
		res, err = b.s.Search(ctx, Query{Community: b.community, Text: "clamp", Scope: Any(), Page: 4_000_000_000})
		require.NoError(t, err)
		require.Equal(t, int64(1000), res.Page)
		require.Empty(t, res.Hits)
		res, err = b.s.Search(ctx, Query{Community: b.community, Text: "clamp", Scope: Any(), Page: 2, PerPage: 500})
		require.NoError(t, err)
		require.Len(t, res.Hits, 20, "the last page is short")
	})

	t.Run("Ordering", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		filler := strings.Repeat("filler ", 60)
		dense := b.insert(t, row{kind: 9, content: "tok tok tok", at: baseTime - 100})
		sparse := b.insert(t, row{kind: 9, content: "tok " + filler, at: baseTime})
		require.Equal(t, append(dense, sparse...), b.search(t, Query{Text: "tok", Scope: Any()}))

		older := b.insert(t, row{kind: 9, content: "same rank", at: baseTime - 10})
		newer := b.insert(t, row{kind: 9, content: "same rank", at: baseTime})
		require.Equal(t, append(newer, older...), b.search(t, Query{Text: "same rank", Scope: Any()}))

		lo, hi := make([]byte, 32), make([]byte, 32)
		lo[0], hi[0] = 0x01, 0xf0
		// hi inserted first, so insertion order cannot explain the result.
		b.insert(t, row{kind: 9, content: "tie break", at: baseTime, id: hi}, row{kind: 9, content: "tie break", at: baseTime, id: lo})
		require.Equal(t, []string{hex.EncodeToString(lo), hex.EncodeToString(hi)}, b.search(t, Query{Text: "tie break", Scope: Any()}))
	})

	t.Run("InclusiveBounds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.insert(t, row{kind: 9, content: "bound", at: baseTime - 10000},
			row{kind: 9, content: "bound", at: baseTime - 5000}, row{kind: 9, content: "bound", at: baseTime})
		mid := baseTime - 5000
		require.Equal(t, ids[1:2], b.search(t, Query{Text: "bound", Scope: Any(), Since: &mid, Until: &mid}))
	})

	t.Run("SoftDeleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.insert(t, row{kind: 9, content: "tripwire"})
		require.Equal(t, ids, b.search(t, Query{Text: "tripwire", Scope: Any()}), "found before the delete")
		id, _ := hex.DecodeString(ids[0])
		_, err := b.pool.Exec(context.Background(), "UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2", b.community, id)
		require.NoError(t, err)
		require.Empty(t, b.search(t, Query{Text: "tripwire", Scope: Any()}))
	})

	t.Run("ChannelScope", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, c := randUUID(t, b.pool), randUUID(t, b.pool)
		ids := b.insert(t, row{kind: 9, content: "scope", channel: a}, row{kind: 9, content: "scope", channel: c}, row{kind: 9, content: "scope"})
		require.Equal(t, ids[:1], b.search(t, Query{Text: "scope", Scope: Channels([]string{a})}))
		require.ElementsMatch(t, []string{ids[0], ids[2]}, b.search(t, Query{Text: "scope", Scope: ChannelsOrChannelLess([]string{a})}))
		require.Equal(t, ids[2:], b.search(t, Query{Text: "scope", Scope: ChannelLessOnly()}))
		require.Equal(t, ids[2:], b.search(t, Query{Text: "scope", Scope: ChannelsOrChannelLess(nil)}))
		require.Empty(t, b.search(t, Query{Text: "scope", Scope: Channels([]string{})}))
		require.Empty(t, b.search(t, Query{Text: "scope"}), "the zero scope matches nothing")
		require.Len(t, b.search(t, Query{Text: "scope", Scope: Any()}), 3)
	})

	t.Run("KindsAndAuthors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.insert(t, row{kind: 9, content: "narrow"}, row{kind: 45001, content: "narrow"})
		require.Equal(t, ids[1:], b.search(t, Query{Text: "narrow", Scope: Any(), Kinds: []int{45001}}))
		var pub []byte
		id, _ := hex.DecodeString(ids[0])
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT pubkey FROM events WHERE id = $1", id).Scan(&pub))
		require.Equal(t, ids[:1], b.search(t, Query{Text: "narrow", Scope: Any(), Authors: [][]byte{pub}}))
	})

	t.Run("ExactShortName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		jm := b.insert(t, row{kind: 0, content: `{"name":"jm"}`, at: baseTime - 100})
		for i, n := range []string{"jma", "jmbravo", "jmcharlie", "jmdelta"} {
			b.insert(t, row{kind: 0, content: `{"name":"` + n + `"}`, at: baseTime + int64(i)})
		}
		got := b.search(t, Query{Text: "jm", Scope: Any(), Kinds: []int{0}, Mode: Prefix, PerPage: 3})
		require.Len(t, got, 3)
		require.Equal(t, jm[0], got[0])
		alice := b.insert(t, row{kind: 0, content: `{"name":"alice","nip05":"alice@buzz.app"}`})
		require.Equal(t, alice, b.search(t, Query{Text: "alice", Scope: Any(), Kinds: []int{0}}))
		require.Equal(t, alice, b.search(t, Query{Text: "alice@buzz.app", Scope: Any(), Kinds: []int{0}}))
	})

	t.Run("StatementTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insert(t, row{kind: 9, content: "blocked"})
		s := New(Config{Pool: b.pool, StatementTimeout: 50 * time.Millisecond})
		ctx := context.Background()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		_, err = s.Search(ctx, Query{Community: b.community, Text: "blocked", Scope: Any()})
		require.ErrorContains(t, err, "database error: ")
		require.ErrorContains(t, err, "statement timeout")
	})

	t.Run("ConnectionReusableAfterFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insert(t, row{kind: 9, content: "again"})
		ctx := context.Background()
		cfg := b.pool.Config().Copy()
		cfg.MaxConns, cfg.MinConns = 1, 0
		one, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		defer one.Close()
		s := New(Config{Pool: one, StatementTimeout: 50 * time.Millisecond})
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		q := Query{Community: b.community, Text: "again", Scope: Any()}
		_, err = s.Search(ctx, q)
		require.ErrorContains(t, err, "statement timeout")
		require.NoError(t, tx.Rollback(ctx))
		// The pool's only connection failed inside the search transaction;
		// it must come back clean (not "current transaction is aborted").
		// The second search is given time enough for a loaded machine: the
		// pool is the same, so it runs on that connection.
		res, err := New(Config{Pool: one, StatementTimeout: 10 * time.Second}).Search(ctx, q)
		require.NoError(t, err)
		require.Len(t, res.Hits, 1)
		conn, err := one.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus(), "the search transaction was committed")
	})

	t.Run("ConcurrencyCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insert(t, row{kind: 9, content: "capped"})
		s := New(Config{Pool: b.pool, MaxConcurrent: 1})
		q := Query{Community: b.community, Text: "capped", Scope: Any()}
		ctx := context.Background()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		first := make(chan error, 1)
		go func() {
			_, err := s.Search(ctx, q)
			first <- err
		}()
		require.Eventually(t, func() bool { return len(s.slots) == 1 }, 5*time.Second, 5*time.Millisecond)
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = s.Search(short, q)
		require.ErrorContains(t, err, "wait for a search slot")
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, <-first, "the first search runs once the lock is gone")
		res, err := s.Search(ctx, q)
		require.NoError(t, err, "the slot is free again")
		require.Len(t, res.Hits, 1)
	})
}
