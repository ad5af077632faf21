package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// srCounter counts search statements by stage through the read engine's
// query hook, and can fail one stage.
type srCounter struct {
	fts, hydrate atomic.Int64
	mu           sync.Mutex
	fail         string // "fts" or "hydrate"
}

func (c *srCounter) hooks() app.Hooks {
	return app.Hooks{QueryHookFunc: func(ctx context.Context, f *event.Filter) error {
		stage := read.SearchStage(ctx)
		switch stage {
		case "fts":
			c.fts.Add(1)
		case "hydrate":
			c.hydrate.Add(1)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if stage != "" && stage == c.fail {
			return context.DeadlineExceeded // stands in for a statement timeout
		}
		return nil
	}}
}

type srBundle struct {
	r      *relaytest.Relay
	c      *srCounter
	author eventtest.Key
	reader eventtest.Key
	open   string
}

func srSetup(t *testing.T) *srBundle {
	t.Helper()
	b := &srBundle{c: &srCounter{}, author: eventtest.NewKey(), reader: eventtest.NewKey()}
	b.r = relaytest.Start(t, nil, b.c.hooks())
	b.open = rpAddChannel(t, b.r, "", "open", b.author)
	return b
}

// msgs signs kind 9 events in channel with the given contents, one second
// apart and oldest first, and stores them directly.
func (b *srBundle) msgs(t *testing.T, channel string, contents ...string) []event.Event {
	t.Helper()
	base := time.Now().Unix() - int64(len(contents)) - 10
	evs := make([]event.Event, len(contents))
	for i, c := range contents {
		evs[i] = b.author.Signed(t, 9, eventtest.Content(c), eventtest.Channel(channel), eventtest.At(base+int64(i)))
	}
	rpInsertEvents(t, b.r, "", channel, evs)
	return evs
}

func TestSearchREQ(t *testing.T) {
	t.Parallel()

	t.Run("RankOrderOneShot", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		evs := b.msgs(t, b.open, "tok", "tok tok tok", "tok tok", "unrelated words")
		w := rpAuthed(t, b.r, "", b.reader)
		got, closed, eose := w.Req("s", map[string]any{"search": "tok"})
		require.True(t, eose, closed)
		require.Equal(t, []string{evs[1].ID, evs[2].ID, evs[0].ID}, rpIdsOf(got))

		live := b.author.Signed(t, 9, eventtest.Content("tok after eose"), eventtest.Channel(b.open))
		pub := rpAuthed(t, b.r, "", b.author)
		pub.MustPublish(live)
		w.Send("REQ", "probe", map[string]any{"ids": []string{live.ID}, "kinds": []int{9}})
		frames := rpReadUntil(t, w, func(fs [][]any) bool { return rpHas(fs, "EOSE", "probe") })
		require.False(t, rpHas(frames, "EVENT", "s"), "a search REQ is one-shot: %v", frames)
		require.True(t, rpHas(frames, "EVENT", "probe"))
	})

	t.Run("MixedFilters", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		b.msgs(t, b.open, "mixed tok")
		w := rpAuthed(t, b.r, "", b.reader)
		got, closed, _ := w.Req("m", map[string]any{"search": "mixed"}, map[string]any{"kinds": []int{9}})
		require.Empty(t, got)
		require.Equal(t, "error: mixed search and non-search filters not supported", closed)
		_, closed, eose := w.Req("after", map[string]any{"search": "mixed"})
		require.True(t, eose, closed)
	})

	t.Run("EmptyText", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		evs := b.msgs(t, b.open, "realtext here")
		w := rpAuthed(t, b.r, "", b.reader)
		for i, f := range []map[string]any{{"search": "", "kinds": []int{9}, "limit": 5}, {"search": "  \t ", "kinds": []int{9}}, {"search": "\x00", "kinds": []int{9}}} {
			got, closed, eose := w.Req("e"+strconv.Itoa(i), f)
			require.True(t, eose, closed)
			require.Empty(t, got)
		}
		require.Zero(t, b.c.fts.Load(), "empty text issues no SQL")
		got, closed, eose := w.Req("both", map[string]any{"search": " ", "kinds": []int{9}}, map[string]any{"search": "realtext", "kinds": []int{9}})
		require.True(t, eose, closed)
		require.Equal(t, rpIdsOf(evs), rpIdsOf(got))
		require.EqualValues(t, 1, b.c.fts.Load())
	})

	t.Run("Gates", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		w := rpAuthed(t, b.r, "", b.reader)
		_, closed, _ := w.Req("p", map[string]any{"search": "tok", "kinds": []int{1059}})
		require.Equal(t, "restricted: p-gated events require #p matching your pubkey", closed)
		_, closed, _ = w.Req("g", map[string]any{"search": "tok", "kinds": []int{30174}})
		require.Equal(t, "restricted: agent-engram reads require authors=[self] or #p=[self]", closed)
		_, closed, eose := w.Req("ok", map[string]any{"search": "tok"})
		require.True(t, eose, closed)
		require.Zero(t, b.c.fts.Load()-1, "only the allowed REQ searched")
	})

	t.Run("PrivateChannel", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		private := rpAddChannel(t, b.r, "", "private", b.author)
		rpAddChannelMember(t, b.r, "", private, b.author)
		secret := b.msgs(t, private, "hush words")
		public := b.msgs(t, b.open, "hush words")
		w := rpAuthed(t, b.r, "", b.reader)
		got, _, eose := w.Req("a", map[string]any{"search": "hush"})
		require.True(t, eose)
		require.Equal(t, rpIdsOf(public), rpIdsOf(got))
		_, closed, _ := w.Req("b", map[string]any{"search": "hush", "#h": []string{private}})
		require.Equal(t, "restricted: not a channel member", closed)
		got, closed, eose = w.Req("c", map[string]any{"search": "hush", "#h": []string{private, b.open}})
		require.True(t, eose, closed)
		require.Equal(t, rpIdsOf(public), rpIdsOf(got))
		// The member sees both.
		m := rpAuthed(t, b.r, "", b.author)
		got, _, _ = m.Req("d", map[string]any{"search": "hush"})
		require.ElementsMatch(t, append(rpIdsOf(secret), rpIdsOf(public)...), rpIdsOf(got))
	})

	t.Run("PostFilterP", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		x := eventtest.NewKey()
		with := b.author.Signed(t, 9, eventtest.Content("ptok one"), eventtest.Channel(b.open), eventtest.Tag("p", x.PubKey))
		without := b.author.Signed(t, 9, eventtest.Content("ptok two"), eventtest.Channel(b.open), eventtest.Tag("p", b.reader.PubKey))
		rpInsertEvents(t, b.r, "", b.open, []event.Event{with, without})
		w := rpAuthed(t, b.r, "", b.reader)
		got, closed, eose := w.Req("p", map[string]any{"search": "ptok", "kinds": []int{9}, "#p": []string{x.PubKey}})
		require.True(t, eose, closed)
		require.Equal(t, []string{with.ID}, rpIdsOf(got))
	})

	t.Run("PagingBudget", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		base := time.Now().Unix()
		evs := rpSignMany(t, b.author, 9, 1500, func(i int) []eventtest.Option {
			return []eventtest.Option{eventtest.Content("budget " + strconv.Itoa(i)), eventtest.Channel(b.open), eventtest.At(base - int64(i))}
		})
		rpInsertEvents(t, b.r, "", b.open, evs)
		w := rpAuthed(t, b.r, "", b.reader)
		got, closed, eose := w.Req("l", map[string]any{"search": "budget", "limit": 5000})
		require.True(t, eose, closed)
		require.Len(t, got, 1000)
		require.EqualValues(t, 10, b.c.fts.Load())
		got, _, _ = w.Req("n", map[string]any{"search": "budget"})
		require.Len(t, got, 1000)
		before := b.c.fts.Load()
		got, closed, eose = w.Req("z", map[string]any{"search": "budget", "limit": 0})
		require.True(t, eose, closed)
		require.Empty(t, got)
		require.Equal(t, before, b.c.fts.Load())
	})

	t.Run("DedupeAfterAcceptance", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		evs := b.msgs(t, b.open, "dup", "dup dup dup")
		w := rpAuthed(t, b.r, "", b.reader)
		got, closed, eose := w.Req("d", map[string]any{"search": "dup", "limit": 1}, map[string]any{"search": "dup", "limit": 2})
		require.True(t, eose, closed)
		require.Equal(t, []string{evs[1].ID, evs[0].ID}, rpIdsOf(got))
		got, _, _ = w.Req("d1", map[string]any{"search": "dup", "limit": 1}, map[string]any{"search": "dup", "limit": 1})
		require.Equal(t, []string{evs[1].ID, evs[0].ID}, rpIdsOf(got), "a sent id does not count towards a later filter's limit")
	})

	t.Run("Edits", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		pub := rpAuthed(t, b.r, "", b.author)
		m := b.author.Signed(t, 9, eventtest.Content("original wording"), eventtest.Channel(b.open))
		pub.MustPublish(m)
		e := b.author.Signed(t, 40003, eventtest.Content("corrected wording"), eventtest.Channel(b.open), eventtest.Tag("e", m.ID))
		pub.MustPublish(e)
		w := rpAuthed(t, b.r, "", b.reader)
		got, _, _ := w.Req("e", map[string]any{"search": "corrected"})
		require.Equal(t, []string{e.ID}, rpIdsOf(got))
		del := b.author.Signed(t, 5, eventtest.Content(""), eventtest.Tag("e", m.ID), eventtest.Tag("k", "9"))
		pub.MustPublish(del)
		got, closed, eose := w.Req("e2", map[string]any{"search": "corrected"})
		require.True(t, eose, closed)
		require.Empty(t, got, "deleting a message hides its text in edits")
	})

	t.Run("Count", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		w := rpAuthed(t, b.r, "", b.reader)
		_, closed := rpCount(t, w, "c", map[string]any{"search": "tok", "kinds": []int{9}})
		require.Equal(t, "error: search is not supported in COUNT", closed)
		status, body := brHTTP(t, b.r, "/count", b.reader, []byte(`[{"search":"tok","kinds":[9]}]`))
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, string(body), "search is not supported in COUNT")
	})
}

