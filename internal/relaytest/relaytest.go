// Package relaytest runs a whole buzz-relay in-process for end-to-end tests:
// a fresh PostgreSQL database (dbtest), every component wired by package
// server, real listeners on loopback, and raw WebSocket and HTTP helpers
// that can speak for any tenant host. TEST ONLY.
package relaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/store"
)

// Relay is a running relay.
type Relay struct {
	App  *app.Relay
	Port int
	// Host is the deployment community's host, localhost:<port>.
	Host       string
	HealthURL  string
	MetricsURL string
	DBURL      string
	cancel     context.CancelFunc
	done       chan error
	stopOnce   sync.Once
}

// QuotasOff turns every per-user quota and the read-time budget off. Start applies it before env,
// so tests and benchmarks keep their behaviour; a test of a quota sets
// its own.
var QuotasOff = map[string]string{
	"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN":           "0",
	"BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN":          "0",
	"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC":          "0",
	"BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN":  "0",
	"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN": "0",
	"BUZZ_CHANNEL_CREATES_PER_HOUR":                    "0",
	"BUZZ_READ_TIME_PER_SECOND_MS":                     "0",
}

// Start runs a relay with the given environment overrides on a fresh
// database (or on env["DATABASE_URL"] when the caller names one, as
// benchmarks that keep a loaded dataset do). Its warnings go to the test's
// output. It stops when the test ends.
func Start(t testing.TB, env map[string]string, hooks ...app.Hooks) *Relay {
	t.Helper()
	return start(t, env, func(slog.Level) slog.Handler {
		return slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})
	}, hooks...)
}

// start runs a relay whose logger comes from newHandler, given the level of
// BUZZ_LOG_LEVEL.
func start(t testing.TB, env map[string]string, newHandler func(slog.Level) slog.Handler, hooks ...app.Hooks) *Relay {
	t.Helper()
	url := env["DATABASE_URL"]
	if url == "" {
		_, url = dbtest.NewDB(t)
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := al.Addr().(*net.TCPAddr).Port
	vars := map[string]string{
		"BUZZ_AUTO_MIGRATE":       "true",
		"RELAY_URL":               "ws://localhost:" + strconv.Itoa(port),
		"BUZZ_BIND_ADDR":          al.Addr().String(),
		"BUZZ_HEALTH_PORT":        strconv.Itoa(hl.Addr().(*net.TCPAddr).Port),
		"BUZZ_METRICS_PORT":       strconv.Itoa(ml.Addr().(*net.TCPAddr).Port),
		"BUZZ_DB_POOL_SIZE":       "10",
		"BUZZ_LOG_LEVEL":          "warn",
		"BUZZ_REQUIRE_AUTH_TOKEN": "true",
		// Every HTTP client of a test is 127.0.0.1 and many tests read
		// with one key: the per-connection and per-pubkey read shares are
		// opened wide, the tests of the shares narrow them again.
		"BUZZ_READS_PER_CONNECTION": "1000",
		"BUZZ_READS_PER_PUBKEY":     "10000",
	}
	for k, v := range QuotasOff {
		vars[k] = v
	}
	for k, v := range env {
		vars[k] = v
	}
	vars["DATABASE_URL"] = url
	cfg, _, err := config.Load(func(k string) string { return vars[k] }, nil)
	require.NoError(t, err)
	for name, d := range map[string]*time.Duration{
		"TEST_HEARTBEAT": &cfg.HeartbeatInterval, "TEST_MEMBERSHIP_RECHECK": &cfg.MembershipRecheck, "TEST_AUTH_TIMEOUT": &cfg.AuthTimeout,
		"TEST_AMBIGUOUS_COMMIT_TIMEOUT": &cfg.AmbiguousCommitTimeout,
	} {
		if v, ok := env[name]; ok {
			*d, err = time.ParseDuration(v)
			require.NoError(t, err, name)
		}
	}
	log := slog.New(newHandler(cfg.LogLevel))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.Start(ctx, cfg, log, hooks...)
	if err != nil {
		cancel()
		al.Close()
		hl.Close()
		ml.Close()
		require.NoError(t, err)
	}
	r := &Relay{App: a, Port: port, Host: "localhost:" + strconv.Itoa(port), DBURL: url,
		HealthURL: "http://" + hl.Addr().String(), MetricsURL: "http://" + ml.Addr().String(),
		cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx, al, hl, ml) }()
	t.Cleanup(r.Stop)
	r.waitReady(t)
	return r
}

// waitReady returns once /_readiness answers 200, as a load balancer would
// wait: Run bootstraps the deployment community before it serves.
func (r *Relay) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.HealthURL + "/_readiness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-r.done:
			r.done <- err
			require.FailNow(t, "relay stopped before it was ready", "%v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "relay not ready after 30 s", "last error: %v", err)
		}
	}
}

// Stop drains the relay and closes its database pool. Safe to call twice.
func (r *Relay) Stop() {
	r.stopOnce.Do(func() {
		r.cancel()
		<-r.done
		r.App.Close()
	})
}

