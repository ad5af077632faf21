package wsapi

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/tenant"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const waitFor = 10 * time.Second

// testDB is one migrated PostgreSQL database (dbtest) shared by the
// parallel subtests of one test function. Each bundle set up on it gets
// communities, hosts and channels of its own, so bundles never see each
// other's rows.
type testDB struct {
	pool  *pgxpool.Pool
	url   string
	store *store.Store
}

func newTestDB(t *testing.T) *testDB {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	return &testDB{pool: pool, url: url, store: store.New(pool)}
}

// options adjust a bundle beyond the relay Config.
type options struct {
	// config adjusts the relay Config before New.
	config func(*Config)
	// queryHook is the read engine's QueryHookFunc (fault injection).
	queryHook func(ctx context.Context, f *event.Filter) error
	// members, when set, is the store the relay asks about relay
	// membership instead of the bundle's own (the same database through
	// another pool).
	members *store.Store
}

// testBundle is a relay Server wired to the real parts, as package app
// wires them: store, host resolver, read engine and ingest pipeline on a
// real database, with the pipeline's fan-out and evictions going to the
// Server, served by an httptest server.
type testBundle struct {
	db       *testDB
	srv      *Server
	ts       *httptest.Server
	store    *store.Store
	reader   *read.Engine
	pipeline *ingest.Pipeline
	metrics  *metrics.Metrics

	// hostA and hostB are the hosts of two communities of this bundle.
	hostA, hostB           string
	communityA, communityB string
	// owner owns the channels below (all in community A).
	owner eventtest.Key
	// channelC and channelD are open channels: every reader may read and
	// post in them.
	channelC, channelD string
	// private is a private channel whose only member is owner.
	private string
}

// setup starts a bundle on db; mutate adjusts the relay Config. Cleanup
// shuts the Server down and waits for every connection to end.
func (db *testDB) setup(t *testing.T, mutate func(*Config)) *testBundle {
	t.Helper()
	return db.setupWith(t, options{config: mutate})
}

func (db *testDB) setupWith(t *testing.T, o options) *testBundle {
	t.Helper()
	b := &testBundle{
		db:      db,
		store:   db.store,
		metrics: metrics.New(prometheus.NewRegistry()),
		owner:   eventtest.NewKey(),
	}
	ca, cb := fixture.Community(t, db.pool), fixture.Community(t, db.pool)
	b.hostA, b.hostB, b.communityA, b.communityB = ca.Host, cb.Host, ca.ID, cb.ID
	b.channelC = fixture.Channel(t, db.pool, b.communityA, b.owner)
	b.channelD = fixture.Channel(t, db.pool, b.communityA, b.owner)
	b.private = fixture.Channel(t, db.pool, b.communityA, b.owner, fixture.Private())

	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.reader = read.New(read.Config{Pool: db.pool, Metrics: b.metrics, Logger: log, QueryHookFunc: o.queryHook})
	fan := &fanout{reader: b.reader}
	b.pipeline = ingest.New(ingest.Config{
		Pool: db.pool, Live: fan, Metrics: b.metrics, Logger: log, RelayKey: event.GenerateKey(),
	})
	t.Cleanup(b.pipeline.Close)
	members := db.store
	if o.members != nil {
		members = o.members
	}
	cfg := Config{
		Resolver:  tenant.NewResolver(tenant.Config{LookupFunc: db.store.CommunityIDByHost}),
		Submitter: b.pipeline,
		Reader:    b.reader,
		Members:   members,
		Metrics:   b.metrics,
		Logger:    log,
		Settings:  config.Defaults(),
	}
	if o.config != nil {
		o.config(&cfg)
	}
	b.srv = New(cfg)
	fan.srv = b.srv
	b.ts = httptest.NewServer(b.srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		b.srv.Shutdown(ctx)
		b.ts.Close()
	})
	return b
}

// settings are the default settings with change applied.
func settings(change func(*config.Config)) config.Config {
	s := config.Defaults()
	change(&s)
	return s
}

// fanout is the pipeline's live side on one process, as package app wires
// it without Redis: deliveries, evictions and interruptions go to the
// Server, which is built after the pipeline, and access changes to the
// reader's cache.
type fanout struct {
	srv    *Server
	reader *read.Engine
}

