package relaytest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/server"
)

// StartWithLogger is Start with the relay's logs written to w, as JSON, at
// the level of BUZZ_LOG_LEVEL (default warn), so a test can inspect what
// the relay logs. w must be safe for concurrent writes. It stops when the
// test ends; call Stop first to be sure every line has been written.
func StartWithLogger(t testing.TB, env map[string]string, w io.Writer, hooks ...server.Hooks) *Relay {
	t.Helper()
	_, url := dbtest.NewDB(t)
	app, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := app.Addr().(*net.TCPAddr).Port
	vars := map[string]string{
		"DATABASE_URL":            url,
		"BUZZ_AUTO_MIGRATE":       "true",
		"RELAY_URL":               "ws://localhost:" + strconv.Itoa(port),
		"BUZZ_BIND_ADDR":          app.Addr().String(),
		"BUZZ_HEALTH_PORT":        strconv.Itoa(hl.Addr().(*net.TCPAddr).Port),
		"BUZZ_METRICS_PORT":       strconv.Itoa(ml.Addr().(*net.TCPAddr).Port),
		"BUZZ_DB_POOL_SIZE":       "10",
		"BUZZ_LOG_FORMAT":         "json",
		"BUZZ_LOG_LEVEL":          "warn",
		"BUZZ_AUDIT_ENABLED":      "true",
		"BUZZ_REQUIRE_AUTH_TOKEN": "true",
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, _, err := config.Load(func(k string) string { return vars[k] }, nil)
	require.NoError(t, err)
	if d, ok := env["TEST_HEARTBEAT"]; ok {
		cfg.HeartbeatInterval, _ = time.ParseDuration(d)
	}
	if d, ok := env["TEST_MEMBERSHIP_RECHECK"]; ok {
		cfg.MembershipRecheck, _ = time.ParseDuration(d)
	}
	if d, ok := env["TEST_AUTH_TIMEOUT"]; ok {
		cfg.AuthTimeout, _ = time.ParseDuration(d)
	}
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := server.Start(ctx, cfg, log, hooks...)
	if err != nil {
		cancel()
		app.Close()
		hl.Close()
		ml.Close()
		require.NoError(t, err)
	}
	r := &Relay{App: a, Port: port, Host: "localhost:" + strconv.Itoa(port), DBURL: url,
		HealthURL: "http://" + hl.Addr().String(), MetricsURL: "http://" + ml.Addr().String(),
		cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx, app, hl, ml) }()
	t.Cleanup(r.Stop)
	return r
}