// Community creates a community for host (a name without port gets the
// relay's port appended, so URLs stay dialable) and returns its tenant host.
func (r *Relay) Community(t testing.TB, name string) string {
	t.Helper()
	h := name + ":" + strconv.Itoa(r.Port)
	_, err := r.App.Store().CommunityAdd(context.Background(), store.CommunityAddParams{Host: h})
	require.NoError(t, err)
	return h
}

// WS is a raw WebSocket client connection bound to one tenant host.
type WS struct {
	t    testing.TB
	C    *websocket.Conn
	Host string
	// Challenge is the AUTH challenge the relay sent first.
	Challenge string
}

// Dial opens a WebSocket with the given Host header ("" = the deployment
// host) and reads the AUTH challenge.
func (r *Relay) Dial(t testing.TB, host string) *WS {
	t.Helper()
	ws, resp, err := r.DialRaw(host)
	require.NoError(t, err, "dial: %v", resp)
	w := &WS{t: t, C: ws, Host: host}
	if w.Host == "" {
		w.Host = r.Host
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	msg := w.Next()
	require.Equal(t, "AUTH", msg[0])
	w.Challenge = msg[1].(string)
	return w
}

// DialRaw dials without reading anything.
func (r *Relay) DialRaw(host string) (*websocket.Conn, *http.Response, error) {
	if host == "" {
		host = r.Host
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return websocket.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(r.Port)+"/", &websocket.DialOptions{Host: host})
}

// Send writes one frame; values are JSON-encoded as an array, a []byte is sent as is.
func (w *WS) Send(parts ...any) {
	w.t.Helper()
	var b []byte
	if len(parts) == 1 {
		if raw, ok := parts[0].([]byte); ok {
			b = raw
		}
	}
	if b == nil {
		var err error
		b, err = json.Marshal(parts)
		require.NoError(w.t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(w.t, w.C.Write(ctx, websocket.MessageText, b))
}

// Next reads the next frame as a JSON array, failing after 5 s.
func (w *WS) Next() []any {
	w.t.Helper()
	msg, err := w.NextErr(5 * time.Second)
	require.NoError(w.t, err)
	return msg
}

// NextErr reads the next frame within d.
func (w *WS) NextErr(d time.Duration) ([]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, b, err := w.C.Read(ctx)
	if err != nil {
		return nil, err
	}
	var msg []any
	if err := json.Unmarshal(b, &msg); err != nil {
		return nil, fmt.Errorf("frame %q: %w", b, err)
	}
	return msg, nil
}

// Auth authenticates as key with a correct AUTH event and expects OK true.
func (w *WS) Auth(key eventtest.Key) {
	w.t.Helper()
	ev := key.Signed(w.t, event.KindAuth, eventtest.Content(""),
		eventtest.Tag("challenge", w.Challenge), eventtest.Tag("relay", "ws://"+w.Host))
	w.Send("AUTH", ev)
	ok := w.Next()
	require.Equal(w.t, []any{"OK", ev.ID, true, ""}, ok)
}

// Publish sends an EVENT and returns its OK, skipping other frames.
func (w *WS) Publish(ev event.Event) (bool, string) {
	w.t.Helper()
	w.Send("EVENT", ev)
	for {
		msg := w.Next()
		if msg[0] == "OK" && msg[1] == ev.ID {
			return msg[2].(bool), msg[3].(string)
		}
	}
}

// PublishWithin sends an EVENT and returns its OK, skipping other frames,
// waiting up to d for it. It reports failures as an error instead of
// failing the test, so it can run on a goroutine of its own.
func (w *WS) PublishWithin(ev event.Event, d time.Duration) (bool, string, error) {
	b, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		return false, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := w.C.Write(ctx, websocket.MessageText, b); err != nil {
		return false, "", fmt.Errorf("send EVENT: %w", err)
	}
	for {
		_, frame, err := w.C.Read(ctx)
		if err != nil {
			return false, "", fmt.Errorf("OK of %s: %w", ev.ID, err)
		}
		var msg []any
		if err := json.Unmarshal(frame, &msg); err != nil {
			return false, "", fmt.Errorf("frame %q: %w", frame, err)
		}
		if len(msg) == 4 && msg[0] == "OK" && msg[1] == ev.ID {
			ok, _ := msg[2].(bool)
			text, _ := msg[3].(string)
			return ok, text, nil
		}
	}
}

// MustPublish publishes and requires OK true with an empty message.
func (w *WS) MustPublish(ev event.Event) {
	w.t.Helper()
	ok, msg := w.Publish(ev)
	require.True(w.t, ok, msg)
	require.Equal(w.t, "", msg)
}

// Req sends a REQ and collects events until EOSE or CLOSED; closed is the
// CLOSED message ("" when EOSE came).
func (w *WS) Req(sub string, filters ...any) (events []event.Event, closed string, gotEOSE bool) {
	w.t.Helper()
	w.Send(append([]any{"REQ", sub}, filters...)...)
	for {
		msg := w.Next()
		if len(msg) < 2 || msg[1] != sub {
			continue
		}
		switch msg[0] {
		case "EVENT":
			b, _ := json.Marshal(msg[2])
			ev, err := event.Parse(b)
			require.NoError(w.t, err)
			events = append(events, ev)
		case "EOSE":
			return events, "", true
		case "CLOSED":
			return events, msg[2].(string), false
		}
	}
}
