package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// floodTag marks the attacker's filters: the relay's QueryHookFunc makes
// each of their statements an expensive one, a 30 s sleep on the server
// holding a pooled connection, as a count over a huge community would.
const floodTag = "flood"

// slowFloodHooks returns hooks whose history queries and counts of a
// filter with #t=[flood] sleep on the relay's own pool, and the setter of
// that pool (known once the relay has started).
func slowFloodHooks() (app.Hooks, func(*pgxpool.Pool)) {
	var pool atomic.Pointer[pgxpool.Pool]
	return app.Hooks{QueryHookFunc: func(ctx context.Context, f *event.Filter) error {
		if !slices.Contains(f.Tags["t"], floodTag) {
			return nil
		}
		_, err := pool.Load().Exec(ctx, "SELECT pg_sleep(30)")
		return err
	}}, func(p *pgxpool.Pool) { pool.Store(p) }
}

// bridgeCall is one bridge request from the loopback address from, made
// from any goroutine: no require, the caller judges the answer.
func bridgeCall(t *testing.T, r *relaytest.Relay, from, host, path string, key eventtest.Key, body string) (int, string, http.Header, error) {
	tok := relaytest.Token(t, key, "http://"+host+path, http.MethodPost)
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+path, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Host = host
	req.Header.Set("Authorization", tok)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client := &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, err
}