func TestSearchBudgetFollowsMaxLimit(t *testing.T) {
	t.Parallel()
	require.GreaterOrEqual(t, read.MaxSearchPages*read.SearchPageSize, read.MaxLimit)
	require.Less(t, read.MaxSearchPages*read.SearchPageSize-read.SearchPageSize, read.MaxLimit)
	r := relaytest.Start(t, nil)
	var doc struct {
		Limitation struct {
			MaxLimit int `json:"max_limit"`
		} `json:"limitation"`
	}
	status, body := r.Do(t, relaytest.Request{Method: http.MethodGet, Path: "/", Header: map[string]string{"Accept": "application/nostr+json"}})
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, json.Unmarshal(body, &doc))
	require.Equal(t, read.MaxLimit, doc.Limitation.MaxLimit)
}

func TestSearchDegrades(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{"fts", "hydrate"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			c := &srCounter{fail: stage}
			logs := &logtest.Buffer{}
			r := relaytest.StartWithLogger(t, nil, logs, c.hooks())
			author := eventtest.NewKey()
			open := rpAddChannel(t, r, "", "open", author)
			rpInsertEvents(t, r, "", open, []event.Event{author.Signed(t, 9, eventtest.Content("secretphrase"), eventtest.Channel(open))})
			w := rpAuthed(t, r, "", eventtest.NewKey())
			got, closed, eose := w.Req("f", map[string]any{"search": "secretphrase"})
			require.True(t, eose, closed)
			require.Empty(t, got)
			_, closed, eose = w.Req("still", map[string]any{"kinds": []int{9}, "limit": 1})
			require.True(t, eose, closed)
			r.Stop()
			want := map[string]string{"fts": "NIP-50 search failed", "hydrate": "NIP-50 batch fetch failed"}[stage]
			require.Contains(t, logs.String(), want)
			require.NotContains(t, logs.String(), "secretphrase")
		})
	}
}

