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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/host"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/read"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errInjected = errors.New("injected failure")

// memResolver maps normalised hosts to tenants.
type memResolver map[string]host.Tenant

func (m memResolver) Resolve(_ context.Context, h string) (host.Tenant, error) {
	t, ok := m[h]
	if !ok {
		return host.Tenant{}, errors.New("no community")
	}
	return t, nil
}

// memStore is a small in-memory pipeline and read engine. Channels listed in
// open are accessible to everyone; no other channel is accessible.
type memStore struct {
	mu        sync.Mutex
	rows      []read.Row
	open      map[string]bool
	fail      bool // every call fails
	tooBroad  bool // Count answers read.ErrCountTooBroad
	conflict  bool // Submit answers Conflict
	lastOpts  []read.QueryOptions
	submitted []ingest.Request
	queries   int
}

func (m *memStore) Submit(_ context.Context, req ingest.Request) ingest.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.submitted = append(m.submitted, req)
	ev := req.Event
	switch {
	case m.fail:
		return ingest.Result{Code: ingest.Internal, Message: "error: internal server error"}
	case ev.Kind == 22242:
		return ingest.Result{Code: ingest.Rejected, Message: "invalid: AUTH events cannot be submitted"}
	case ev.PubKey != req.Author:
		return ingest.Result{Code: ingest.Forbidden, Message: "invalid: event pubkey does not match authenticated identity"}
	case m.conflict:
		return ingest.Result{Code: ingest.Conflict, Message: "duplicate: reaction already exists"}
	}
	for _, r := range m.rows {
		if r.Event.ID == ev.ID {
			return ingest.Result{Code: ingest.Duplicate, Message: "duplicate:"}
		}
	}
	m.rows = append(m.rows, read.Row{Event: ev, Channel: ev.Tags.First("h").Value(), JSON: ev.AppendJSON(nil)})
	return ingest.Result{Code: ingest.Accepted}
}

func (m *memStore) Accessible(context.Context, read.Scope) (*read.Access, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return nil, errInjected
	}
	var chs []string
	for ch := range m.open {
		chs = append(chs, ch)
	}
	return read.NewAccess(chs), nil
}

func (m *memStore) Confirm(_ context.Context, _ read.Scope, acc *read.Access, requested []string) ([]string, error) {
	var out []string
	for _, ch := range requested {
		if acc.Has(ch) {
			out = append(out, ch)
		}
	}
	return out, nil
}

func (m *memStore) match(sc read.Scope, acc *read.Access, f *event.Filter, opt read.QueryOptions) []read.Row {
	var out []read.Row
	for _, r := range m.rows {
		if !f.Matches(&r.Event, r.Channel) || (r.Channel != "" && !acc.Has(r.Channel)) || !read.VisibleTo(sc.Reader, &r.Event) {
			continue
		}
		if opt.BeforeID != "" && r.Event.CreatedAt == *f.Until && r.Event.ID <= opt.BeforeID {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b read.Row) int {
		if a.Event.CreatedAt != b.Event.CreatedAt {
			return int(b.Event.CreatedAt - a.Event.CreatedAt)
		}
		return strings.Compare(a.Event.ID, b.Event.ID)
	})
	return out
}

func (m *memStore) Query(_ context.Context, sc read.Scope, acc *read.Access, f *event.Filter, opt read.QueryOptions) ([]read.Row, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries++
	m.lastOpts = append(m.lastOpts, opt)
	if m.fail {
		return nil, errInjected
	}
	out := m.match(sc, acc, f, opt)
	limit := read.MaxLimit
	if f.Limit != nil {
		limit = min(*f.Limit, limit)
	}
	return out[:min(limit, len(out))], nil
}

func (m *memStore) Count(_ context.Context, sc read.Scope, acc *read.Access, f *event.Filter) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return 0, errInjected
	}
	if m.tooBroad {
		return 0, read.ErrCountTooBroad
	}
	return int64(len(m.match(sc, acc, f, read.QueryOptions{}))), nil
}

