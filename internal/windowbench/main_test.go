package windowbench

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/benchload"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/window"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// parseConfig parses args as "buzz-bench windows" does.
func parseConfig(args []string, stderr io.Writer) (Config, error) {
	fs := pflag.NewFlagSet("windows", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	done := Flags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return done()
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c, err := parseConfig(nil, io.Discard)
		require.NoError(t, err)
		require.Equal(t, specSizes, c.sizes)
		require.Equal(t, []int{50, 1000, 100, 10_000, 20}, []int{c.warmup, c.pages, c.samples, c.burst, c.deep})
	})
	t.Run("Small", func(t *testing.T) {
		t.Parallel()
		c, err := parseConfig([]string{"--small", "--replies", "5000", "--burst", "600"}, io.Discard)
		require.NoError(t, err)
		want := smallSizes
		want.Replies = 5000
		require.Equal(t, want, c.sizes, "flags set on the command line win over --small")
		require.Equal(t, []int{100, 20, 600}, []int{c.pages, c.samples, c.burst})
	})
	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"--replies", "10"}, {"--burst", "10"}, {"--other-roots", "0"},
			{"--per-second", "0"}, {"--pages", "0"}, {"extra"}, {"--conns", "0"}} {
			_, err := parseConfig(args, io.Discard)
			require.Error(t, err, "%v", args)
		}
	})
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	require.Equal(t, dist{}, distOf(nil))
	require.Equal(t, dist{N: 5, P50: 3, P95: 5, P99: 5, Max: 5}, distOf(ms(5, 1, 3, 2, 4)))
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	require.Equal(t, dist{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}, distOf(ms(hundred...)))
}

func TestDeepRange(t *testing.T) {
	t.Parallel()
	lo, hi := deepRange(100_000)
	require.Equal(t, [2]int{50_000, 99_000}, [2]int{lo, hi}, "positions 50,000–99,000")
	lo, hi = deepRange(2000)
	require.Equal(t, [2]int{1000, 1800}, [2]int{lo, hi}, "a small fixture keeps a page and a probe after every cursor")
}

// node builds a plan node from JSON, as EXPLAIN (FORMAT JSON) writes it.
func node(t *testing.T, js string) planNode {
	t.Helper()
	var n planNode
	require.NoError(t, json.Unmarshal([]byte(js), &n))
	return n
}

func TestCheckShape(t *testing.T) {
	t.Parallel()
	const events = `{"Node Type": "Limit", "Plans": [{"Node Type": "Append", "Plans": [
		{"Node Type": "Index Scan", "Index Name": "events_p2026_12_pkey", "Relation Name": "events_p2026_12", "Alias": "e_1"}]}]}`
	tests := []struct {
		name, plan, why string
	}{
		{"IndexUnderLimit", `{"Node Type": "Nested Loop", "Plans": [{"Node Type": "Limit", "Plans": [
			{"Node Type": "Index Scan", "Index Name": "idx_thread_metadata_window", "Relation Name": "thread_metadata", "Alias": "tm"}]}, ` + events + `]}`, ""},
		{"IndexOnlyScan", `{"Node Type": "Limit", "Plans": [
			{"Node Type": "Index Only Scan", "Index Name": "idx_thread_metadata_window", "Relation Name": "thread_metadata"}]}`, ""},
		{"SortedMetadata", `{"Node Type": "Nested Loop", "Plans": [{"Node Type": "Limit", "Plans": [{"Node Type": "Sort", "Plans": [
			{"Node Type": "Bitmap Heap Scan", "Relation Name": "thread_metadata", "Plans": [
				{"Node Type": "Bitmap Index Scan", "Index Name": "idx_thread_metadata_root"}]}]}]}, ` + events + `]}`,
			"a Sort runs over the scan of thread_metadata"},
		{"SortAboveTheJoin", `{"Node Type": "Sort", "Plans": [{"Node Type": "Nested Loop", "Plans": [{"Node Type": "Limit", "Plans": [
			{"Node Type": "Index Scan", "Index Name": "idx_thread_metadata_window", "Relation Name": "thread_metadata"}]}, ` + events + `]}]}`,
			"a Sort runs over the scan of thread_metadata"},
		{"IncrementalSort", `{"Node Type": "Limit", "Plans": [{"Node Type": "Incremental Sort", "Plans": [
			{"Node Type": "Index Scan", "Index Name": "idx_thread_metadata_window", "Relation Name": "thread_metadata"}]}]}`,
			"a Sort runs over the scan of thread_metadata"},
		{"NoLimit", `{"Node Type": "Nested Loop", "Plans": [
			{"Node Type": "Index Scan", "Index Name": "idx_thread_metadata_window", "Relation Name": "thread_metadata"}, ` + events + `]}`,
			"no Index Scan of idx_thread_metadata_window under a Limit"},
		{"OtherIndex", `{"Node Type": "Limit", "Plans": [
			{"Node Type": "Index Scan", "Index Name": "idx_thread_metadata_root", "Relation Name": "thread_metadata"}]}`,
			"no Index Scan of idx_thread_metadata_window under a Limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := checkShape(node(t, tt.plan))
			require.Equal(t, tt.why == "", s.OK, s.Why)
			require.Equal(t, tt.why, s.Why)
			require.NotEmpty(t, s.Outline)
		})
	}
	out := outline(node(t, tests[0].plan))
	require.Equal(t, []string{
		"Nested Loop (est 0)",
		"  Limit (est 0)",
		"    Index Scan using idx_thread_metadata_window on thread_metadata tm (est 0)",
		"  Limit (est 0)",
		"    Append (est 0)",
		"      Index Scan using events_p2026_12_pkey on events_p2026_12 e_1 (est 0)",
	}, out)
}

func TestParsePage(t *testing.T) {
	t.Parallel()
	id := func(c byte) string { return strings.Repeat(hex.EncodeToString([]byte{c}), 32) }
	row := func(at int64, c byte) map[string]any {
		return map[string]any{"id": id(c), "created_at": at, "kind": 9, "content": "x", "tags": [][]string{}}
	}
	bounds := func(content string) map[string]any {
		return map[string]any{"id": id(0xff), "created_at": 1, "kind": kindBounds, "content": content, "tags": [][]string{{"d", "tw:1:x"}}}
	}
	encode := func(evs ...map[string]any) []byte {
		b, err := json.Marshal(evs)
		require.NoError(t, err)
		return b
	}
	t.Run("MoreToCome", func(t *testing.T) {
		t.Parallel()
		var p page
		next := `{"version":1,"direction":"older","has_more":true,"next_cursor":{"created_at":10,"id":"` + id(2) + `"}}`
		require.NoError(t, parsePage(encode(row(11, 1), row(10, 2), bounds(next)), &p))
		require.Equal(t, []window.Cursor{{CreatedAt: 11, ID: id(1)}, {CreatedAt: 10, ID: id(2)}}, p.Rows)
		require.True(t, p.HasMore)
		require.Equal(t, &window.Cursor{CreatedAt: 10, ID: id(2)}, p.Next)
	})
	t.Run("Exhausted", func(t *testing.T) {
		t.Parallel()
		var p page
		require.NoError(t, parsePage(encode(bounds(`{"version":1,"direction":"older","has_more":false,"next_cursor":null}`)), &p))
		require.Empty(t, p.Rows)
		require.False(t, p.HasMore)
		require.Nil(t, p.Next)
	})
	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		for _, body := range [][]byte{
			[]byte(`[]`),
			encode(row(1, 1)),
			encode(bounds(`{"has_more":true,"next_cursor":null}`)),
			encode(bounds(`{"next_cursor":null}`)),
			encode(bounds(`{"has_more":false,"next_cursor":null}`), bounds(`{"has_more":false,"next_cursor":null}`)),
		} {
			var p page
			require.Error(t, parsePage(body, &p), "%s", body)
		}
	})
}

func TestWindowFilter(t *testing.T) {
	t.Parallel()
	var got []map[string]any
	cur := &window.Cursor{CreatedAt: 1751500000, ID: "ab"}
	require.NoError(t, json.Unmarshal(windowFilter("c", "r", cur), &got))
	require.Equal(t, []map[string]any{{"thread_window": true, "#h": []any{"c"}, "#e": []any{"r"}, "kinds": []any{9.0, 40002.0},
		"limit": 50.0, "depth_limit": 100.0, "until": 1751500000.0, "before_id": "ab"}}, got)
	got = nil
	require.NoError(t, json.Unmarshal(windowFilter("c", "r", nil), &got))
	require.NotContains(t, got[0], "until")
	require.NotContains(t, got[0], "before_id")
}

// TestFixture builds a tiny fixture without a database and checks what
// the loader relies on: created_at order, the depth cycle, ids that commit
// to the events, signatures, and counters as ingest would leave them.
func TestFixture(t *testing.T) {
	t.Parallel()
	s := sizes{Replies: 60, PerSecond: 4, OtherRoots: 3, OtherReplies: 45, Communities: 1, CommunityEvents: 10,
		DeletedPct: 20, ContentBytes: 200}
	out := make(chan []benchload.Event, 100)
	as := authors(4)
	b := &builder{s: s, rng: rand.New(rand.NewPCG(1, 2)), authors: as, communityID: "community", channel: "channel", out: out}
	start, span := int64(1_700_000_000), int64(15)
	rootNode, replies := b.generate(start, span, [][2]string{{"other", "other-channel"}})
	var rows []benchload.Event
	for batch := range out {
		rows = append(rows, batch...)
	}
	require.Len(t, rows, 1+s.OtherRoots+s.Replies+s.OtherReplies+s.CommunityEvents)
	require.Equal(t, len(rows), b.events)
	require.Len(t, replies, s.Replies)

	inC := rows[:len(rows)-s.CommunityEvents]
	deleted := 0
	for i := range inC {
		require.Equal(t, "community", inC[i].CommunityID)
		require.Equal(t, "channel", inC[i].Channel)
		if i > 0 {
			require.LessOrEqual(t, inC[i-1].Event.CreatedAt, inC[i].Event.CreatedAt, "channel C's events are in created_at order")
		}
		if inC[i].Deleted {
			deleted++
		}
	}
	require.Equal(t, b.deleted, deleted, "the deleted replies go to the loader as deleted")
	for _, r := range rows[len(rows)-s.CommunityEvents:] {
		require.Equal(t, "other", r.CommunityID)
		require.Equal(t, event.Tags{{"h", "other-channel"}}, r.Event.Tags)
	}

	// Ids commit to the events; signatures verify.
	keys := map[string]*author{}
	for i := range as {
		keys[as[i].pubkey] = &as[i]
	}
	for _, r := range rows[:20] {
		ev := *r.Event
		_, ok := ev.CheckID()
		require.True(t, ok)
		var id [32]byte
		_, err := hex.Decode(id[:], []byte(ev.ID))
		require.NoError(t, err)
		sig, err := keys[ev.PubKey].sign(id)
		require.NoError(t, err)
		ev.Sig = hex.EncodeToString(sig[:])
		require.True(t, ev.VerifySignature())
		require.InDelta(t, s.ContentBytes, len(ev.Content), 12)
	}

	// R: PerSecond replies a second, depths 1, 2, 3 in turn, kinds alternating.
	rn := b.nodes[rootNode]
	require.Equal(t, start-1, rn.at)
	for k, n := range replies {
		reply := b.nodes[n]
		require.Equal(t, start+int64(k/s.PerSecond), reply.at)
		require.Equal(t, int8(1+k%3), reply.depth)
		require.Equal(t, rootNode, reply.root)
		require.Equal(t, reply.depth-1, b.nodes[reply.parent].depth)
	}

	// Counters: live children and live descendants; last_reply_at counts every child.
	children := map[int32]int32{}
	descendants := map[int32]int32{}
	last := map[int32]int64{}
	for i, n := range b.nodes {
		if n.depth == 0 {
			continue
		}
		last[n.parent] = max(last[n.parent], n.at)
		if !n.deleted {
			children[n.parent]++
			descendants[n.root]++
		}
		require.Less(t, n.parent, int32(i))
	}
	for i, n := range b.nodes {
		require.Equal(t, children[int32(i)], n.replies, "node %d", i)
		if n.depth == 0 {
			require.Equal(t, descendants[int32(i)], n.desc, "root %d", i)
		} else {
			require.Zero(t, n.desc)
		}
		require.Equal(t, last[int32(i)], n.last)
	}
	require.Positive(t, b.deleted)
	require.Equal(t, s.Replies+s.OtherReplies+rootsWithReplies(b.nodes), countRows(b.nodes))
}

func rootsWithReplies(nodes []tnode) int {
	n := 0
	for _, x := range nodes {
		if x.depth == 0 && x.last != 0 {
			n++
		}
	}
	return n
}