func TestSearchBridge(t *testing.T) {
	t.Parallel()

	t.Run("ModesPagesLimits", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		evs := b.msgs(t, b.open, "project planning", "projectile")
		prefix := brQuery(t, b.r, b.reader, `[{"search":"proj","search_mode":"prefix"}]`)
		require.ElementsMatch(t, rpIdsOf(evs), prefix)
		require.ElementsMatch(t, rpIdsOf(evs), brQuery(t, b.r, b.reader, `[{"search":"proj","searchMode":"prefix"}]`))
		require.Empty(t, brQuery(t, b.r, b.reader, `[{"search":"proj","search_mode":"word"}]`))
		require.Empty(t, brQuery(t, b.r, b.reader, `[{"search":"proj"}]`))

		base := time.Now().Unix()
		many := rpSignMany(t, b.author, 9, 600, func(i int) []eventtest.Option {
			return []eventtest.Option{eventtest.Content("paged"), eventtest.Channel(b.open), eventtest.At(base - int64(i))}
		})
		rpInsertEvents(t, b.r, "", b.open, many)
		all := rpIdsOf(many) // equal ranks: newest first, which is signing order
		require.Equal(t, all[10:20], brQuery(t, b.r, b.reader, `[{"search":"paged","page":2,"limit":10}]`))
		require.Equal(t, all[10:20], brQuery(t, b.r, b.reader, `[{"search":"paged","search_page":2,"limit":10}]`))
		require.Equal(t, all[:10], brQuery(t, b.r, b.reader, `[{"search":"paged","searchPage":0,"limit":10}]`))
		require.Equal(t, all[:10], brQuery(t, b.r, b.reader, `[{"search":"paged","page":"x","limit":10}]`))
		require.Len(t, brQuery(t, b.r, b.reader, `[{"search":"paged"}]`), 100)
		require.Len(t, brQuery(t, b.r, b.reader, `[{"search":"paged","limit":1000}]`), 500)
		require.Empty(t, brQuery(t, b.r, b.reader, `[{"search":"paged","page":2147483647}]`), "clamped to page 1000")
		require.Equal(t, all[:10], brQuery(t, b.r, b.reader, `[{"search":"paged","page":4000000000,"limit":10}]`), "beyond 32 bits means 1")
	})

	t.Run("MixedEmptyAndReauthorised", func(t *testing.T) {
		t.Parallel()
		b := srSetup(t)
		status, body := brHTTP(t, b.r, "/query", b.reader, []byte(`[{"search":"x"},{"kinds":[9]}]`))
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, string(body), "mixed search and non-search filters not supported")
		before := b.c.fts.Load()
		require.Empty(t, brQuery(t, b.r, b.reader, `[{"search":""},{"search":" \t "}]`))
		require.Equal(t, before, b.c.fts.Load(), "no SQL for empty text")

		x, other := eventtest.NewKey(), eventtest.NewKey()
		private := rpAddChannel(t, b.r, "", "private", b.author)
		ok := b.author.Signed(t, 9, eventtest.Content("reauth"), eventtest.Channel(b.open), eventtest.Tag("p", x.PubKey))
		wrongP := b.author.Signed(t, 9, eventtest.Content("reauth"), eventtest.Channel(b.open), eventtest.Tag("p", other.PubKey))
		byOther := other.Signed(t, 9, eventtest.Content("reauth"), eventtest.Channel(b.open), eventtest.Tag("p", x.PubKey))
		hidden := b.author.Signed(t, 9, eventtest.Content("reauth"), eventtest.Channel(private), eventtest.Tag("p", x.PubKey))
		rpInsertEvents(t, b.r, "", b.open, []event.Event{ok, wrongP, byOther})
		rpInsertEvents(t, b.r, "", private, []event.Event{hidden})
		got := brQuery(t, b.r, b.reader, `[{"search":"reauth","kinds":[9],"authors":["`+b.author.PubKey+`"],"#p":["`+x.PubKey+`"]}]`)
		require.Equal(t, []string{ok.ID}, got)
	})
}
