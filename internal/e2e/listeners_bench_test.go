package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// The shape of BenchmarkListenerIngest (target P1 of docs/PERFORMANCE.md, with mentions): 8
// authenticated connections with one EVENT in flight each, kind 9 in one
// open channel, each event p-tagging 2 distinct pubkeys of a pool of 64.
const (
	lbConns       = 8
	lbTargetPool  = 64
	lbTagsPer     = 2
	lbListeners   = 3
	lbWordsPer    = 12
	lbVocabulary  = 186
	lbIngestDrain = 120 * time.Second
)

// BenchmarkListenerIngest measures what operator-listener registrations
// cost the P1 ingest path (docs/PROTOCOL.md §15.4, target P1). One relay is started
// with three listeners configured, each a real local HTTPS endpoint that
// answers 204; in one benchmark iteration it ingests two phases of
// BUZZ_LISTENER_BENCH_EVENTS (default 10,000) pre-signed kind 9 events
// over 8 authenticated connections, one EVENT in flight each, every event
// p-tagging 2 distinct pubkeys drawn from a pool of 64:
//
//   - "none": nothing is registered, so every event runs the enqueue
//     statement and it matches no registration;
//   - "3listeners": each of the three listeners has registered the same
//     half of the pool (32 pubkeys), so an event creates on average 3
//     outbox rows in its transaction, and the delivery worker POSTs them
//     while the ingest runs.
//
// Reported: events/s and EVENT → OK p50/p99 per phase, then for the second
// phase the notifications the endpoints received and how long after the
// last OK the outbox took to drain (bounded at 2 minutes). The second phase
// runs on a table that already holds the first phase's events. Figures are
// reported, never judged.
//
//	go test -run '^$' -bench ListenerIngest -benchtime 1x -count 3 ./internal/e2e
//
// The relay verifies the endpoints' certificates against the system roots;
// lbTrust makes them trusted through SSL_CERT_FILE (see there).
func BenchmarkListenerIngest(b *testing.B) {
	events := 10000
	if v, err := strconv.Atoi(os.Getenv("BUZZ_LISTENER_BENCH_EVENTS")); err == nil && v > 0 {
		events = v
	}
	for b.Loop() {
		endpoints := make([]*lbEndpoint, lbListeners)
		for i := range endpoints {
			endpoints[i] = lbNewEndpoint(b, 0)
		}
		lbTrust(b, endpoints...)
		keys := make([]eventtest.Key, lbListeners)
		routes := make([]string, lbListeners)
		for i := range keys {
			keys[i] = eventtest.NewKey()
			routes[i] = keys[i].PubKey + ":" + endpoints[i].URL()
		}
		r := relaytest.Start(b, map[string]string{
			"BUZZ_OPERATOR_LISTENERS":   strings.Join(routes, ";"),
			"RELAY_OPERATOR_API_ORIGIN": "https://ops.example",
		})
		cid := lbCommunityID(b, r)
		authors := make([]eventtest.Key, lbConns)
		conns := make([]*relaytest.WS, lbConns)
		for c := range authors {
			authors[c] = eventtest.NewKey()
			conns[c] = r.Dial(b, "")
			conns[c].Auth(authors[c])
		}
		ch := lbChannel(b, r, cid, authors[0])
		pool := make([]string, lbTargetPool)
		for i := range pool {
			pool[i] = eventtest.NewKey().PubKey
		}
		registered := pool[:lbTargetPool/2]

		none := lbSignIngest(b, authors, ch, pool, events)
		with := lbSignIngest(b, authors, ch, pool, events)

		res := lbIngest(b, conns, none)
		b.Logf("none: %d events in %.1f s (%.0f ev/s), OK p50 %.2f ms, p99 %.2f ms",
			events, res.elapsed.Seconds(), res.rate(), res.p(0.5), res.p(0.99))
		b.ReportMetric(res.rate(), "none-ev/s")
		b.ReportMetric(res.p(0.5), "none-p50-ms")
		b.ReportMetric(res.p(0.99), "none-p99-ms")

		for _, k := range keys {
			require.NoError(b, r.App.Store().ListenerRegister(context.Background(), k.PubKey, registered))
		}
		want := 0
		for _, job := range with {
			for _, ev := range job {
				want += lbListeners * lbMatches(ev, registered)
			}
		}
		res = lbIngest(b, conns, with)
		lastOK := time.Now()
		drained := time.Duration(-1)
		got := 0
		for deadline := lastOK.Add(lbIngestDrain); ; time.Sleep(20 * time.Millisecond) {
			got = 0
			for _, e := range endpoints {
				got += e.posts()
			}
			if got >= want {
				drained = time.Since(lastOK)
				break
			}
			if time.Now().After(deadline) {
				break
			}
		}
		b.Logf("3listeners: %d events in %.1f s (%.0f ev/s), OK p50 %.2f ms, p99 %.2f ms; %d of %d notifications received, drained %.1f s after the last OK",
			events, res.elapsed.Seconds(), res.rate(), res.p(0.5), res.p(0.99), got, want, drained.Seconds())
		b.ReportMetric(res.rate(), "3listeners-ev/s")
		b.ReportMetric(res.p(0.5), "3listeners-p50-ms")
		b.ReportMetric(res.p(0.99), "3listeners-p99-ms")
		b.ReportMetric(float64(got), "3listeners-posts")
		b.ReportMetric(drained.Seconds(), "3listeners-drain-s")
		r.Stop()
	}
}

