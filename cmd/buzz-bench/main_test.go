package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/redistest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// TestMain runs the test binary as the abuse phase's attacker process
// when the phase starts it as one (attacker.go re-executes its own binary),
// and the tests otherwise.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == attackerCommand {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	dbtest.Main(m)
}

// parseConfig parses args as "buzz-bench run" does.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	done := relayFlags(fs, "")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	return done()
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	require.Equal(t, latencies{P50: 3, P90: 5, P99: 5, Max: 5}, summarise(ms(5, 1, 3, 2, 4)))
	require.Equal(t, latencies{P50: 1.235, P90: 1.235, P99: 1.235, Max: 1.235}, summarise([]time.Duration{1234567}), "to the microsecond")
	require.Equal(t, latencies{}, summarise(nil))
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
	require.Equal(t, []pidGroup{{"relay", []int{12}}, {"postgres", []int{3, 4}}, {"bench", []int{os.Getpid()}}}, c.pids,
		"the load tool's own CPU is reported next to the named processes")
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

	// --search-words adds one NIP-50 shape per word to the req phase.
	c, err = parseConfig([]string{"--search-words", "kanom, quixotically,"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"kanom", "quixotically"}, c.searchWords)
	f := filterFor("search:kanom", &reqTargets{Kind: 9})(rand.New(rand.NewPCG(1, 2)))
	require.NotNil(t, f.Search)
	require.Equal(t, "kanom", *f.Search)
	require.Equal(t, []int{9}, f.Kinds)
	require.Equal(t, reqLimit, *f.Limit)
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
	code := run(context.Background(), []string{"ingest", "--relay", "ws://8.8.8.8:3000"}, io.Discard, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "loopback")
}

// benchLines runs "buzz-bench cmd" against r with args and returns its output
// lines. The cap on the run is generous, not tight: the run ends when its
// work is done, and a line that was cut short fails the test below rather
// than the cap.
func benchLines(t *testing.T, r *relaytest.Relay, cmd string, args ...string) []map[string]any {
	t.Helper()
	var out, errb strings.Builder
	args = append([]string{cmd, "--relay", "ws://" + r.Host, "--duration", "5m"}, args...)
	require.Equal(t, 0, run(t.Context(), args, &out, &errb), errb.String())
	return parseLines(t, out.String())
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
	lines := benchLines(t, r, "run", "--conns", "2", "--inflight", "4", "--events", "300", "--authors", "4", "--req-seconds", "2")
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

// TestReqPhaseEndIsNotAnError runs REQ phases on sockets whose earlier
// queries were given up mid-call, as a phase's end gives up the query each
// socket has in flight: the sockets stay usable and the next phase counts no
// error. A relay that goes away still counts.
func TestReqPhaseEndIsNotAnError(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	// 2 s, not less: under the suite's full load a shorter phase has been
	// seen to end before any socket's first answer.
	cfg := config{relays: []string{"ws://" + r.Host}, conns: 3, authors: 3, reqDuration: 2 * time.Second}
	f, err := dialFleet(t.Context(), cfg, newWorkload(cfg.authors))
	require.NoError(t, err)
	t.Cleanup(f.close)
	gen := filterFor("kinds", &reqTargets{Kind: event.KindNote})

	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range f.all {
		for range 50 { // a query whose phase ended while it was being sent
			_, _ = c.Query(ended, gen(rand.New(rand.NewPCG(1, 2))))
		}
	}
	line := runReq(t.Context(), cfg, f, "kinds", gen)
	require.EqualValues(t, 0, line.Errors, line.FirstError)
	require.Positive(t, line.Queries)

	r.Stop()
	line = runReq(t.Context(), cfg, f, "kinds", gen)
	require.EqualValues(t, cfg.conns, line.Errors, "every socket lost its relay")
	require.Contains(t, line.FirstError, client.ErrClosed.Error())
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

	lines := benchLines(t, r, "http-ingest", "--conns", "2", "--inflight", "2", "--events", "100", "--authors", "4")
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

func TestParseRelays(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--relay", "ws://localhost:3000, ws://127.0.0.1:3001,ws://[::1]:3002"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"ws://localhost:3000", "ws://127.0.0.1:3001", "ws://[::1]:3002"}, c.relays)
	require.Equal(t, "ws://localhost:3000", c.fanout.subRelay, "the subscribers default to the first relay")
	require.Equal(t, "ws://127.0.0.1:3001", relayOf(c.relays, 1))
	require.Equal(t, "ws://localhost:3000", relayOf(c.relays, 3), "round-robin wraps")

	c, err = parseConfig([]string{"--relay", "ws://localhost:3000,ws://localhost:3001", "--sub-relay", "ws://localhost:3001",
		"--phase", "fanout", "--subscribers", "10", "--rate", "50", "--fanout-seconds", "2"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, fanoutConfig{subRelay: "ws://localhost:3001", subscribers: 10, publishers: 1, rate: 50,
		duration: 2 * time.Second, drain: 5 * time.Second}, c.fanout)
	require.Equal(t, 100, fanoutEvents(c.fanout))

	for _, tt := range []struct{ name, arg, want string }{
		{"Remote", "ws://localhost:3000,ws://10.1.2.3:3001", "loopback"},
		{"EmptyItem", "ws://localhost:3000,,ws://localhost:3001", "empty item"},
		{"Twice", "ws://localhost:3000,ws://localhost:3000", "listed twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig([]string{"--relay", tt.arg}, io.Discard)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err = parseConfig([]string{"--sub-relay", "ws://example.com"}, io.Discard)
	require.ErrorContains(t, err, `--sub-relay "ws://example.com": buzz-bench only targets loopback`)
	_, err = parseConfig([]string{"--rate", "0"}, io.Discard)
	require.ErrorContains(t, err, "must be positive")
	_, err = parseConfig([]string{"--fanout-drain", "0s"}, io.Discard)
	require.ErrorContains(t, err, "must be positive")
	_, err = parseConfig([]string{"--rate", "1", "--fanout-seconds", "0.1"}, io.Discard)
	require.ErrorContains(t, err, "at least one event")
}

func TestEventID(t *testing.T) {
	t.Parallel()
	ev := eventtest.NewKey().Signed(t, 9)
	id, ok := eventID(wire.EventFrame(subID, ev.AppendJSON(nil)))
	require.True(t, ok)
	require.Equal(t, ev.ID, string(id), "the relay's own encoding")
	reordered := `["EVENT","f",{"pubkey":"` + ev.PubKey + `","id":"` + ev.ID + `","kind":9}]`
	id, ok = eventID([]byte(reordered))
	require.True(t, ok)
	require.Equal(t, ev.ID, string(id), "another field order is decoded")
	_, ok = eventID(wire.EventFrame("other", ev.AppendJSON(nil)))
	require.False(t, ok, "another subscription's EVENT")
	_, ok = eventID(wire.EOSE(subID))
	require.False(t, ok)
	msg, ok := closedMessage(wire.Closed(subID, "restricted: channel access revoked"))
	require.True(t, ok)
	require.Equal(t, "restricted: channel access revoked", msg)
}

// startPair starts relays A and B on one database, both serving A's
// community (B's host is an alias of it), as scripts/bench-scale.sh runs
// its processes. env is added to both.
func startPair(t *testing.T, env map[string]string) (a, b *relaytest.Relay) {
	t.Helper()
	a = relaytest.Start(t, env)
	envB := map[string]string{"DATABASE_URL": a.DBURL, "RELAY_URL": "ws://" + a.Host}
	for k, v := range env {
		envB[k] = v
	}
	b = relaytest.Start(t, envB)
	_, err := a.App.Store().CommunityAddHost(t.Context(), b.Host, a.Host)
	require.NoError(t, err)
	return a, b
}

// storedOn reads buzz_events_stored_total{kind} from r's /metrics: the
// events that process committed itself.
func storedOn(t *testing.T, r *relaytest.Relay, kind int) int {
	t.Helper()
	return metricOn(t, r, `buzz_events_stored_total{kind="`+strconv.Itoa(kind)+`"}`)
}

// metricOn reads one series (name and labels as /metrics prints them)
// from r's /metrics, 0 when it is absent.
func metricOn(t *testing.T, r *relaytest.Relay, series string) int {
	t.Helper()
	resp, err := http.Get(r.MetricsURL + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	prefix := series + " "
	for l := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	return 0
}

func TestBenchRoundRobin(t *testing.T) {
	t.Parallel()
	a, b := startPair(t, nil)
	var out, errb strings.Builder
	args := []string{"run", "--relay", "ws://" + a.Host + ",ws://" + b.Host, "--duration", "5m",
		"--conns", "4", "--inflight", "2", "--events", "200", "--authors", "8", "--phase", "ingest,http-ingest"}
	require.Equal(t, 0, run(t.Context(), args, &out, &errb), errb.String())
	lines := parseLines(t, out.String())
	require.Len(t, lines, 1+2+1, lines) // setup, ingest, http-ingest, summary
	require.Equal(t, []any{"ws://" + a.Host, "ws://" + b.Host}, lines[0]["relays"])
	require.Nil(t, lines[0]["note"], "both processes serve the channel's community")
	for _, line := range lines[1:3] {
		requireIngest(t, line, line["phase"].(string), 200)
		require.Equal(t, map[string]any{"ws://" + a.Host: 100.0, "ws://" + b.Host: 100.0}, line["per_relay"], line)
	}
	channel := lines[0]["channel"].(string)
	require.EqualValues(t, 400, stored(t, b, event.Filter{Kinds: []int{9}, Tags: map[string][]string{"h": {channel}}}))
	require.Equal(t, 200, storedOn(t, a, 9), "A committed its half of both phases")
	require.Equal(t, 200, storedOn(t, b, 9), "B committed its half of both phases")
}

// requireFanout checks a fanout line: every accepted event reached every
// subscriber exactly once, and no subscription ended early.
func requireFanout(t *testing.T, line map[string]any, subscribers, events int) {
	t.Helper()
	require.Equal(t, "fanout", line["phase"], line)
	require.EqualValues(t, subscribers, line["subscribers"], line)
	require.EqualValues(t, events, line["accepted"], line)
	require.EqualValues(t, 0, line["rejected"], line)
	require.EqualValues(t, 0, line["errors"], line)
	require.EqualValues(t, subscribers*events, line["expected"], line)
	require.Equal(t, line["expected"], line["delivered"], line)
	require.EqualValues(t, 0, line["missing"], line)
	require.EqualValues(t, 0, line["duplicates"], line)
	require.EqualValues(t, 0, line["unexpected"], line)
	require.EqualValues(t, 0, line["ended"], line)
	require.Positive(t, line["send_p50_ms"], line)
	require.GreaterOrEqual(t, line["max_ms"], line["p99_ms"], line)
	require.GreaterOrEqual(t, line["p99_ms"], line["p50_ms"], line)
}

func TestBenchFanout(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	lines := benchLines(t, r, "fanout", "--subscribers", "40", "--publishers", "2", "--rate", "100", "--fanout-seconds", "1")
	require.Len(t, lines, 1+1, lines) // fanout, summary: no ingest sockets
	line := lines[0]
	requireFanout(t, line, 40, 100)
	require.Equal(t, "ws://"+r.Host, line["sub_relay"])
	channel, _ := line["channel"].(string)
	require.EqualValues(t, 100, stored(t, r, event.Filter{Kinds: []int{9}, Tags: map[string][]string{"h": {channel}}}))
	sum := lines[1]
	require.Equal(t, "summary", sum["phase"])
	require.Equal(t, map[string]any{"p50_ms": line["p50_ms"], "p99_ms": line["p99_ms"], "missing": 0.0}, sum["fanout"])
}

// TestBenchFanoutAcrossProcesses holds the subscribers on B and publishes
// on A; only Redis carries the events from A to B.
func TestBenchFanoutAcrossProcesses(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a, b := startPair(t, map[string]string{"REDIS_URL": rs.URL(), "BUZZ_RELAY_PRIVATE_KEY": hex.EncodeToString(event.GenerateKey())})
	lines := benchLines(t, a, "fanout", "--sub-relay", "ws://"+b.Host, "--subscribers", "30", "--rate", "50", "--fanout-seconds", "1")
	require.Len(t, lines, 2, lines)
	requireFanout(t, lines[0], 30, 50)
	require.Equal(t, "ws://"+b.Host, lines[0]["sub_relay"])
	require.Equal(t, []any{"ws://" + a.Host}, lines[0]["relays"])
	require.Equal(t, 50, storedOn(t, a, 9), "A took every EVENT")
	require.Equal(t, 0, storedOn(t, b, 9), "B only delivered")
}

// parseLines decodes buzz-bench's JSON lines.
func parseLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(out) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		lines = append(lines, m)
	}
	return lines
}

func TestVMRSS(t *testing.T) {
	t.Parallel()
	v, err := vmRSS("Name:\tbuzz-relay\nVmPeak:\t  900 kB\nVmRSS:\t   12345 kB\nRssAnon:\t 1 kB\n")
	require.NoError(t, err)
	require.EqualValues(t, 12345, v)
	_, err = vmRSS("Name:\tx\n")
	require.ErrorContains(t, err, "no VmRSS")
	_, err = vmRSS("VmRSS:\t12 MB\n")
	require.ErrorContains(t, err, "unexpected VmRSS")
	own, err := rssKiB([]int{os.Getpid()})
	require.NoError(t, err)
	require.Positive(t, own)
}

func TestParseIdle(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--phase", "idle"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, idleConfig{conns: 10000, hold: 5 * time.Second}, c.idle)
	_, err = parseConfig([]string{"--pprof", "http://127.0.0.1:9102/debug/pprof/heap"}, io.Discard)
	require.ErrorContains(t, err, "go together")
	_, err = parseConfig([]string{"--pprof", "http://10.0.0.1:9102/debug/pprof/heap", "--heap-profile", "x"}, io.Discard)
	require.ErrorContains(t, err, "loopback")
	_, err = parseConfig([]string{"--pprof", "ftp://localhost/heap", "--heap-profile", "x"}, io.Discard)
	require.ErrorContains(t, err, "not an http(s) URL")
	_, err = parseConfig([]string{"--idle-conns", "0"}, io.Discard)
	require.ErrorContains(t, err, "must be positive")
}

// TestBenchIdle holds authenticated idle sockets on a relay with pprof on
// and checks the RSS figures (the relay runs in this process) and the heap
// profile saved from its metrics port.
func TestBenchIdle(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_PPROF_ENABLED": "true"})
	profile := t.TempDir() + "/heap.pb.gz"
	lines := benchLines(t, r, "idle", "--idle-conns", "60", "--idle-seconds", "0.5",
		"--pids", "relay="+strconv.Itoa(os.Getpid()), "--pprof", r.MetricsURL+"/debug/pprof/heap", "--heap-profile", profile)
	require.Len(t, lines, 2, lines) // idle, summary: no ingest sockets
	line := lines[0]
	require.Equal(t, "idle", line["phase"], line)
	require.EqualValues(t, 60, line["connected"], line)
	require.EqualValues(t, 0, line["failed"], line)
	require.EqualValues(t, 0, line["ended"], line)
	require.GreaterOrEqual(t, line["hold_seconds"], 0.5, line)
	for _, k := range []string{"rss_before_kib", "rss_connected_kib", "rss_after_kib", "rss_closed_kib", "rss_after_mib"} {
		require.Positive(t, line[k], k)
	}
	require.Nil(t, line["rss_error"], line)
	require.Equal(t, profile, line["heap_profile"])
	b, err := os.ReadFile(profile)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "\x1f\x8b"), "a gzipped pprof profile")
	require.Equal(t, "summary", lines[1]["phase"])
	require.EqualValues(t, 60, lines[1]["idle"].(map[string]any)["connected"])
	require.Equal(t, 60, metricOn(t, r, `buzz_auth_attempts_total{method="nip42"}`), "every socket authenticated")
	require.Eventually(t, func() bool { return metricOn(t, r, `buzz_ws_connections_active`) == 0 },
		10*time.Second, 50*time.Millisecond, "every socket closed")
}

// TestBenchIdleLimits checks that sockets over the relay's connection
// limit are counted as failed, and that a relay without
// BUZZ_PPROF_ENABLED serves no profile.
func TestBenchIdleLimits(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_MAX_CONNECTIONS": "10"})
	lines := benchLines(t, r, "idle", "--idle-conns", "15", "--idle-seconds", "0.2")
	line := lines[0]
	require.EqualValues(t, 10, line["connected"], line)
	require.EqualValues(t, 5, line["failed"], line)
	require.NotEmpty(t, line["first_error"], line)
	require.Nil(t, line["rss_before_kib"], "no relay pid, no RSS")

	var out, errb strings.Builder
	profile := t.TempDir() + "/heap.pb.gz"
	args := []string{"idle", "--relay", "ws://" + r.Host, "--idle-conns", "2", "--idle-seconds", "0.1",
		"--pprof", r.MetricsURL + "/debug/pprof/heap", "--heap-profile", profile}
	require.Equal(t, 2, run(t.Context(), args, &out, &errb))
	require.Contains(t, errb.String(), "404 Not Found")
	require.NoFileExists(t, profile)
}

func TestReqTargets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	a, e, p := strings.Repeat("a", 64), strings.Repeat("e", 64), strings.Repeat("b", 64)
	good := write("good.json", `{"kind":9,"authors":["`+a+`"],"e":["`+e+`"],"p":["`+p+`"]}`)
	c, err := parseConfig([]string{"--phase", "req", "--req-targets", good}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, &reqTargets{Kind: 9, Authors: []string{a}, E: []string{e}, P: []string{p}}, c.targets)
	rng := rand.New(rand.NewPCG(1, 2))
	require.Equal(t, []string{a}, filterFor("authors", c.targets)(rng).Authors)
	require.Equal(t, map[string][]string{"e": {e}}, filterFor("#e", c.targets)(rng).Tags)
	require.Equal(t, map[string][]string{"p": {p}}, filterFor("#p", c.targets)(rng).Tags)
	f := filterFor("kinds", c.targets)(rng)
	require.Equal(t, []int{9}, f.Kinds)
	require.Equal(t, reqLimit, *f.Limit)

	for name, body := range map[string]string{
		"empty.json":  `{"kind":9,"authors":["` + a + `"],"e":[],"p":["` + p + `"]}`,
		"upper.json":  `{"kind":9,"authors":["` + strings.Repeat("A", 64) + `"],"e":["` + e + `"],"p":["` + p + `"]}`,
		"broken.json": `{"kind":`,
	} {
		_, err := parseConfig([]string{"--req-targets", write(name, body)}, io.Discard)
		require.ErrorContains(t, err, "--req-targets", name)
	}
	_, err = parseConfig([]string{"--req-targets", dir + "/missing.json"}, io.Discard)
	require.ErrorContains(t, err, "--req-targets")
}
