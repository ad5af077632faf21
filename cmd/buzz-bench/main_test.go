package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/wire"
)

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

// stubRelay accepts every AUTH and EVENT and answers every REQ with EOSE;
// it refuses kind 9007 so the kind 1 fallback is exercised.
func stubRelay(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	_ = ws.Write(ctx, websocket.MessageText, wire.AuthChallenge(strings.Repeat("ab", 32)))
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		m, err := wire.ParseClient(b)
		if err != nil {
			continue
		}
		var out []byte
		switch m.Type {
		case wire.TypeAuth:
			out = wire.OK(m.Event.ID, true, "")
		case wire.TypeEvent:
			out = wire.OK(m.Event.ID, m.Event.Kind != 9007, "restricted: unknown event kind")
		case wire.TypeReq:
			out = wire.EOSE(m.SubID)
		case wire.TypeClose:
			out = wire.Closed(m.SubID, "")
		}
		if out != nil {
			_ = ws.Write(ctx, websocket.MessageText, out)
		}
	}
}

func TestBenchAgainstStub(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(stubRelay))
	defer srv.Close()
	var out, errb strings.Builder
	args := []string{"--relay", "ws" + strings.TrimPrefix(srv.URL, "http"), "--conns", "2", "--inflight", "4",
		"--events", "300", "--authors", "4", "--req-seconds", "0.2", "--duration", "30s"}
	require.Equal(t, 0, run(t.Context(), args, &out, &errb), errb.String())
	var lines []map[string]any
	for l := range strings.Lines(out.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 1+1+4+1) // setup, ingest, four shapes, summary
	require.Equal(t, "setup", lines[0]["phase"])
	require.EqualValues(t, 1, lines[0]["kind"])
	require.Contains(t, lines[0]["note"], "falling back to kind 1")
	require.Equal(t, "ingest", lines[1]["phase"])
	require.EqualValues(t, 300, lines[1]["events"])
	require.EqualValues(t, 0, lines[1]["rejected"])
	require.Equal(t, "#p", lines[5]["shape"])
	require.Positive(t, lines[5]["queries"])
	require.Equal(t, "summary", lines[6]["phase"])
}