// TestAbuseReads is the /count flood: one attacker key floods community A
// with expensive /count and COUNT and REQ from many HTTP requests and
// several WebSockets, while an honest publisher in community B keeps
// getting OK true within 2 s and an honest reader of B gets its
// answers. The attacker is the only one refused: "rate-limited: too many
// concurrent reads" once its pubkey's share is full, "error: read timed
// out" (CLOSED, HTTP 503) for the reads that ran into their deadline; both
// are counted, and every acknowledged event is stored.
func TestAbuseReads(t *testing.T) {
	t.Parallel()
	hooks, setPool := slowFloodHooks()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_DB_POOL_SIZE":              "10", // 2 kept for ingest, 8 for reads
		"BUZZ_READS_PER_PUBKEY":          "4",
		"BUZZ_READS_PER_CONNECTION":      "4",
		"BUZZ_READ_STATEMENT_TIMEOUT_MS": "3000",
		"BUZZ_DB_ACQUIRE_TIMEOUT_MS":     "500",
	}, hooks)
	setPool(r.App.Pool())
	hostA, hostB := r.Community(t, "victim.test"), r.Community(t, "honest.test")
	attacker, publisher, reader := eventtest.NewKey(), eventtest.NewKey(), eventtest.NewKey()
	flood := `{"kinds":[1],"#t":["` + floodTag + `"]}`

	// The attack: 24 HTTP loops of /count and 3 WebSockets sending COUNT
	// and REQ, all from one key, until stopHTTP and stop.
	stopHTTP, stop := make(chan struct{}), make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answers  = map[string]int{} // "status body" or the CLOSED text
		attacks  atomic.Int64
		failures []error
	)
	note := func(k string) {
		mu.Lock()
		answers[k]++
		mu.Unlock()
		attacks.Add(1)
	}
	// countOnce is one attacker /count from the HTTP loops' address, its
	// answer noted; false when the request itself failed (recorded).
	countOnce := func() bool {
		status, body, _, err := bridgeCall(t, r, "127.0.0.1", hostA, "/count", attacker, "["+flood+"]")
		if err != nil {
			mu.Lock()
			failures = append(failures, err)
			mu.Unlock()
			return false
		}
		note(strconv.Itoa(status) + " " + body)
		return true
	}
	for range 24 {
		wg.Go(func() {
			for {
				select {
				case <-stopHTTP:
					return
				default:
				}
				if !countOnce() {
					return
				}
			}
		})
	}
	var socks []*relaytest.WS
	for range 3 {
		w := r.Dial(t, hostA)
		w.Auth(attacker)
		socks = append(socks, w)
	}
	for i, w := range socks {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				// Six requests at once, more than the connection's share.
				for j := range 6 {
					id := "a" + strconv.Itoa(i) + "-" + strconv.Itoa(n) + "-" + strconv.Itoa(j)
					var f map[string]any
					_ = json.Unmarshal([]byte(flood), &f)
					verb := "COUNT"
					if j%2 == 1 {
						verb = "REQ"
					}
					b, _ := json.Marshal([]any{verb, id, f})
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := w.C.Write(ctx, websocket.MessageText, b)
					cancel()
					if err != nil {
						return
					}
				}
				for got := 0; got < 6; {
					msg, err := w.NextErr(30 * time.Second)
					if err != nil {
						return
					}
					switch msg[0] {
					case "CLOSED":
						note("CLOSED " + msg[2].(string))
						got++
					case "COUNT", "EOSE":
						note(msg[0].(string))
						got++
					}
				}
			}
		})
	}

	// Wait until the attack is in full swing: its first answers are back.
	require.Eventually(t, func() bool { return attacks.Load() >= 10 },
		20*time.Second, 20*time.Millisecond, "the attack gets answers")

	// The honest side, in community B: a publisher whose every OK comes
	// within 2 s, and a reader who gets its answers.
	pub := r.Dial(t, hostB)
	pub.Auth(publisher)
	rd := r.Dial(t, hostB)
	rd.Auth(reader)
	// An OK that waited for a connection held by the flood would wait for
	// a read's 3 s deadline; 2 s leaves room for a loaded machine (the
	// race detector beside the rest of the suite: 1.16 s seen once).
	var acked []string
	for i := range 20 {
		ev := publisher.Signed(t, 1, eventtest.Content("honest "+strconv.Itoa(i)))
		start := time.Now()
		ok, msg := pub.Publish(ev)
		require.True(t, ok, msg)
		require.Less(t, time.Since(start), 2*time.Second, "OK %d took %s during the flood", i, time.Since(start))
		acked = append(acked, ev.ID)
		if i%5 == 4 {
			start = time.Now()
			evs, closed, eose := rd.Req("h"+strconv.Itoa(i), map[string]any{"authors": []string{publisher.PubKey}, "kinds": []int{1}})
			require.True(t, eose, closed)
			require.Len(t, evs, i+1)
			status, body, _, err := bridgeCall(t, r, "127.0.0.2", hostB, "/count", reader, `[{"kinds":[1],"authors":["`+publisher.PubKey+`"]}]`)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status, body)
			require.JSONEq(t, `{"count":`+strconv.Itoa(i+1)+`}`, body)
			require.Less(t, time.Since(start), 2*time.Second, "honest reads took %s during the flood", time.Since(start))
		}
	}

	// The attacker also meets its deadline on both doors. Its HTTP loops
	// and its sockets share its pubkey's four shares, handed out in
	// arrival order; with every waiter refused after the same 500 ms and
	// every held read ending after the same 3 s, one door can keep all
	// four for as long as both flood. So the doors are judged one at a
	// time: the sockets once the loops have stopped, then five /count at
	// once from one address once the sockets are gone: four hold the
	// address's shares until their deadline, the fifth finds the
	// connection's share full.
	waitFor := func(k string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n, seen := answers[k], maps.Clone(answers)
			mu.Unlock()
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				require.Failf(t, "the attacker's reads do not time out", "no %q within 20 s; answers: %v", k, seen)
			}
		}
	}
	close(stopHTTP)
	waitFor("CLOSED error: read timed out")
	close(stop)
	for _, w := range socks {
		w.C.CloseNow()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_reads_in_flight") == 0 },
		10*time.Second, 20*time.Millisecond, "the sockets' reads end with them")
	connRefusals := r.Metric(t, `buzz_read_share_rejections_total{scope="connection"}`)
	var last sync.WaitGroup
	for range 5 {
		last.Go(func() {
			countOnce()
		})
	}
	last.Wait()
	require.Greater(t, r.Metric(t, `buzz_read_share_rejections_total{scope="connection"}`), connRefusals)
	require.Empty(t, failures)

	mu.Lock()
	defer mu.Unlock()
	for k := range answers {
		switch k {
		case `429 {"error":"rate-limited: too many concurrent reads"}`, `503 {"error":"error: read timed out"}`,
			"CLOSED rate-limited: too many concurrent reads", "CLOSED error: read timed out":
		default:
			require.Failf(t, "the attacker got an answer other than its refusals", "%q × %d", k, answers[k])
		}
	}
	require.Positive(t, answers[`429 {"error":"rate-limited: too many concurrent reads"}`], answers)
	require.Positive(t, answers[`503 {"error":"error: read timed out"}`], answers)
	require.Positive(t, answers["CLOSED rate-limited: too many concurrent reads"], answers)
	require.Positive(t, r.Metric(t, `buzz_read_share_rejections_total{scope="pubkey"}`))
	require.Positive(t, r.Metric(t, `buzz_read_timeouts_total{surface="count_http"}`))
	require.Positive(t, r.Metric(t, `buzz_read_timeouts_total{surface="count"}`)+r.Metric(t, `buzz_read_timeouts_total{surface="req"}`))

	// Nothing acknowledged was lost, and the shares are all given back.
	require.ElementsMatch(t, acked, query(t, r, hostB, reader, `[{"authors":["`+publisher.PubKey+`"],"kinds":[1]}]`))
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_reads_in_flight") == 0 },
		10*time.Second, 20*time.Millisecond)
}

