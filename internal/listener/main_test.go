package listener_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/listener"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/notify"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// hit is one notification as a listener received it, already verified.
type hit struct {
	body []byte
}

// hook is a real local TLS server standing for an operator listener. It
// verifies every request's NIP-98 auth event on its own, with an
// independent Nostr library, against the relay pubkey it was given.
type hook struct {
	t        *testing.T
	srv      *httptest.Server
	relayPub string
	// answer returns the status of the n-th request (1-based); it may
	// block, and may write headers itself (then it returns 0).
	answer func(n int, w http.ResponseWriter) int

	count    atomic.Int64
	hits     chan hit
	inFlight atomic.Int64
	maxIn    atomic.Int64
	bad      chan string
}

// newHook starts a hook answering with answer.
func newHook(t *testing.T, relayPub string, answer func(n int, w http.ResponseWriter) int) *hook {
	t.Helper()
	h := &hook{t: t, relayPub: relayPub, answer: answer, hits: make(chan hit, 100), bad: make(chan string, 100)}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() {
		h.srv.Close()
		select {
		case why := <-h.bad:
			t.Errorf("listener saw a bad request: %s", why)
		default:
		}
	})
	return h
}

// status answers every request with code.
func status(code int) func(int, http.ResponseWriter) int {
	return func(int, http.ResponseWriter) int { return code }
}

// url is the listener's delivery URL (normalized: lowercase, a path).
func (h *hook) url() string { return h.srv.URL + "/hook" }

func (h *hook) serve(w http.ResponseWriter, r *http.Request) {
	in := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	for {
		m := h.maxIn.Load()
		if in <= m || h.maxIn.CompareAndSwap(m, in) {
			break
		}
	}
	n := int(h.count.Add(1))
	body, err := io.ReadAll(r.Body)
	if err != nil {
		h.bad <- "read body: " + err.Error()
		return
	}
	if why := h.verify(r, body); why != "" {
		h.bad <- why
	}
	h.hits <- hit{body: body}
	if code := h.answer(n, w); code != 0 {
		w.WriteHeader(code)
	}
}

// verify checks the request as a listener would (docs/PROTOCOL.md §15.6) and
// returns what is wrong, or "".
func (h *hook) verify(r *http.Request, body []byte) string {
	if r.Method != http.MethodPost || r.URL.Path != "/hook" || r.URL.RawQuery != "" {
		return "request line " + r.Method + " " + r.URL.String()
	}
	if r.Header.Get("Content-Type") != "application/json" {
		return "content type " + r.Header.Get("Content-Type")
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Nostr ")
	if !ok {
		return "no Nostr authorization"
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(token)
	if err != nil {
		return "authorization is not padded standard base64"
	}
	var ev nostr.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return "auth event JSON: " + err.Error()
	}
	if ev.ID != ev.GetID() {
		return "auth event id"
	}
	if ok, err := ev.CheckSignature(); err != nil || !ok {
		return "auth event signature"
	}
	sum := sha256.Sum256(body)
	switch {
	case ev.Kind != 27235 || ev.Content != "":
		return "auth event kind or content"
	case ev.PubKey != h.relayPub:
		return "auth event not signed by the relay key"
	case time.Since(ev.CreatedAt.Time()).Abs() > time.Minute:
		return "auth event created_at"
	case len(ev.Tags) != 4:
		return "auth event tags"
	case ev.Tags[0][0] != "u" || ev.Tags[0][1] != h.url():
		return "u tag " + strings.Join(ev.Tags[0], ",")
	case ev.Tags[1][0] != "method" || ev.Tags[1][1] != "POST":
		return "method tag"
	case ev.Tags[2][0] != "payload" || ev.Tags[2][1] != hex.EncodeToString(sum[:]):
		return "payload tag"
	case ev.Tags[3][0] != "nonce" || len(ev.Tags[3][1]) != 36:
		return "nonce tag"
	}
	return ""
}

// next returns the next request the hook received.
func (h *hook) next(t *testing.T) hit {
	t.Helper()
	select {
	case x := <-h.hits:
		return x
	case <-time.After(10 * time.Second):
		t.Fatal("the listener received no request")
		return hit{}
	}
}

// roots trusts the certificates of the given hooks.
func roots(hooks ...*hook) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, h := range hooks {
		pool.AddCert(h.srv.Certificate())
	}
	return pool
}

// testBundle is one test's database, relay key, logs and metrics.
type testBundle struct {
	pool     *pgxpool.Pool
	url      string
	st       *store.Store
	relayKey []byte
	relayPub string
	logs     *logtest.Buffer
	log      *slog.Logger
	reg      *prometheus.Registry
	m        *metrics.Metrics
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	key := event.GenerateKey()
	logs := &logtest.Buffer{}
	reg := prometheus.NewRegistry()
	return &testBundle{
		pool: pool, url: url, st: store.New(pool), relayKey: key, relayPub: event.PubKey(key),
		logs: logs, log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		reg: reg, m: metrics.New(reg),
	}
}