func (f *fanout) Broadcast(d ingest.Delivery) { f.srv.Broadcast(d) }

func (f *fanout) Forget(communityID, _, reader string) { f.reader.Forget(communityID, reader) }

func (f *fanout) Evict(communityID, channel, pubkey string, nonMembersOnly func(string) bool) {
	f.srv.Evict(communityID, channel, pubkey, nonMembersOnly)
}

func (f *fanout) Interrupt(communityID string) { f.srv.InterruptCommunity(communityID, time.Now()) }
func (f *fanout) Unsettled(string)             {}

// setRelayMember adds pubkey to, or removes it from, community A's relay
// members.
func (b *testBundle) setRelayMember(t *testing.T, pubkey string, member bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if member {
		_, err := store.New(b.db.pool).RelayMemberUpsert(ctx, store.RelayMemberUpsertParams{
			CommunityID: b.communityA, Pubkey: pubkey, Role: "member", AddedBy: "cli"})
		require.NoError(t, err)
		return
	}
	removed, err := store.New(b.db.pool).RelayMemberRemove(ctx, b.communityA, pubkey)
	require.NoError(t, err)
	require.True(t, removed)
}

// dbLock is a lock held by an open transaction on a connection of its own;
// statements that need the lock wait in PostgreSQL until release.
type dbLock struct {
	tx   pgx.Tx
	pool *pgxpool.Pool
	pid  uint32
	once sync.Once
}

// lock runs stmt (a locking statement) in a new transaction on pool and
// keeps the transaction open until release or the end of the test.
func lock(t *testing.T, pool *pgxpool.Pool, stmt string, args ...any) *dbLock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	l := &dbLock{tx: tx, pool: pool}
	t.Cleanup(func() { l.release(t) })
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&l.pid))
	_, err = tx.Exec(ctx, stmt, args...)
	require.NoError(t, err)
	return l
}

// blockEvent inserts ev into community A in a transaction left open: the
// relay's insert of the same event waits for it (ON CONFLICT waits for the
// row's transaction to end), and after release, which rolls it back, stores
// it. Nothing else is blocked.
func (b *testBundle) blockEvent(t *testing.T, ev event.Event) *dbLock {
	t.Helper()
	return lock(t, b.db.pool, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig)
		VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), to_timestamp($4), $5, '[]', '', decode($6, 'hex'))`,
		b.communityA, ev.ID, ev.PubKey, ev.CreatedAt, ev.Kind, ev.Sig)
}

// waitBlocked waits until n backends are waiting for the lock.
func (l *dbLock) waitBlocked(t *testing.T, n int) {
	t.Helper()
	eventually(t, func() bool {
		var waiting int
		err := l.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, l.pid).Scan(&waiting)
		return err == nil && waiting >= n
	}, "a statement waits for the lock")
}

// release ends the transaction, releasing the lock. Safe to call twice.
func (l *dbLock) release(t *testing.T) {
	t.Helper()
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, l.tx.Rollback(ctx))
	})
}

// client is a test WebSocket client. A background goroutine reads frames
// (so pings are answered) unless the client was dialled paused.
type client struct {
	ws        *websocket.Conn
	frames    chan []json.RawMessage
	done      chan struct{}
	err       error
	challenge string
	key       eventtest.Key
	// host is the host the client dialled.
	host      string
	startOnce sync.Once
}

type dialOpts struct {
	host   string
	paused bool
	onPing func(context.Context, []byte) bool
}

func (b *testBundle) dial(t *testing.T) *client {
	t.Helper()
	return b.dialWith(t, dialOpts{})
}

func (b *testBundle) dialWith(t *testing.T, o dialOpts) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	h := cmp.Or(o.host, b.hostA)
	ws, _, err := websocket.Dial(ctx, b.ts.URL, &websocket.DialOptions{Host: h, OnPingReceived: o.onPing})
	require.NoError(t, err)
	ws.SetReadLimit(-1)
	c := &client{ws: ws, frames: make(chan []json.RawMessage, 1<<14), done: make(chan struct{}), key: eventtest.NewKey(), host: h}
	t.Cleanup(func() {
		_ = ws.CloseNow()
		c.start()
		<-c.done
	})
	if o.paused {
		return c
	}
	c.start()
	f := c.next(t)
	require.Equal(t, "AUTH", str(t, f[0]))
	c.challenge = str(t, f[1])
	return c
}

func (c *client) start() {
	c.startOnce.Do(func() {
		go func() {
			defer close(c.done)
			defer close(c.frames)
			for {
				_, b, err := c.ws.Read(context.Background())
				if err != nil {
					c.err = err
					return
				}
				var f []json.RawMessage
				if json.Unmarshal(b, &f) != nil {
					f = []json.RawMessage{json.RawMessage(`"UNPARSEABLE"`)}
				}
				c.frames <- f
			}
		}()
	})
}

// next returns the next frame, failing the test after waitFor.
func (c *client) next(t *testing.T) []json.RawMessage {
	t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			t.Fatalf("connection closed: %v", c.err)
		}
		return f
	case <-time.After(waitFor):
		t.Fatal("no frame within the deadline")
		return nil
	}
}

// closed waits for the connection to end and returns its close error.
func (c *client) closed(t *testing.T) error {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-c.frames:
			if !ok {
				return c.err
			}
		case <-deadline:
			t.Fatal("connection not closed within the deadline")
		}
	}
}

func (c *client) send(t *testing.T, v ...any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	c.sendRaw(t, b)
}

func (c *client) sendRaw(t *testing.T, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, c.ws.Write(ctx, websocket.MessageText, b))
}

// expect reads the next frame and checks its type and string fields.
func (c *client) expect(t *testing.T, fields ...any) []json.RawMessage {
	t.Helper()
	f := c.next(t)
	require.GreaterOrEqual(t, len(f), len(fields), "frame %s", f)
	for i, want := range fields {
		switch w := want.(type) {
		case string:
			require.Equal(t, w, str(t, f[i]), "field %d of %s", i, f)
		case bool:
			var got bool
			require.NoError(t, json.Unmarshal(f[i], &got))
			require.Equal(t, w, got, "field %d of %s", i, f)
		case nil:
		}
	}
	return f
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), "not a string: %s", raw)
	return s
}

func (c *client) authEvent(t *testing.T, relay string, opts ...eventtest.Option) event.Event {
	t.Helper()
	opts = append([]eventtest.Option{eventtest.Tag("relay", relay), eventtest.Tag("challenge", c.challenge)}, opts...)
	return c.key.Signed(t, event.KindAuth, opts...)
}

// auth authenticates as c.key on the host it dialled.
func (c *client) auth(t *testing.T) {
	t.Helper()
	ev := c.authEvent(t, "ws://"+c.host)
	c.send(t, "AUTH", ev)
	c.expect(t, "OK", ev.ID, true, "")
}

// publish sends an EVENT and waits for its OK.
func (c *client) publish(t *testing.T, ev event.Event) {
	t.Helper()
	c.send(t, "EVENT", ev)
	c.expect(t, "OK", ev.ID, true, "")
}

// eventID returns the id of an ["EVENT",sub,ev] frame.
func eventID(t *testing.T, f []json.RawMessage) string {
	t.Helper()
	require.Len(t, f, 3)
	var ev struct{ ID string }
	require.NoError(t, json.Unmarshal(f[2], &ev))
	return ev.ID
}

// rawUpgrade sends an upgrade request with the given Host and returns the
// status and body.
func rawUpgrade(t *testing.T, url, hostHeader string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Host = hostHeader
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, waitFor, 5*time.Millisecond, msg)
}

// openStore opens a store on the database at url through a pool of its own
// whose sessions take the given run-time settings ("name=value"), closed at
// the end of the test.
func openStore(t *testing.T, url string, settings ...string) *store.Store {
	t.Helper()
	u := url
	for _, s := range settings {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + s
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	pool, err := pg.Open(ctx, u, pg.PoolConfig{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return store.New(pool)
}

// unique gives an event a random content, so that two events of one key,
// kind and second are still two events (the store de-duplicates by id).
func unique() eventtest.Option { return eventtest.Content("n-" + uuid.NewString()) }