// BenchmarkListenerDelivery measures the delivery lag of operator-listener
// notifications (docs/PROTOCOL.md §15.5, the delivery half): one listener,
// a real local HTTPS endpoint answering 204 at once, has registered 64
// pubkeys; kind 9 events each mentioning one of them are published at
// BUZZ_LISTENER_BENCH_RATE per second (default 100) for
// BUZZ_LISTENER_BENCH_SECONDS (default 20), job i due i/rate seconds after
// the start, over 8 authenticated connections. For each notification the
// lag is the time from the publisher reading the event's OK to the endpoint
// receiving the POST, matched by the body's event_id (a POST that arrives
// before its OK was read counts as a lag of 0). After the last OK the
// benchmark waits up to 30 s for the rest. Reported: lag p50, p99 and max
// in ms, notifications delivered and missing, duplicate POSTs, and the
// publish rate reached. Figures are reported, never judged.
//
//	go test -run '^$' -bench ListenerDelivery -benchtime 1x -count 3 ./internal/e2e
//
// BUZZ_LISTENER_BENCH_DELAY_MS makes the endpoint wait that long before it
// answers (the listener answers in 50 ms). The relay verifies the
// endpoint's certificate against the system roots; lbTrust makes it
// trusted through SSL_CERT_FILE (see there).
func BenchmarkListenerDelivery(b *testing.B) {
	rate, seconds, delay := 100.0, 20.0, time.Duration(0)
	if v, err := strconv.ParseFloat(os.Getenv("BUZZ_LISTENER_BENCH_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	if v, err := strconv.ParseFloat(os.Getenv("BUZZ_LISTENER_BENCH_SECONDS"), 64); err == nil && v > 0 {
		seconds = v
	}
	if v, err := strconv.Atoi(os.Getenv("BUZZ_LISTENER_BENCH_DELAY_MS")); err == nil && v > 0 {
		delay = time.Duration(v) * time.Millisecond
	}
	const drain = 30 * time.Second
	for b.Loop() {
		e := lbNewEndpoint(b, delay)
		lbTrust(b, e)
		listener := eventtest.NewKey()
		r := relaytest.Start(b, map[string]string{
			"BUZZ_OPERATOR_LISTENERS":   listener.PubKey + ":" + e.URL(),
			"RELAY_OPERATOR_API_ORIGIN": "https://ops.example",
		})
		cid := lbCommunityID(b, r)
		targets := make([]string, lbTargetPool)
		for i := range targets {
			targets[i] = eventtest.NewKey().PubKey
		}
		require.NoError(b, r.App.Store().ListenerRegister(context.Background(), listener.PubKey, targets))
		authors := make([]eventtest.Key, lbConns)
		conns := make([]*relaytest.WS, lbConns)
		for c := range authors {
			authors[c] = eventtest.NewKey()
			conns[c] = r.Dial(b, "")
			conns[c].Auth(authors[c])
		}
		ch := lbChannel(b, r, cid, authors[0])

		// Pre-sign: job i goes to connection i mod 8 and mentions targets[i mod 64].
		n := max(1, int(rate*seconds))
		evs := make([]event.Event, n)
		var wg sync.WaitGroup
		for c := range lbConns {
			wg.Go(func() {
				for i := c; i < n; i += lbConns {
					evs[i] = authors[c].Signed(b, event.KindStreamMessage, eventtest.Channel(ch),
						eventtest.Tag("p", targets[i%len(targets)]), eventtest.Content("mention "+strconv.Itoa(i)))
				}
			})
		}
		wg.Wait()
		index := make(map[string]int, n)
		for i, ev := range evs {
			index[ev.ID] = i
		}

		okAt := make([]time.Time, n)
		start := time.Now()
		for c := range lbConns {
			wg.Go(func() {
				for i := c; i < n; i += lbConns {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
					if _, err := lbPublish(conns[c], lbFrame(evs[i]), evs[i].ID); err != nil {
						b.Errorf("connection %d, job %d: %v", c, i, err)
						return
					}
					okAt[i] = time.Now()
				}
			})
		}
		wg.Wait()
		published := time.Since(start)
		for deadline := time.Now().Add(drain); e.distinct() < n && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}

		first, posts := e.arrivals()
		lags := make([]time.Duration, 0, n)
		for id, at := range first {
			i, ok := index[id]
			if !ok || okAt[i].IsZero() {
				continue
			}
			lags = append(lags, max(0, at.Sub(okAt[i])))
		}
		slices.Sort(lags)
		res := lbResult{lat: lags}
		delivered, missing := len(lags), n-len(lags)
		b.Logf("%d mentions in %.1f s (%.0f/s); delivered %d, missing %d, duplicates %d; lag p50 %.1f ms, p99 %.1f ms, max %.1f ms",
			n, published.Seconds(), float64(n)/published.Seconds(), delivered, missing, posts-len(first),
			res.p(0.5), res.p(0.99), res.p(1))
		b.ReportMetric(res.p(0.5), "delivery-p50-ms")
		b.ReportMetric(res.p(0.99), "delivery-p99-ms")
		b.ReportMetric(res.p(1), "delivery-max-ms")
		b.ReportMetric(float64(delivered), "delivered")
		b.ReportMetric(float64(missing), "missing")
		b.ReportMetric(float64(posts-len(first)), "duplicates")
		b.ReportMetric(float64(n)/published.Seconds(), "published-ev/s")
		r.Stop()
	}
}

// lbTrusted is the certificate lbTrust put in SSL_CERT_FILE, once per process.
var (
	lbTrustOnce sync.Once
	lbTrusted   *x509.Certificate
	lbTrustErr  error
)

// lbTrust makes the endpoints' certificate trusted by the relay's notify
// client, which verifies listener certificates against the system roots
// (TLS verification is never turned off). The first call in the process
// writes the certificate to a temporary file, points SSL_CERT_FILE at it
// with os.Setenv and loads the system pool at once. Go reads the system
// roots once per process, on first use; this is safe because these
// benchmarks run with -run '^$' (as make bench does), so no test shares
// the process, and nothing before them verifies a certificate: the other
// benchmarks of this package use no TLS and the database is reached
// without TLS verification. Every httptest TLS server carries
// the same built-in certificate, which later calls check; each call then
// verifies its endpoints' certificates against the system pool, so a pool
// loaded too early fails here instead of showing up as missing deliveries.
func lbTrust(b *testing.B, endpoints ...*lbEndpoint) {
	b.Helper()
	lbTrustOnce.Do(func() {
		lbTrusted = endpoints[0].srv.Certificate()
		file := filepath.Join(b.TempDir(), "listener-endpoints.pem")
		if lbTrustErr = os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: lbTrusted.Raw}), 0o600); lbTrustErr != nil {
			return
		}
		if lbTrustErr = os.Setenv("SSL_CERT_FILE", file); lbTrustErr != nil {
			return
		}
		_, lbTrustErr = x509.SystemCertPool() // loads the roots now; the file may go with the temp dir
	})
	require.NoError(b, lbTrustErr)
	roots, err := x509.SystemCertPool()
	require.NoError(b, err)
	for _, e := range endpoints {
		cert := e.srv.Certificate()
		require.True(b, cert.Equal(lbTrusted), "every httptest TLS server has the same certificate")
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
		require.NoError(b, err, "the endpoint must be trusted by the system roots (loaded before SSL_CERT_FILE was set?)")
	}
}