// client returns a notify client that trusts the hooks.
func (b *testBundle) client(t *testing.T, timeout time.Duration, hooks ...*hook) *notify.Client {
	t.Helper()
	c := notify.NewClient(timeout, b.relayKey, notify.WithRootCAs(roots(hooks...)))
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// worker starts a worker on pool routing listeners (pubkey → hook) and
// stops it at cleanup.
func (b *testBundle) worker(t *testing.T, pool *pgxpool.Pool, listeners map[string]*hook) *listener.Worker {
	t.Helper()
	urls := map[string]string{}
	var hooks []*hook
	for pubkey, h := range listeners {
		urls[pubkey] = h.url()
		hooks = append(hooks, h)
	}
	w := listener.NewWorker(listener.Config{
		Pool: pool, Listeners: urls, Client: b.client(t, 2*time.Second, hooks...),
		Logger: b.log, Metrics: b.m,
	})
	w.TestSignals.Init()
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	return w
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// community creates a community with host and returns its id.
func (b *testBundle) community(t *testing.T, host string) string {
	t.Helper()
	var id string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO communities (host) VALUES ($1) RETURNING id::text`, host).Scan(&id))
	return id
}

// row is an outbox row to enqueue with SQL.
type row struct {
	listener, target, community, eventID string
	kind                                 int
	createdAt                            int64
	age                                  time.Duration
}

// enqueue writes r as a pending outbox row created age ago and returns its id.
func (b *testBundle) enqueue(t *testing.T, r row) string {
	t.Helper()
	if r.target == "" {
		r.target = eventtest.NewKey().PubKey
	}
	if r.eventID == "" {
		r.eventID = eventtest.NewKey().PubKey
	}
	if r.kind == 0 {
		r.kind = 9
	}
	if r.createdAt == 0 {
		r.createdAt = time.Now().Unix()
	}
	var id string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO operator_listener_outbox
			(listener_pubkey, target_pubkey, community_id, event_id, event_kind, event_created_at, created_at)
		VALUES (decode($1, 'hex'), decode($2, 'hex'), $3, decode($4, 'hex'), $5, to_timestamp($6), now() - make_interval(secs => $7))
		RETURNING id::text`, r.listener, r.target, r.community, r.eventID, r.kind, r.createdAt, r.age.Seconds()).Scan(&id))
	return id
}

// outboxRow is the state of one outbox row.
type outboxRow struct {
	state            string
	attempts         int
	claimNull        bool
	leaseNull        bool
	nextIn           time.Duration // next_attempt_at − now()
	exists           bool
	claimID          string
	leaseUntilPassed bool
}

func (b *testBundle) row(t *testing.T, id string) outboxRow {
	t.Helper()
	var (
		r      outboxRow
		nextMs float64
		claim  *string
	)
	err := b.pool.QueryRow(context.Background(), `SELECT state, attempts, claim_id IS NULL, lease_until IS NULL,
			extract(epoch FROM next_attempt_at - clock_timestamp()) * 1000, claim_id::text, coalesce(lease_until < now(), false)
		FROM operator_listener_outbox WHERE id = $1`, id).
		Scan(&r.state, &r.attempts, &r.claimNull, &r.leaseNull, &nextMs, &claim, &r.leaseUntilPassed)
	if err != nil {
		require.ErrorContains(t, err, "no rows")
		return r
	}
	r.exists = true
	r.nextIn = time.Duration(nextMs * float64(time.Millisecond))
	if claim != nil {
		r.claimID = *claim
	}
	return r
}

// delivered waits for the worker's next applied outcome.
func delivered(t *testing.T, w *listener.Worker) listener.Delivery {
	t.Helper()
	return w.TestSignals.Delivered.WaitOrTimeout(t)
}

// idleTurns waits until the worker ran n more claims, whatever they took.
func idleTurns(t *testing.T, w *listener.Worker, n int) {
	t.Helper()
	for range n {
		w.TestSignals.Claimed.WaitOrTimeout(t)
	}
}

// deliveries reads buzz_operator_listener_deliveries_total{outcome}.
func (b *testBundle) deliveries(outcome string) float64 {
	return testutil.ToFloat64(b.m.Listener.Deliveries.WithLabelValues(outcome))
}

// postsTimed reads the sample count of buzz_operator_listener_delivery_seconds.
func (b *testBundle) postsTimed(t *testing.T) uint64 {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "buzz_operator_listener_delivery_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("buzz_operator_listener_delivery_seconds is not registered")
	return 0
}

// logLines returns the logged records whose msg is msg.
func (b *testBundle) logLines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// gate holds a hook's answers until it is opened; the test's cleanup
// opens it before the hook's server closes, so a failing test never hangs.
type gate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{arrived: make(chan struct{}, 100), open: make(chan struct{})}
	t.Cleanup(g.release)
	return g
}

// hold reports the request's arrival and waits until the gate opens.
func (g *gate) hold() {
	g.arrived <- struct{}{}
	<-g.open
}

// wait returns once a request arrived at the gate.
func (g *gate) wait(t *testing.T) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no request arrived at the gate")
	}
}

// release opens the gate. Safe to call twice.
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }
