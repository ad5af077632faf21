package relay

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/host"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	hostA      = "a.test"
	hostB      = "b.test"
	communityA = "11111111-1111-4111-8111-111111111111"
	communityB = "22222222-2222-4222-8222-222222222222"
	channelC   = "33333333-3333-4333-8333-333333333333"
	channelD   = "44444444-4444-4444-8444-444444444444"
	waitFor    = 10 * time.Second
)

// memResolver maps the two test hosts.
type memResolver struct{}

func (memResolver) Resolve(_ context.Context, h string) (host.Tenant, error) {
	switch h {
	case hostA:
		return host.Tenant{CommunityID: communityA, Host: hostA}, nil
	case hostB:
		return host.Tenant{CommunityID: communityB, Host: hostB}, nil
	}
	return host.Tenant{}, errors.New("no community")
}

type stored struct {
	community string
	channel   string
	ev        event.Event
}

// memStore is an in-memory Submitter and Reader: it stores events in a
// slice, fans them out through the Server, and reads them back. Every
// channel is open to every reader unless denied.
type memStore struct {
	srv *Server

	mu       sync.Mutex
	events   []stored
	denied   map[string]bool // channel → inaccessible to everyone
	queryErr error
	// gate, when set, blocks Submit until it is closed; entered is
	// signalled first.
	gate    chan struct{}
	entered chan struct{}
}

func (m *memStore) Submit(ctx context.Context, req ingest.Request) ingest.Result {
	m.mu.Lock()
	gate, entered := m.gate, m.entered
	m.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return ingest.Result{Code: ingest.Internal, Message: "error: internal server error"}
		}
	}
	ev := req.Event
	channel := ev.Tags.First("h").Value()
	if !event.IsEphemeral(ev.Kind) {
		m.mu.Lock()
		m.events = append(m.events, stored{req.Tenant.CommunityID, channel, ev})
		m.mu.Unlock()
	}
	m.srv.Broadcast(ingest.Delivery{CommunityID: req.Tenant.CommunityID, Channel: channel, Event: &ev, JSON: ev.AppendJSON(nil)})
	return ingest.Result{Code: ingest.Accepted}
}

func (m *memStore) accessible() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, ch := range []string{channelC, channelD} {
		if !m.denied[ch] {
			out = append(out, ch)
		}
	}
	return out
}

func (m *memStore) Accessible(context.Context, read.Scope) (*read.Access, error) {
	return read.NewAccess(m.accessible()), nil
}

func (m *memStore) Confirm(_ context.Context, _ read.Scope, _ *read.Access, requested []string) ([]string, error) {
	acc := m.accessible()
	var out []string
	for _, ch := range requested {
		if slices.Contains(acc, ch) {
			out = append(out, ch)
		}
	}
	return out, nil
}

func (m *memStore) matching(sc read.Scope, acc *read.Access, f *event.Filter) []read.Row {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []read.Row
	for i := len(m.events) - 1; i >= 0; i-- {
		s := m.events[i]
		if s.community != sc.CommunityID || !f.Matches(&s.ev, s.channel) {
			continue
		}
		if (s.channel != "" && !acc.Has(s.channel)) || !read.VisibleTo(sc.Reader, &s.ev) {
			continue
		}
		rows = append(rows, read.Row{Event: s.ev, Channel: s.channel, JSON: s.ev.AppendJSON(nil)})
	}
	return rows
}

func (m *memStore) Query(_ context.Context, sc read.Scope, acc *read.Access, f *event.Filter, _ read.QueryOptions) ([]read.Row, error) {
	m.mu.Lock()
	err := m.queryErr
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rows := m.matching(sc, acc, f)
	limit := read.MaxLimit
	if f.Limit != nil && *f.Limit < limit {
		limit = *f.Limit
	}
	return rows[:min(limit, len(rows))], nil
}

func (m *memStore) Count(_ context.Context, sc read.Scope, acc *read.Access, f *event.Filter) (int64, error) {
	return int64(len(m.matching(sc, acc, f))), nil
}

func (m *memStore) CanAccess(_ context.Context, _ read.Scope, channel string) bool {
	return slices.Contains(m.accessible(), channel)
}

// memMembers is an in-memory MemberChecker.
type memMembers struct {
	mu      sync.Mutex
	members map[string]bool // communityID/pubkey
	err     error
}

func (m *memMembers) IsRelayMember(_ context.Context, communityID, pubkey string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.members[communityID+"/"+pubkey], m.err
}

func (m *memMembers) set(communityID, pubkey string, member bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members[communityID+"/"+pubkey] = member
}

type testBundle struct {
	srv     *Server
	ts      *httptest.Server
	store   *memStore
	members *memMembers
	metrics *metrics.Metrics
}

// setup starts a Server on an httptest server; mutate adjusts the Config.
// Cleanup shuts the Server down and waits for every connection to end.
func setup(t *testing.T, mutate func(*Config)) *testBundle {
	t.Helper()
	b := &testBundle{
		store:   &memStore{denied: map[string]bool{}},
		members: &memMembers{members: map[string]bool{}},
		metrics: metrics.New(prometheus.NewRegistry()),
	}
	cfg := Config{
		Resolver:  memResolver{},
		Submitter: b.store,
		Reader:    b.store,
		Members:   b.members,
		Metrics:   b.metrics,
		Logger:    nil,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	b.srv = New(cfg)
	b.store.srv = b.srv
	b.ts = httptest.NewServer(b.srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		b.srv.Shutdown(ctx)
		b.ts.Close()
	})
	return b
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
	ws, _, err := websocket.Dial(ctx, b.ts.URL, &websocket.DialOptions{Host: cmpOr(o.host, hostA), OnPingReceived: o.onPing})
	require.NoError(t, err)
	ws.SetReadLimit(-1)
	c := &client{ws: ws, frames: make(chan []json.RawMessage, 1<<14), done: make(chan struct{}), key: eventtest.NewKey()}
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

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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

// auth authenticates as c.key on host a.test.
func (c *client) auth(t *testing.T) {
	t.Helper()
	ev := c.authEvent(t, "ws://"+hostA)
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