// lbEndpoint is a real local HTTPS listener endpoint: it records when each
// POST arrived, by the event_id of its body, waits delay and answers 204.
type lbEndpoint struct {
	srv   *httptest.Server
	mu    sync.Mutex
	first map[string]time.Time
	total atomic.Int64
}

func lbNewEndpoint(b *testing.B, delay time.Duration) *lbEndpoint {
	b.Helper()
	e := &lbEndpoint{first: make(map[string]time.Time)}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(r.Body)
		var n struct {
			EventID string `json:"event_id"`
		}
		if err == nil && json.Unmarshal(body, &n) == nil && n.EventID != "" {
			e.mu.Lock()
			if _, seen := e.first[n.EventID]; !seen {
				e.first[n.EventID] = at
			}
			e.mu.Unlock()
		}
		e.total.Add(1)
		if delay > 0 {
			time.Sleep(delay)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(e.srv.Close)
	return e
}

// URL is the endpoint's delivery URL.
func (e *lbEndpoint) URL() string { return e.srv.URL + "/hook" }

// posts is the number of POSTs received.
func (e *lbEndpoint) posts() int { return int(e.total.Load()) }

// distinct is the number of distinct event ids received.
func (e *lbEndpoint) distinct() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.first)
}

// arrivals returns when each event id was first received, and the number
// of POSTs received.
func (e *lbEndpoint) arrivals() (map[string]time.Time, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.first), e.posts()
}

// lbResult is one ingest or delivery phase: the sorted latencies and the
// wall time.
type lbResult struct {
	lat     []time.Duration
	elapsed time.Duration
}

// rate is events per second.
func (r lbResult) rate() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

// p is the q-quantile latency in milliseconds (q = 1 is the maximum), 0
// without samples.
func (r lbResult) p(q float64) float64 {
	if len(r.lat) == 0 {
		return 0
	}
	return float64(r.lat[min(len(r.lat)-1, int(q*float64(len(r.lat))))]) / float64(time.Millisecond)
}

