package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
	"github.com/buzz-relay/buzz/internal/wsapi"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
}

var errInjected = errors.New("injected failure")

// testDB is one migrated database shared by the subtests of one test
// function. Every bundle has communities of its own in it, so parallel
// subtests never see each other's rows.
type testDB struct {
	pool *pgxpool.Pool
	url  string
}

func newDB(t *testing.T) *testDB {
	t.Helper()
	pool, dbURL := dbtest.NewDB(t)
	require.NoError(t, pg.EnsurePartitions(context.Background(), pool, time.Now(), pg.DefaultPartitionsAhead))
	return &testDB{pool: pool, url: dbURL}
}

// openPool opens another pool on the database with extra connection
// settings (URL query parameters, such as PostgreSQL run-time settings).
func (d *testDB) openPool(t *testing.T, params map[string]string) *pgxpool.Pool {
	t.Helper()
	u, err := url.Parse(d.url)
	require.NoError(t, err)
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	pool, err := pg.Open(context.Background(), u.String(), pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// readOnlyStore is a store on a connection whose transactions PostgreSQL
// keeps read-only: every write through it fails in the database.
func (d *testDB) readOnlyStore(t *testing.T) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	pool := d.openPool(t, map[string]string{"default_transaction_read_only": "on"})
	return pool, store.New(pool)
}

// downStore is a store whose pool is closed, as when the database cannot be
// reached: every call through it fails.
func (d *testDB) downStore(t *testing.T) *store.Store { return store.New(d.downPool(t)) }

// downPool is a closed pool, as when the database cannot be reached.
func (d *testDB) downPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := d.openPool(t, nil)
	pool.Close()
	return pool
}

// deliveries is the pipeline's live side, standing where the relay's
// fan-out stands in production: it remembers every committed event offered
// to live subscriptions and drops the reader's cached access as the
// pipeline asks. No door here holds live subscriptions to evict or
// interrupt.
type deliveries struct {
	mu     sync.Mutex
	got    []ingest.Delivery
	reader *read.Engine
}

func (d *deliveries) Forget(cid, _, reader string) { d.reader.Forget(cid, reader) }

func (d *deliveries) Evict(string, string, string, func(string) bool) {}

func (d *deliveries) Interrupt(string) {}
func (d *deliveries) Unsettled(string) {}

func (d *deliveries) Broadcast(x ingest.Delivery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, x)
}

// of returns the deliveries of one event.
func (d *deliveries) of(id string) []ingest.Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ingest.Delivery
	for _, x := range d.got {
		if x.Event.ID == id {
			out = append(out, x)
		}
	}
	return out
}

func (d *deliveries) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// readHooks is the read engine's fault-injection point: it counts history
// queries (and search statements) and fails them while fail is set.
type readHooks struct {
	fail  atomic.Bool
	calls atomic.Int64
}

func (h *readHooks) before(context.Context, *event.Filter) error {
	h.calls.Add(1)
	if h.fail.Load() {
		return errInjected
	}
	return nil
}

// testBundle is one door served over HTTP in front of the real parts: the
// store, the cached host resolver, the read engine and the ingest pipeline
// on the test function's database, with communities of its own.
type testBundle struct {
	db       *testDB
	st       *store.Store
	pipeline *ingest.Pipeline
	reader   *read.Engine
	resolver *tenant.Resolver
	fan      *deliveries
	reads    *readHooks
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	log      *slog.Logger
	// ta and tb are two communities; local is one on a localhost:port host.
	ta, tb, local tenant.Tenant
	// general is an open channel of ta owned by key.
	general string
	key     eventtest.Key
	// now is the door's clock, fixed when the door was served.
	now    time.Time
	cfg    httpapi.Config
	url    string
	client *http.Client
}

// localPorts keeps the localhost:port hosts apart within a database.
var localPorts atomic.Int64

func init() { localPorts.Store(3000) }

// setup builds the parts on d, two communities and a localhost one, the
// open channel "general" in the first, and serves a door whose Config the
// change functions adjust.
func setup(t *testing.T, d *testDB, change ...func(*httpapi.Config)) *testBundle {
	t.Helper()
	st := store.New(d.pool)
	b := &testBundle{
		db:       d,
		st:       st,
		fan:      &deliveries{},
		reads:    &readHooks{},
		registry: prometheus.NewRegistry(),
		key:      eventtest.NewKey(),
		log:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	b.metrics = metrics.New(b.registry)
	ca := fixture.Community(t, d.pool)
	cb := fixture.Community(t, d.pool)
	cl := fixture.Community(t, d.pool, "localhost:"+strconv.FormatInt(localPorts.Add(1), 10))
	b.ta = tenant.Tenant{CommunityID: ca.ID, Host: ca.Host}
	b.tb = tenant.Tenant{CommunityID: cb.ID, Host: cb.Host}
	b.local = tenant.Tenant{CommunityID: cl.ID, Host: cl.Host}
	b.general = fixture.Channel(t, d.pool, ca.ID, b.key, fixture.Named("general"))

	b.resolver = tenant.NewResolver(tenant.Config{LookupFunc: st.CommunityIDByHost})
	b.reader = read.New(read.Config{Pool: d.pool, Metrics: b.metrics, Logger: b.log, QueryHookFunc: b.reads.before})
	b.fan.reader = b.reader
	b.pipeline = b.newPipeline(d.pool)
	t.Cleanup(b.pipeline.Close)
	b.cfg = httpapi.Config{
		Resolver:  b.resolver,
		Submitter: b.pipeline,
		Reader:    b.reader,
		Members:   st,
		Replay:    st,
		WebSocket: wsapi.New(wsapi.Config{Resolver: b.resolver, Submitter: b.pipeline, Reader: b.reader, Members: st,
			Settings: config.Defaults()}),
		Metrics:  b.metrics,
		Logger:   b.log,
		Version:  "test-1",
		Settings: config.Defaults(),
	}
	return b.serve(t, change...)
}

// newPipeline is the ingest pipeline on pool, wired as the
// composition root wires it, fanning out to b.fan.
func (b *testBundle) newPipeline(pool *pgxpool.Pool) *ingest.Pipeline {
	return ingest.New(ingest.Config{
		Pool: pool, Live: b.fan, Metrics: b.metrics, Logger: b.log, RelayKey: event.GenerateKey(),
	})
}

// serve starts another door on the same parts and communities, with the
// change functions applied to a copy of the bundle's Config. The new door's
// clock stands still at the time serve was called.
func (b *testBundle) serve(t *testing.T, change ...func(*httpapi.Config)) *testBundle {
	t.Helper()
	nb := *b
	nb.now = time.Now()
	cfg := b.cfg
	cfg.NowFunc = func() time.Time { return nb.now }
	for _, c := range change {
		c(&cfg)
	}
	srv := httptest.NewServer(httpapi.New(cfg).Handler())
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	nb.cfg, nb.url, nb.client = cfg, srv.URL, &http.Client{Transport: tr}
	return &nb
}

// submit runs events through the pipeline directly (not through the door,
// so no NIP-98 id or HTTP metric is spent), as the tenant ta and each
// event's author; each must be accepted.
func (b *testBundle) submit(t *testing.T, evs ...event.Event) {
	t.Helper()
	for _, ev := range evs {
		res := b.pipeline.Submit(context.Background(), ingest.Request{Tenant: b.ta, Author: ev.PubKey, Source: ingest.SourceWebSocket, Event: ev})
		require.Equal(t, ingest.Accepted, res.Code, res.Message)
	}
}

// privateChannel creates a private channel of ta owned by a new key, with
// one kind-9 message by its owner; b.key is not a member.
func (b *testBundle) privateChannel(t *testing.T) (id string, owner eventtest.Key, msg event.Event) {
	t.Helper()
	owner = eventtest.NewKey()
	id = fixture.Channel(t, b.db.pool, b.ta.CommunityID, owner, fixture.Private(), fixture.Named("secret"))
	msg = fixture.Event(t, b.db.pool, b.ta.CommunityID, owner, 9, eventtest.Channel(id), eventtest.Content("secret message"))
	return id, owner, msg
}

// replayRows counts the NIP-98 ids recorded for a community.
func (b *testBundle) replayRows(t *testing.T, communityID string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM nip98_replay WHERE community_id = $1`, communityID).Scan(&n))
	return n
}

// total sums every series of a counter family of the bundle's metrics.
func (b *testBundle) total(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := b.registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// urlA is the http URL of path on the first community.
func (b *testBundle) urlA(path string) string { return "http://" + b.ta.Host + path }

// response is an answered request.
type response struct {
	status int
	body   string
	header http.Header
}

// do sends a request with the given Host header.
func (b *testBundle) do(t *testing.T, method, hostHeader, target string, body []byte, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.url+target, bytes.NewReader(body))
	require.NoError(t, err)
	req.Host = hostHeader
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, body: string(got), header: res.Header}
}

// signedPost sends a POST to the first community signed by key for its
// URL, with a payload tag.
func (b *testBundle) signedPost(t *testing.T, key eventtest.Key, path string, body []byte) response {
	t.Helper()
	return b.do(t, http.MethodPost, b.ta.Host, path, body,
		map[string]string{"Authorization": nip98(t, key, "POST", b.urlA(path), body)})
}

// nip98 returns an Authorization header signed by key for method and url,
// with the payload tag of body when body is not nil.
func nip98(t *testing.T, key eventtest.Key, method, url string, body []byte, opts ...eventtest.Option) string {
	t.Helper()
	return auth.NIP98Header(nip98Event(t, key, method, url, body, opts...))
}

// nip98Event is the signed token event of nip98.
func nip98Event(t *testing.T, key eventtest.Key, method, url string, body []byte, opts ...eventtest.Option) event.Event {
	t.Helper()
	// A distinct content per token keeps ids apart within one second.
	o := []eventtest.Option{eventtest.Content(strconv.FormatInt(tokenSeq.Add(1), 10)), eventtest.Tag("u", url), eventtest.Tag("method", method)}
	if body != nil {
		sum := sha256.Sum256(body)
		o = append(o, eventtest.Tag("payload", hex.EncodeToString(sum[:])))
	}
	return key.Signed(t, auth.KindHTTPAuth, append(o, opts...)...)
}

var tokenSeq atomic.Int64

func errorJSON(msg string) string { return `{"error":` + jsonString(msg) + `}` }

func jsonString(s string) string { return string(event.AppendString(nil, s)) }
