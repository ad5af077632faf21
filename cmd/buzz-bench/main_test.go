package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"Empty", nil, 50, 0},
		{"One", ms(7), 99, 7 * time.Millisecond},
		{"MedianOdd", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"MedianEven", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"P99Of100", ms(hundred...), 99, 99 * time.Millisecond},
		{"P90Of100", ms(hundred...), 90, 90 * time.Millisecond},
		{"Max", ms(hundred...), 100, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, percentile(tt.sorted, tt.p))
		})
	}
	s := summarise(ms(5, 1, 3, 2, 4))
	require.Equal(t, latencies{P50: 3, P90: 5, P99: 5, Max: 5}, s)
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url string
		ok  bool
	}{
		{"ws://localhost:3000", true},
		{"ws://LOCALHOST:3000/", true},
		{"ws://127.0.0.1:3000", true},
		{"ws://127.8.9.10:3000", true},
		{"ws://[::1]:3000", true},
		{"wss://localhost", true},
		{"ws://10.0.0.1:3000", false},
		{"ws://relay.example.com", false},
		{"ws://localhost.example.com", false},
		{"ws://[::2]:3000", false},
		{"http://localhost:3000", false},
		{"localhost:3000", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			err := checkLoopback(tt.url)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--pids", "relay=12,postgres=3+4", "--phase", "ingest,http-ingest,req"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []pidGroup{{"relay", []int{12}}, {"postgres", []int{3, 4}}}, c.pids)
	require.Equal(t, []string{"ingest", "http-ingest", "req"}, c.phases)
	_, err = parseConfig([]string{"--relay", "ws://192.168.1.2:3000"}, io.Discard)
	require.ErrorContains(t, err, "loopback")
	_, err = parseConfig([]string{"--phase", "search"}, io.Discard)
	require.Error(t, err)
	require.Equal(t, 9, c.kind, "channel messages by default")
	c, err = parseConfig([]string{"--kind", "1"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1, c.kind)
	_, err = parseConfig([]string{"--kind", "40002"}, io.Discard)
	require.ErrorContains(t, err, "--kind must be 9 or 1")
}

func TestWorkload(t *testing.T) {
	t.Parallel()
	v := vocabulary()
	seen := map[string]bool{}
	for _, w := range v {
		seen[w] = true
	}
	require.Len(t, seen, vocabularySize)

	wl := newWorkload(4)
	wl.channel = newUUID()
	f := &fleet{authors: workerAuthors(2, 4)}
	require.Equal(t, [][]int{{0, 2}, {1, 3}}, f.authors)
	jobs := wl.sign(2000, 1, f.authorOf)
	rare := 0
	for i, j := range jobs {
		require.True(t, j.ev.VerifySignature(), i)
		require.Equal(t, wl.pubkeys[j.author], j.ev.PubKey)
		require.Contains(t, f.authors[i%2], j.author)
		require.Equal(t, wl.channel, j.ev.Tags.First("h").Value())
		require.Equal(t, 1, j.ev.Tags.Count("p"))
		require.Len(t, strings.Fields(j.ev.Content), wordsPerEvent)
		if strings.Contains(j.ev.Content, rareWord) {
			rare++
		}
	}
	require.Equal(t, 2, rare)
}

func TestRunRefusesRemote(t *testing.T) {
	t.Parallel()
	var errb strings.Builder
	code := run(context.Background(), []string{"--relay", "ws://8.8.8.8:3000"}, io.Discard, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "loopback")
}

// benchLines runs buzz-bench against r with args and returns its output
// lines. The cap on the run is generous, not tight: the run ends when its
// work is done, and a line that was cut short fails the test below rather
// than the cap.
func benchLines(t *testing.T, r *relaytest.Relay, args ...string) []map[string]any {
	t.Helper()
	var out, errb strings.Builder
	args = append([]string{"--relay", "ws://" + r.Host, "--duration", "5m"}, args...)
	require.Equal(t, 0, run(t.Context(), args, &out, &errb), errb.String())
	var lines []map[string]any
	for l := range strings.Lines(out.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		lines = append(lines, m)
	}
	return lines
}

// requireIngest checks one ingest line: every event answered, accepted.
func requireIngest(t *testing.T, line map[string]any, phase string, events int) {
	t.Helper()
	require.Equal(t, phase, line["phase"], line)
	require.EqualValues(t, events, line["events"], line)
	require.EqualValues(t, 0, line["rejected"], line)
	require.EqualValues(t, 0, line["errors"], line)
	require.Nil(t, line["truncated"], line)
}

// stored counts the events of filter on r as a fresh reader sees them.
func stored(t *testing.T, r *relaytest.Relay, filter event.Filter) int64 {
	t.Helper()
	c, err := client.Dial(t.Context(), "ws://"+r.Host, event.GenerateKey())
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	n, err := c.Count(t.Context(), filter)
	require.NoError(t, err)
	return n
}

func TestBenchAgainstRelay(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	lines := benchLines(t, r, "--conns", "2", "--inflight", "4", "--events", "300", "--authors", "4", "--req-seconds", "2")
	require.Len(t, lines, 1+1+4+1, lines) // setup, ingest, four shapes, summary
	require.Equal(t, "setup", lines[0]["phase"])
	require.EqualValues(t, 9, lines[0]["kind"])
	require.EqualValues(t, 4, lines[0]["sockets"])
	require.Nil(t, lines[0]["note"], "the relay accepts the channel")
	channel, _ := lines[0]["channel"].(string)
	require.NotEmpty(t, channel)
	requireIngest(t, lines[1], "ingest", 300)
	require.EqualValues(t, 300, stored(t, r, event.Filter{Kinds: []int{9}, Tags: map[string][]string{"h": {channel}}}))
	for i, shape := range []string{"kinds", "authors", "#e", "#p"} {
		line := lines[2+i]
		require.Equal(t, "req", line["phase"], line)
		require.Equal(t, shape, line["shape"], line)
		require.Positive(t, line["queries"], line)
		require.EqualValues(t, 0, line["rejected"], line)
		require.EqualValues(t, 0, line["errors"], line)
	}
	require.EqualValues(t, 50, lines[2]["avg_events"], "kinds: a full page of the 300")
	require.Equal(t, "summary", lines[6]["phase"])
	require.EqualValues(t, 9, lines[6]["kind"])
	require.Nil(t, lines[6]["truncated"], lines[6])
}

// TestBenchFallback makes the relay refuse the kind 9007 with a real
// failure, a trigger that fails every channel insert, so the run falls
// back to kind 1 notes, and posts them over the HTTP bridge.
func TestBenchFallback(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	conn, err := pgx.Connect(t.Context(), r.DBURL)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `
		CREATE FUNCTION test_no_channels() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected fault: no channels'; END $$;
		CREATE TRIGGER test_no_channels BEFORE INSERT ON channels FOR EACH ROW EXECUTE FUNCTION test_no_channels();`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))

	lines := benchLines(t, r, "--conns", "2", "--inflight", "2", "--events", "100", "--authors", "4", "--phase", "http-ingest")
	require.Len(t, lines, 1+1+1, lines) // setup, http-ingest, summary
	require.Equal(t, "setup", lines[0]["phase"])
	require.EqualValues(t, 1, lines[0]["kind"])
	require.Nil(t, lines[0]["channel"])
	require.Equal(t, "relay refused kind 9007 (error: internal server error); falling back to kind 1 without a channel", lines[0]["note"])
	requireIngest(t, lines[1], "http-ingest", 100)
	require.EqualValues(t, 100, stored(t, r, event.Filter{Kinds: []int{1}}))
	require.Equal(t, "summary", lines[2]["phase"])
	require.EqualValues(t, 1, lines[2]["kind"])
}