// TestBridgeBusy: at BUZZ_HTTP_MAX_CONCURRENT bridge requests in flight
// the next one is answered 503 "error: server busy" with Retry-After at
// once; NIP-11 is not counted; once one finishes the bridge serves again.
func TestBridgeBusy(t *testing.T) {
	t.Parallel()
	hooks, setPool := slowFloodHooks()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_HTTP_MAX_CONCURRENT": "2", "BUZZ_READ_STATEMENT_TIMEOUT_MS": "4000",
	}, hooks)
	setPool(r.App.Pool())
	key := eventtest.NewKey()
	flood := `[{"kinds":[1],"#t":["` + floodTag + `"]}]`
	done := make(chan int, 2)
	for range 2 { // at the cap: both are served (and sleep)
		go func() {
			status, _, _, _ := bridgeCall(t, r, "127.0.0.1", r.Host, "/count", key, flood)
			done <- status
		}()
	}
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_reads_in_flight") == 2 },
		10*time.Second, 10*time.Millisecond)

	start := time.Now()
	status, body, hdr, err := bridgeCall(t, r, "127.0.0.1", r.Host, "/count", key, `[{"kinds":[1]}]`) // one over
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.JSONEq(t, `{"error":"error: server busy"}`, body)
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Less(t, time.Since(start), 2*time.Second, "refused at once")
	require.Equal(t, 1.0, r.Metric(t, `buzz_http_rejections_total{reason="busy"}`))
	status, _ = r.Do(t, relaytest.Request{Method: http.MethodGet, Path: "/", Header: map[string]string{"Accept": "application/nostr+json"}})
	require.Equal(t, http.StatusOK, status, "NIP-11 is not a bridge request")

	require.Equal(t, http.StatusServiceUnavailable, <-done, "the sleeping count timed out")
	status, body, _, err = bridgeCall(t, r, "127.0.0.1", r.Host, "/count", key, `[{"kinds":[1]}]`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)
	<-done
}

// TestConnectionsPerAddress: with BUZZ_MAX_CONNECTIONS_PER_ADDRESS=2 an
// address holding two WebSockets gets 429 for a third before any
// WebSocket exists; another address is not affected; a closed connection
// frees its place.
func TestConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_MAX_CONNECTIONS_PER_ADDRESS": "2"})
	first, second := r.Dial(t, ""), r.Dial(t, "") // at the cap
	status, body, retry := upgradeFrom(t, r, "127.0.0.1", "")
	require.Equal(t, http.StatusTooManyRequests, status) // one over
	require.Equal(t, "rate-limited: too many connections from this address", body)
	require.Equal(t, "1", retry)
	require.Equal(t, 1.0, r.Metric(t, `buzz_http_rejections_total{reason="address_connections"}`))
	status, _, _ = upgradeFrom(t, r, "127.0.0.2", "")
	require.Equal(t, http.StatusSwitchingProtocols, status, "another address has its own count")

	second.Auth(eventtest.NewKey()) // the held connections work
	first.C.CloseNow()
	require.Eventually(t, func() bool {
		status, _, _ := upgradeFrom(t, r, "127.0.0.1", "")
		return status == http.StatusSwitchingProtocols
	}, 10*time.Second, 20*time.Millisecond, "a closed connection frees its place")
}

// TestHTTPTimeouts: a client that stops sending its body is cut off at
// BUZZ_HTTP_READ_TIMEOUT_MS, an idle keep-alive connection at
// BUZZ_HTTP_IDLE_TIMEOUT_MS, while a WebSocket, hijacked from the same
// server, outlives both and the write timeout.
func TestHTTPTimeouts(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	r := relaytest.Start(t, map[string]string{
		"BUZZ_HTTP_READ_TIMEOUT_MS": "300", "BUZZ_HTTP_WRITE_TIMEOUT_MS": "300", "BUZZ_HTTP_IDLE_TIMEOUT_MS": "300",
	})
	addr := "127.0.0.1:" + strconv.Itoa(r.Port)

	t.Run("SlowBody", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		start := time.Now()
		_, err = io.WriteString(c, "POST /count HTTP/1.1\r\nHost: "+r.Host+"\r\nContent-Length: 100\r\n\r\n[{")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, _ = io.Copy(io.Discard, c) // whatever the answer, the server closes
		took := time.Since(start)
		require.GreaterOrEqual(t, took, limit-50*time.Millisecond)
		require.Less(t, took, 5*time.Second, "the connection was cut at the read timeout")
	})

	t.Run("IdleKeepAlive", func(t *testing.T) {
		t.Parallel()
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: "+r.Host+"\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200")), string(buf[:n]))
		start := time.Now()
		_, _ = io.Copy(io.Discard, c) // the server closes the idle connection
		require.Less(t, time.Since(start), 5*time.Second)
	})

	t.Run("WebSocketOutlivesThem", func(t *testing.T) {
		t.Parallel()
		w := r.Dial(t, "")
		w.Auth(eventtest.NewKey())
		start := time.Now()
		for n := 0; time.Since(start) < 4*limit; n++ {
			_, closed, eose := w.Req("s"+strconv.Itoa(n), map[string]any{"kinds": []int{1}, "limit": 1})
			require.True(t, eose, closed)
			w.Send("CLOSE", "s"+strconv.Itoa(n))
		}
		_, closed, eose := w.Req("last", map[string]any{"kinds": []int{1}, "limit": 1})
		require.True(t, eose, closed)
	})
}