// lbSignIngest pre-signs n kind 9 events in channel ch, event i by author
// i mod 8: 12 words of a 186-word vocabulary and p tags for 2 distinct
// pubkeys of pool. It returns the events of each author.
func lbSignIngest(b *testing.B, authors []eventtest.Key, ch string, pool []string, n int) [][]event.Event {
	b.Helper()
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	var syllables []string
	for _, c := range cons {
		for _, v := range vows {
			syllables = append(syllables, string(c)+string(v))
		}
	}
	vocab := make([]string, lbVocabulary) // distinct: (i mod 70, i / 70) differ
	for i := range vocab {
		vocab[i] = syllables[i%len(syllables)] + syllables[i/len(syllables)] + "n"
	}
	jobs := make([][]event.Event, len(authors))
	var wg sync.WaitGroup
	for c := range authors {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(n)))
			words := make([]string, lbWordsPer)
			for i := c; i < n; i += len(authors) {
				for w := range words {
					words[w] = vocab[rng.IntN(len(vocab))]
				}
				p := rng.Perm(len(pool))[:lbTagsPer]
				jobs[c] = append(jobs[c], authors[c].Signed(b, event.KindStreamMessage, eventtest.Channel(ch),
					eventtest.Tag("p", pool[p[0]]), eventtest.Tag("p", pool[p[1]]),
					eventtest.Content(strings.Join(words, " ")+" "+uuid.NewString()[:8])))
			}
		})
	}
	wg.Wait()
	return jobs
}

// lbMatches is how many of ev's p tags name a pubkey of registered.
func lbMatches(ev event.Event, registered []string) int {
	n := 0
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "p" && slices.Contains(registered, t[1]) {
			n++
		}
	}
	return n
}

// lbIngest publishes jobs[c] over conns[c], one EVENT in flight per
// connection, as fast as the relay answers, and returns the sorted
// EVENT → OK latencies and the wall time of the whole phase.
func lbIngest(b *testing.B, conns []*relaytest.WS, jobs [][]event.Event) lbResult {
	b.Helper()
	frames := make([][][]byte, len(jobs))
	for c, evs := range jobs {
		for _, ev := range evs {
			frames[c] = append(frames[c], lbFrame(ev))
		}
	}
	lat := make([][]time.Duration, len(conns))
	start := time.Now()
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			for k, f := range frames[c] {
				d, err := lbPublish(conns[c], f, jobs[c][k].ID)
				if err != nil {
					b.Errorf("connection %d, event %d: %v", c, k, err)
					return
				}
				lat[c] = append(lat[c], d)
			}
		})
	}
	wg.Wait()
	res := lbResult{lat: slices.Concat(lat...), elapsed: time.Since(start)}
	slices.Sort(res.lat)
	return res
}

// lbFrame is the EVENT frame of ev.
func lbFrame(ev event.Event) []byte {
	return append(append([]byte(`["EVENT",`), ev.AppendJSON(nil)...), ']')
}

// lbPublish writes frame and reads frames until the OK for id, returning
// the time from the write to the OK; an OK false or a non-empty message is
// an error.
func lbPublish(w *relaytest.WS, frame []byte, id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	if err := w.C.Write(ctx, websocket.MessageText, frame); err != nil {
		return 0, fmt.Errorf("write EVENT: %w", err)
	}
	for {
		msg, err := w.NextErr(10 * time.Second)
		if err != nil {
			return 0, fmt.Errorf("read OK: %w", err)
		}
		if len(msg) == 4 && msg[0] == "OK" && msg[1] == id {
			d := time.Since(t0)
			if msg[2] != true || msg[3] != "" {
				return d, fmt.Errorf("OK %v %v", msg[2], msg[3])
			}
			return d, nil
		}
	}
}

// lbCommunityID is the deployment community's id.
func lbCommunityID(b *testing.B, r *relaytest.Relay) string {
	b.Helper()
	c, err := r.App.Store().CommunityByHost(context.Background(), r.Host)
	require.NoError(b, err)
	return c.ID
}

// lbChannel inserts an open channel in community cid, created by creator,
// and returns its id.
func lbChannel(b *testing.B, r *relaytest.Relay, cid string, creator eventtest.Key) string {
	b.Helper()
	id := uuid.NewString()
	_, err := r.App.Pool().Exec(context.Background(), `INSERT INTO channels (community_id, id, name, visibility, created_by)
		VALUES ($1, $2, $3, 'open'::channel_visibility, decode($4, 'hex'))`, cid, id, "bench-"+id[:8], creator.PubKey)
	require.NoError(b, err)
	return id
}
