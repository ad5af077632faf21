package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

// TestEventRows: the wire JSON built from the columns is byte for byte
// the JSON of the decoded event, for tags and contents that need every
// kind of escape, and the tags are decoded only on request.
func TestEventRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	key := eventtest.NewKey()
	tricky := []string{"plain", `say "hi"`, `back\slash`, "tab\tnew\nline\rcr", "\b\f", "\x01\x1f\x7f",
		"ünïcødé ✓ 🎉", "\u2028\u2029", "<b>&amp;</b>", "", " spaced , [\"]", "/slash/", `\u0041`}
	var want []event.Event
	for i, s := range tricky {
		want = append(want, fixture.Event(t, b.tx, b.a, key, 1, eventtest.At(int64(1_700_000_000+i)),
			eventtest.Tag("t", s), eventtest.Tag(s, s, s), eventtest.Tag("single"), eventtest.Content(s)))
	}
	want = append(want, fixture.Event(t, b.tx, b.a, key, 1, eventtest.At(1_600_000_000))) // no tags at all
	rows, err := b.s.EventRows(ctx, store.EventQueryParams{CommunityID: b.a, Filter: &event.Filter{}, Limit: 100})
	require.NoError(t, err)
	require.Len(t, rows, len(want))
	byID := map[string]event.Event{}
	for _, ev := range want {
		byID[ev.ID] = ev
	}
	decoded, err := b.s.EventQuery(ctx, store.EventQueryParams{CommunityID: b.a, Filter: &event.Filter{}, Limit: 100})
	require.NoError(t, err)
	for i := range rows {
		r := &rows[i]
		ev, ok := byID[r.Event.ID]
		require.True(t, ok, r.Event.ID)
		require.Equal(t, string(ev.AppendJSON(nil)), string(r.JSON), "the stored event's wire JSON")
		require.Equal(t, string(decoded[i].Event.AppendJSON(nil)), string(r.JSON), "what the decoding read encodes")
		require.Nil(t, r.Event.Tags, "tags are decoded on request only")
		require.Equal(t, ev.PubKey, r.Event.PubKey)
		require.Equal(t, ev.Sig, r.Event.Sig)
		require.Equal(t, ev.Content, r.Event.Content)
		require.Equal(t, ev.CreatedAt, r.Event.CreatedAt)
		require.NoError(t, r.DecodeTags())
		require.Equal(t, len(ev.Tags), len(r.Event.Tags))
		for j := range ev.Tags {
			require.Equal(t, []string(ev.Tags[j]), []string(r.Event.Tags[j]))
		}
	}

	t.Run("TagsPostgreSQLNeverPrintsCompact", func(t *testing.T) {
		// A null element (never written by ingest) takes the decoding path
		// and comes out as the decoding read encoded it.
		odd := want[0]
		_, err := b.tx.Exec(ctx, `UPDATE events SET tags = '[["x", null], ["y"]]' WHERE community_id = $1 AND id = $2`,
			b.a, unhex(t, odd.ID))
		require.NoError(t, err)
		rows, err := b.s.EventRows(ctx, store.EventQueryParams{CommunityID: b.a,
			Filter: &event.Filter{IDs: []string{odd.ID}}, Limit: 1})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		odd.Tags = event.Tags{{"x", ""}, {"y"}}
		require.Equal(t, string(odd.AppendJSON(nil)), string(rows[0].JSON))
		require.Equal(t, `[["x",""],["y"]]`, string(rows[0].RawTags))
		require.Equal(t, odd.Tags, rows[0].Event.Tags)
	})
}

func TestAppendCompactTags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, out string
		ok      bool
	}{
		{`[]`, `[]`, true},
		{` [ ] `, `[]`, true},
		{`[[]]`, `[[]]`, true},
		{`[["e", "abc", ""], ["p", "x"]]`, `[["e","abc",""],["p","x"]]`, true},
		{`[["a b", " , ", "\"", "\\", "\n\t\u001f"]]`, `[["a b"," , ","\"","\\","\n\t\u001f"]]`, true},
		{`[["ü ✓"]]`, `[["ü ✓"]]`, true},
		{`[["x", null]]`, ``, false},
		{`[["x", 1]]`, ``, false},
		{`[{"x": "y"}]`, ``, false},
		{`[[["x"]]]`, ``, false},
		{`["x"]`, ``, false},
		{`null`, ``, false},
		{`[["x"]] x`, ``, false},
		{`[["x"],]`, ``, false},
		{`[["x",]]`, ``, false},
		{`[["\/"]]`, ``, false},     // AppendString writes '/' itself
		{`[["\u0041"]]`, ``, false}, // and 'A' itself
		{`[["\u000a"]]`, ``, false}, // and \n
		{`[["\u001F"]]`, ``, false}, // and lowercase hex
		{"[[\"\x01\"]]", ``, false},
		{"[[\"\xff\"]]", ``, false},
		{`[["unterminated]]`, ``, false},
	} {
		got, ok := store.AppendCompactTags([]byte("prefix:"), []byte(tc.in))
		require.Equal(t, tc.ok, ok, tc.in)
		if tc.ok {
			require.Equal(t, "prefix:"+tc.out, string(got), tc.in)
		}
	}
}

// TestHotWindowOlder: the distinct e and p values and authors of the
// community's live events of window kinds before the bound, and whether
// the read was whole: complete below its row cap, not at it (at the cap
// more may exist). Other communities, later events, deleted events and
// kinds the window does not hold are not read.
func TestHotWindowOlder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTx(t)
	k1, k2, k3 := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	const before = 1_700_000_100
	at := eventtest.At
	fixture.Event(t, b.tx, b.a, k1, 1, at(before-10), eventtest.Tag("e", "aa"), eventtest.Tag("e", "bb"), eventtest.Tag("p", "pp"))
	fixture.Event(t, b.tx, b.a, k2, 7, at(before-9), eventtest.Tag("e", "aa"), eventtest.Tag("q", "cc"))
	fixture.Event(t, b.tx, b.a, k1, 1, at(before-8), eventtest.Tag("e"), eventtest.Tag("p")) // no values
	gone := fixture.Event(t, b.tx, b.a, k3, 1, at(before-7), eventtest.Tag("e", "deleted"))
	_, err := b.tx.Exec(ctx, `UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = $2`, b.a, unhex(t, gone.ID))
	require.NoError(t, err)
	fixture.Event(t, b.tx, b.a, k3, 30023, at(before-6), eventtest.Tag("d", "x"), eventtest.Tag("e", "addressable"))
	fixture.Event(t, b.tx, b.a, k3, 1, at(before), eventtest.Tag("e", "at the bound"))
	fixture.Event(t, b.tx, b.b, k3, 1, at(before-5), eventtest.Tag("e", "elsewhere"))

	e, p, authors, complete, err := b.s.HotWindowOlder(ctx, b.a, before, 4)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"aa", "bb"}, e)
	require.ElementsMatch(t, []string{"pp"}, p)
	require.ElementsMatch(t, []string{k1.PubKey, k2.PubKey}, authors)
	require.True(t, complete, "3 rows read, under the cap of 4")

	_, _, _, complete, err = b.s.HotWindowOlder(ctx, b.a, before, 3)
	require.NoError(t, err)
	require.False(t, complete, "3 rows read at a cap of 3: more may exist")
}