// memMembers is the relay_members table of every community.
type memMembers struct {
	mu      sync.Mutex
	members map[string]bool // communityID + "/" + pubkey
	fail    bool
}

func (m *memMembers) IsRelayMember(_ context.Context, cid, pubkey string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return false, errInjected
	}
	return m.members[cid+"/"+pubkey], nil
}

// memReplay remembers used NIP-98 ids per community.
type memReplay struct {
	mu   sync.Mutex
	used map[string]bool
	fail bool
}

func (m *memReplay) UseNIP98(_ context.Context, cid, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return false, errInjected
	}
	if m.used[cid+"/"+id] {
		return false, nil
	}
	m.used[cid+"/"+id] = true
	return true, nil
}

func (m *memReplay) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.used)
}

type testBundle struct {
	url     string
	client  *http.Client
	store   *memStore
	members *memMembers
	replay  *memReplay
	metrics *metrics.Metrics
	key     eventtest.Key
	// now is the server clock, fixed for the test.
	now time.Time
}

func setup(t *testing.T, change ...func(*httpapi.Config)) *testBundle {
	t.Helper()
	b := &testBundle{
		store:   &memStore{open: map[string]bool{"general": true}},
		members: &memMembers{members: map[string]bool{}},
		replay:  &memReplay{used: map[string]bool{}},
		metrics: metrics.New(prometheus.NewRegistry()),
		key:     eventtest.NewKey(),
		now:     time.Now(),
	}
	cfg := httpapi.Config{
		Resolver: memResolver{
			"a.test":         {CommunityID: "c-a", Host: "a.test"},
			"b.test":         {CommunityID: "c-b", Host: "b.test"},
			"localhost:3000": {CommunityID: "c-local", Host: "localhost:3000"},
		},
		Submitter:        b.store,
		Reader:           b.store,
		Members:          b.members,
		Replay:           b.replay,
		WebSocket:        http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "websocket") }),
		Metrics:          b.metrics,
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		RequireAuthToken: true,
		Version:          "test-1",
		MaxFrameBytes:    524288,
		NowFunc:          func() time.Time { return b.now },
	}
	for _, c := range change {
		c(&cfg)
	}
	srv := httptest.NewServer(httpapi.New(cfg).Handler())
	tr := &http.Transport{}
	b.url, b.client = srv.URL, &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return b
}

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

// signedPost sends a POST to a.test signed by key for url, with a payload tag.
func (b *testBundle) signedPost(t *testing.T, key eventtest.Key, path string, body []byte) response {
	t.Helper()
	return b.do(t, http.MethodPost, "a.test", path, body,
		map[string]string{"Authorization": nip98(t, key, "POST", "http://a.test"+path, body)})
}

// nip98 returns an Authorization header signed by key for method and url,
// with the payload tag of body when body is not nil.
func nip98(t *testing.T, key eventtest.Key, method, url string, body []byte, opts ...eventtest.Option) string {
	t.Helper()
	// A distinct content per token keeps ids apart within one second.
	o := []eventtest.Option{eventtest.Content(strconv.FormatInt(tokenSeq.Add(1), 10)), eventtest.Tag("u", url), eventtest.Tag("method", method)}
	if body != nil {
		sum := sha256.Sum256(body)
		o = append(o, eventtest.Tag("payload", hex.EncodeToString(sum[:])))
	}
	return auth.NIP98Header(key.Signed(t, auth.KindHTTPAuth, append(o, opts...)...))
}

var tokenSeq atomic.Int64

func errorJSON(msg string) string { return `{"error":` + jsonString(msg) + `}` }

func jsonString(s string) string { return string(event.AppendString(nil, s)) }

// ThreadReplies is not exercised by these transport tests; the legacy thread
// read is tested end to end against PostgreSQL in internal/e2e.
func (m *memStore) ThreadReplies(context.Context, read.Scope, *read.Access, read.ThreadParams) ([]read.Row, error) {
	return nil, nil
}
