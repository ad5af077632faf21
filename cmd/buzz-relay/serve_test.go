package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
)

// wsClient is a raw WebSocket connection to a running binary.
type wsClient struct {
	t         *testing.T
	c         *websocket.Conn
	challenge string
}

// dialWS dials the relay's app port with the given Host header and reads
// the AUTH challenge. The connection is closed when the test ends.
func dialWS(t *testing.T, p *relayProc, hostHeader string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+p.AppAddr+"/", &websocket.DialOptions{
		Host: hostHeader, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	require.NoError(t, err, "dial: %v", resp)
	t.Cleanup(func() { _ = c.CloseNow() })
	w := &wsClient{t: t, c: c}
	msg := w.next()
	require.Len(t, msg, 2)
	require.Equal(t, "AUTH", msg[0])
	w.challenge = msg[1].(string)
	require.NotEmpty(t, w.challenge)
	return w
}

func (w *wsClient) send(parts ...any) {
	w.t.Helper()
	b, err := json.Marshal(parts)
	require.NoError(w.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(w.t, w.c.Write(ctx, websocket.MessageText, b))
}

// read returns the next frame, or the read error, within 10 s.
func (w *wsClient) read() ([]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := w.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	var msg []any
	if err := json.Unmarshal(b, &msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func (w *wsClient) next() []any {
	w.t.Helper()
	msg, err := w.read()
	require.NoError(w.t, err)
	return msg
}

// auth signs a kind 22242 event for the challenge with the given relay tag
// and requires OK true.
func (w *wsClient) auth(key eventtest.Key, relayTag string) {
	w.t.Helper()
	ev := key.Signed(w.t, event.KindAuth, eventtest.Content(""),
		eventtest.Tag("challenge", w.challenge), eventtest.Tag("relay", relayTag))
	require.Equal(w.t, 22242, ev.Kind)
	w.send("AUTH", ev)
	require.Equal(w.t, []any{"OK", ev.ID, true, ""}, w.next())
}

// A zero-config first start (private cluster, default RELAY_URL).
func TestFirstStart(t *testing.T) {
	t.Parallel()
	env := privateEnv(t)
	p := startReady(t, env)
	var verifier any
	for _, rec := range p.logRecords() {
		if rec["msg"] == "relay starting" {
			verifier = rec["signature_verifier"]
		}
	}
	require.Equal(t, event.SignatureVerifier, verifier, "the start line names the signature verifier built in")

	// The operator command finds the running cluster through BUZZ_DATA_DIR.
	cli := baseEnv()
	cli["BUZZ_DATA_DIR"] = env["BUZZ_DATA_DIR"]
	res := runBinary(t, cli, "community", "list")
	require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	var dev map[string]any
	for _, line := range res.lines(t) {
		if line["host"] == "localhost:3000" {
			dev = line
		}
	}
	require.NotNil(t, dev, "no community for localhost:3000:\n%s", res.Stdout)
	require.Regexp(t, uuidRE, dev["community_id"])
	require.Equal(t, []any{}, dev["aliases"])
	// The relay is still serving on the cluster the command shared.
	p.waitReady()

	w := dialWS(t, p, "127.0.0.1:3000")
	w.auth(eventtest.NewKey(), "ws://127.0.0.1:3000")
	// Served: a REQ gets an answer that ends its stored history.
	w.send("REQ", "s1", map[string]any{"kinds": []int{0}, "limit": 1})
	for {
		msg := w.next()
		require.NotEqual(t, "CLOSED", msg[0], "REQ refused: %v", msg)
		if msg[0] == "EOSE" {
			require.Equal(t, "s1", msg[1])
			break
		}
	}
}

func TestOwnerBootstrap(t *testing.T) {
	t.Parallel()

	memberList := func(t *testing.T, env map[string]string) []map[string]any {
		t.Helper()
		cli := baseEnv()
		cli["DATABASE_URL"] = env["DATABASE_URL"]
		res := runBinary(t, cli, "member", "list", "--host", "localhost:3000")
		require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		return res.lines(t)
	}

	t.Run("OwnerListedAfterStart", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey()
		env := externalEnv(t)
		env["RELAY_OWNER_PUBKEY"] = strings.ToUpper(owner.PubKey)
		startReady(t, env)

		list := memberList(t, env)
		require.Len(t, list, 1)
		require.Equal(t, owner.PubKey, list[0]["pubkey"])
		require.Equal(t, "owner", list[0]["role"])
	})

	t.Run("ExistingMemberPromoted", func(t *testing.T) {
		t.Parallel()
		owner := eventtest.NewKey()
		env := externalEnv(t)
		startReady(t, env).stop() // creates the deployment community
		cli := baseEnv()
		cli["DATABASE_URL"] = env["DATABASE_URL"]
		res := runBinary(t, cli, "member", "add", "--host", "localhost:3000", "--pubkey", owner.PubKey)
		require.Equal(t, 0, res.Code, res.Stderr)

		env["RELAY_OWNER_PUBKEY"] = owner.PubKey
		startReady(t, env)
		list := memberList(t, env)
		require.Len(t, list, 1)
		require.Equal(t, owner.PubKey, list[0]["pubkey"])
		require.Equal(t, "owner", list[0]["role"])
	})

	t.Run("GateWithoutOwnerStopsStartup", func(t *testing.T) {
		t.Parallel()
		env := relayEnv(t)
		env["DATABASE_URL"] = unreachableDB
		env["BUZZ_REQUIRE_RELAY_MEMBERSHIP"] = "true"
		res := runBinary(t, env, "serve")
		require.Equal(t, 2, res.Code)
		require.Equal(t, "invalid RELAY_OWNER_PUBKEY: required when BUZZ_REQUIRE_RELAY_MEMBERSHIP=true\n", res.Stderr)
		requireNotListening(t, env["BUZZ_BIND_ADDR"])
	})
}

// SIGTERM drains the relay.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	p := startReady(t, externalEnv(t))
	w := dialWS(t, p, "localhost:3000")
	w.auth(eventtest.NewKey(), "ws://localhost:3000")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	signalled := time.Now()
	// The socket is not read yet, so the relay waits for its close
	// handshake and the drain stays observable.
	_, body := p.pollHealth("/_readiness", 3*time.Second, func(code int, _ string) bool {
		return code == http.StatusServiceUnavailable
	})
	require.JSONEq(t, `{"status":"shutting_down"}`, body)

	// A new upgrade is refused while draining.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+p.AppAddr+"/", &websocket.DialOptions{
		Host: "localhost:3000", HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	if err == nil {
		_ = c.CloseNow()
	}
	require.Error(t, err)
	require.NotNil(t, resp, "dial during drain: %v", err) // the unanswered close keeps the listener open
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	// The open socket is closed with 1012 "relay restarting".
	var closeErr websocket.CloseError
	for {
		_, err := w.read()
		if err == nil {
			continue // frames queued before the close
		}
		require.True(t, errors.As(err, &closeErr), "read: %v", err)
		break
	}
	require.Equal(t, websocket.StatusServiceRestart, closeErr.Code)
	require.Equal(t, "relay restarting", closeErr.Reason)

	require.Equal(t, 0, p.wait(30*time.Second-time.Since(signalled)))
}

// unreachableDB is a DATABASE_URL nothing answers; runs that must fail on
// configuration never get as far as connecting to it.
const unreachableDB = "postgres://buzz@127.0.0.1:1/none?connect_timeout=1"

// requireNotListening fails when something accepts connections on addr.
func requireNotListening(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "something listens on %s", addr)
}

// An invalid value stops startup with status 2 before any listener.
func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		variable string
		value    string
	}{
		{"SendBufferNotNumber", "BUZZ_SEND_BUFFER", "abc"},
		{"SendBufferTooSmall", "BUZZ_SEND_BUFFER", "5"},
		{"MaxConnectionsNotNumber", "BUZZ_MAX_CONNECTIONS", "abc"},
		{"MaxConcurrentHandlersNotNumber", "BUZZ_MAX_CONCURRENT_HANDLERS", "abc"},
		{"MaxFrameBytesNotNumber", "BUZZ_MAX_FRAME_BYTES", "abc"},
		{"SlowClientGraceLimitNotNumber", "BUZZ_SLOW_CLIENT_GRACE_LIMIT", "abc"},
		{"DBPoolSizeNotNumber", "BUZZ_DB_POOL_SIZE", "abc"},
		{"RedisPoolSizeNotNumber", "BUZZ_REDIS_POOL_SIZE", "abc"},
		{"HealthPortNotNumber", "BUZZ_HEALTH_PORT", "abc"},
		{"HealthPortOutOfRange", "BUZZ_HEALTH_PORT", "70000"},
		{"MetricsPortOutOfRange", "BUZZ_METRICS_PORT", "70000"},
		{"AutoMigrateNotBoolean", "BUZZ_AUTO_MIGRATE", "maybe"},
		{"RelayPrivateKeyNotHex", "BUZZ_RELAY_PRIVATE_KEY", "xyz"},
		{"RelayURLNotWebSocket", "RELAY_URL", "http://x"},
		{"SearchRankWindowTooSmall", "BUZZ_SEARCH_RANK_WINDOW", "99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := relayEnv(t)
			env["DATABASE_URL"] = unreachableDB
			env["BUZZ_DATA_DIR"] = t.TempDir()
			env[tt.variable] = tt.value
			res := runBinary(t, env, "serve")
			require.Equal(t, 2, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
			require.True(t, strings.HasPrefix(res.Stderr, "invalid "+tt.variable+": "), "stderr: %q", res.Stderr)
			require.NotContains(t, res.Stdout, "listening")
			requireNotListening(t, env["BUZZ_BIND_ADDR"])
			// No private cluster was started either.
			require.NoDirExists(t, filepath.Join(env["BUZZ_DATA_DIR"], "pg"))
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()

	t.Run("TypoWarned", func(t *testing.T) {
		t.Parallel()
		env := externalEnv(t)
		env["BUZZ_SEND_BUFER"] = "5"
		p := startReady(t, env)
		var warned bool
		for _, rec := range p.logRecords() {
			if rec["level"] == "WARN" && strings.Contains(rec["msg"].(string), "BUZZ_SEND_BUFER") {
				warned = true
			}
		}
		require.True(t, warned, "no warning names BUZZ_SEND_BUFER:\n%s", p.Stdout)
	})

	t.Run("XPubkeyShortcutOffByDefault", func(t *testing.T) {
		t.Parallel()
		p := startReady(t, externalEnv(t))
		req, err := http.NewRequest(http.MethodPost, "http://"+p.AppAddr+"/query",
			strings.NewReader(`{"filters":[{"kinds":[0]}]}`))
		require.NoError(t, err)
		req.Host = "localhost:3000"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Pubkey", eventtest.NewKey().PubKey)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})
}

// Readiness follows PostgreSQL, liveness does not.
func TestReadinessFollowsPostgres(t *testing.T) {
	t.Parallel()
	env := privateEnv(t)
	p := startReady(t, env)

	code, body, err := httpGet(p.HealthURL + "/_liveness")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", strings.TrimSpace(body))
	code, body, err = httpGet(p.HealthURL + "/_readiness")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ready"}`, body)

	// pg_ctl stop -m fast, as the cluster's owner, under the running relay.
	stopCluster(t, env["BUZZ_DATA_DIR"])

	_, body = p.pollHealth("/_readiness", 10*time.Second, func(code int, _ string) bool {
		return code == http.StatusServiceUnavailable
	})
	var ready map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	require.Equal(t, "not_ready", ready["status"])
	require.Equal(t, false, ready["postgres"])
	require.NotContains(t, ready, "redis") // REDIS_URL is unset

	code, body, err = httpGet(p.HealthURL + "/_liveness")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", strings.TrimSpace(body))
	require.False(t, p.exited(), "the relay exited when PostgreSQL stopped")
}

// Issue 10: the relay's logs carry durations as Go duration strings, not
// nanoseconds. A start on an empty database with BUZZ_AUTO_MIGRATE logs
// how long each migration took.
func TestServeLogsDurationsAsStrings(t *testing.T) {
	t.Parallel()
	env := relayEnv(t)
	env["DATABASE_URL"] = dbtest.NewEmptyDB(t)
	env["BUZZ_AUTO_MIGRATE"] = "true"
	p := startReady(t, env)

	var took []any
	for _, rec := range p.logRecords() {
		if rec["msg"] == "applied migration" {
			took = append(took, rec["took"])
		}
	}
	require.Len(t, took, len(pg.Migrations()), "one record per migration:\n%s", p.Stdout)
	for _, v := range took {
		s, ok := v.(string)
		require.True(t, ok, "took is %T %v, want a duration string", v, v)
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		require.Positive(t, d)
	}
}

// buzz-relay with no arguments is serve: it reads the configuration and
// refuses a bad value the way serve does.
func TestNoArgumentsServes(t *testing.T) {
	t.Parallel()
	env := relayEnv(t)
	env["DATABASE_URL"] = unreachableDB
	env["BUZZ_SEND_BUFFER"] = "abc"
	bare := runBinary(t, env)
	require.Equal(t, 2, bare.Code, "stdout:\n%s\nstderr:\n%s", bare.Stdout, bare.Stderr)
	require.True(t, strings.HasPrefix(bare.Stderr, "invalid BUZZ_SEND_BUFFER: "), "stderr: %q", bare.Stderr)
	require.Equal(t, runBinary(t, env, "serve"), bare)
}