// TestAbuseReadTime is the heavy-read flood within the shares: each read
// of the attacker pays the time it held its connection, so one read that
// runs into its 2 s deadline leaves the key ~1 s in debt (its burst is
// 1 s) at 250 ms a second, and its next reads, cheap or not, on either door, are refused
// "rate-limited: quota exceeded; retry in <n>s" (the bridge adds
// Retry-After) until the budget is earned back. Another key of the same
// community reads as before.
func TestAbuseReadTime(t *testing.T) {
	t.Parallel()
	hooks, setPool := slowFloodHooks()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_READ_TIME_PER_SECOND_MS":   "250",
		"BUZZ_READ_TIME_BURST_MS":        "1000",
		"BUZZ_READ_STATEMENT_TIMEOUT_MS": "2000",
	}, hooks)
	setPool(r.App.Pool())
	host := r.Community(t, "victim.test")
	attacker, honest := eventtest.NewKey(), eventtest.NewKey()
	w := r.Dial(t, host)
	w.Auth(attacker)

	_, closed, eose := w.Req("heavy", map[string]any{"kinds": []int{1}, "#t": []string{floodTag}})
	require.False(t, eose)
	require.Equal(t, "error: read timed out", closed)

	refused := func(msg string) int {
		t.Helper()
		n, ok := strings.CutPrefix(msg, "rate-limited: quota exceeded; retry in ")
		require.True(t, ok, "want the quota refusal, got %q", msg)
		secs, err := strconv.Atoi(strings.TrimSuffix(n, "s"))
		require.NoError(t, err, msg)
		require.True(t, secs >= 1 && secs <= 8, "retry in %d s: the debt is about 1 s at 250 ms/s", secs)
		return secs
	}
	_, closed, eose = w.Req("cheap", map[string]any{"kinds": []int{1}, "limit": 1})
	require.False(t, eose)
	refused(closed)
	w.Send("COUNT", "n", map[string]any{"kinds": []int{1}})
	msg := w.Next()
	require.Equal(t, "CLOSED", msg[0], msg)
	refused(msg[2].(string))
	status, body, header, err := bridgeCall(t, r, "127.0.0.1", host, "/count", attacker, `[{"kinds":[1]}]`)
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, status, body)
	var eb struct{ Error string }
	require.NoError(t, json.Unmarshal([]byte(body), &eb))
	secs := refused(eb.Error)
	require.Equal(t, strconv.Itoa(secs), header.Get("Retry-After"))
	require.GreaterOrEqual(t, r.Metric(t, `buzz_read_share_rejections_total{scope="read_time"}`), 3.0)

	// The other key of the same community is not touched.
	h := r.Dial(t, host)
	h.Auth(honest)
	_, closed, eose = h.Req("mine", map[string]any{"kinds": []int{1}, "limit": 1})
	require.True(t, eose, closed)
	status, body, _, err = bridgeCall(t, r, "127.0.0.2", host, "/count", honest, `[{"kinds":[1]}]`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)

	// Once the debt is paid the attacker reads again.
	require.Eventually(t, func() bool {
		_, _, eose := w.Req("later", map[string]any{"kinds": []int{1}, "limit": 1})
		return eose
	}, 20*time.Second, 500*time.Millisecond, "the budget refills")
}

// TestWarmTakesReadShare: the hot window's warm read holds one of the
// process's read shares while it runs, like the REQ that started it, so a
// flood of REQs that each warm a window cannot use more connections than
// the shares leave to reads (docs/ARCHITECTURE.md "Hot window"). A lock on
// events keeps both reads waiting in PostgreSQL: the relay then holds two
// shares, the REQ's and the warm's; once the lock goes, the REQ is
// answered, the window is warm and every share is given back.
func TestWarmTakesReadShare(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, nil)
	host := r.Community(t, "warm-share.test")
	key := eventtest.NewKey()
	w := r.Dial(t, host)
	w.Auth(key)
	var ids []string
	for i := range 3 {
		ev := key.Signed(t, 1, eventtest.Content("warm "+strconv.Itoa(i)))
		w.MustPublish(ev)
		ids = append(ids, ev.ID)
	}
	require.Zero(t, r.Metric(t, "buzz_reads_in_flight"))
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_hot_window_on") == 1 },
		10*time.Second, 10*time.Millisecond, "the window is on: a REQ warms it")

	ctx := context.Background()
	tx, err := r.App.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	w.Send("REQ", "cold", map[string]any{"kinds": []int{1}, "authors": []string{key.PubKey}, "limit": 10})
	require.Eventually(t, func() bool { return r.Metric(t, "buzz_reads_in_flight") == 2 },
		10*time.Second, 20*time.Millisecond, "the REQ's share and the warm's")
	require.NoError(t, tx.Rollback(ctx))

	var got []string
	for {
		msg := w.Next()
		if msg[0] == "EOSE" {
			break
		}
		require.Equal(t, "EVENT", msg[0], msg)
		got = append(got, msg[2].(map[string]any)["id"].(string))
	}
	require.ElementsMatch(t, ids, got)
	require.Eventually(t, func() bool {
		return r.Metric(t, `buzz_hot_window_warms_total{outcome="ok"}`) == 1 && r.Metric(t, "buzz_reads_in_flight") == 0
	}, 10*time.Second, 20*time.Millisecond, "the warm ends and gives its share back")
}
