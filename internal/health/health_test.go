package health

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	url      string
	client   *http.Client
	pgErr    atomic.Pointer[error] // nil: PostgreSQL answers
	pings    atomic.Int32
	deadline atomic.Pointer[time.Time] // of the last ping's ctx
}

// setup serves a Server over real HTTP. modify may adjust the Config; the
// bundle's pgErr drives PingPostgres.
func setup(t *testing.T, modify func(*Config)) (*Server, *testBundle) {
	t.Helper()
	b := &testBundle{}
	cfg := Config{
		Version: "v1.2.3",
		Started: time.Now().Add(-90 * time.Second),
		PingPostgres: func(ctx context.Context) error {
			b.pings.Add(1)
			if d, ok := ctx.Deadline(); ok {
				b.deadline.Store(&d)
			}
			if err := b.pgErr.Load(); err != nil {
				return *err
			}
			return nil
		},
		Connections:   func() int { return 7 },
		Subscriptions: func() int { return 11 },
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if modify != nil {
		modify(&cfg)
	}
	s := New(cfg)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	b.url, b.client = srv.URL, srv.Client()
	return s, b
}

func (b *testBundle) failPostgres(err error) { b.pgErr.Store(&err) }

// do returns the status, Content-Type and body of method path.
func (b *testBundle) do(t *testing.T, method, path string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, nil)
	require.NoError(t, err)
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

func (b *testBundle) get(t *testing.T, path string) (int, string, string) {
	t.Helper()
	return b.do(t, http.MethodGet, path)
}

func TestLiveness(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		b.failPostgres(errors.New("down")) // liveness never looks at PostgreSQL
		code, ctype, body := b.get(t, "/_liveness")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "text/plain; charset=utf-8", ctype)
		require.Equal(t, "ok", body)
		require.Zero(t, b.pings.Load())
	})

	t.Run("OKDuringDrain", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, nil)
		s.SetShuttingDown()
		code, _, body := b.get(t, "/_liveness")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok", body)
	})
}

func TestReadiness(t *testing.T) {
	t.Parallel()

	t.Run("Ready", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		start := time.Now()
		code, ctype, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "application/json", ctype)
		require.Equal(t, `{"status":"ready"}`, body)
		deadline := b.deadline.Load()
		require.NotNil(t, deadline, "the ping has a deadline")
		require.WithinRange(t, *deadline, start, time.Now().Add(PingTimeout))
	})

	t.Run("PostgresDown", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		b.failPostgres(errors.New("connection refused"))
		code, ctype, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, "application/json", ctype)
		require.Equal(t, `{"status":"not_ready","postgres":false}`, body)
	})

	t.Run("PostgresBackUp", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		b.failPostgres(errors.New("connection refused"))
		code, _, _ := b.get(t, "/_readiness")
		require.Equal(t, http.StatusServiceUnavailable, code)
		b.pgErr.Store(nil)
		code, _, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, `{"status":"ready"}`, body)
	})

	t.Run("NoPingFunc", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, func(c *Config) { c.PingPostgres = nil })
		code, _, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, `{"status":"not_ready","postgres":false}`, body)
	})

	t.Run("RedisShownOnlyWhenConfigured", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name  string
			redis func() string
			want  string
		}{
			{"Unset", nil, `{"status":"not_ready","postgres":false}`},
			{"Disabled", func() string { return RedisDisabled }, `{"status":"not_ready","postgres":false}`},
			{"Connected", func() string { return RedisConnected }, `{"status":"not_ready","postgres":false,"redis":true}`},
			{"Disconnected", func() string { return RedisDisconnected }, `{"status":"not_ready","postgres":false,"redis":false}`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, b := setup(t, func(c *Config) { c.RedisStatus = tt.redis })
				b.failPostgres(errors.New("down"))
				code, _, body := b.get(t, "/_readiness")
				require.Equal(t, http.StatusServiceUnavailable, code)
				require.Equal(t, tt.want, body)
			})
		}
	})

	t.Run("RedisDownStaysReady", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, func(c *Config) { c.RedisStatus = func() string { return RedisDisconnected } })
		code, _, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, `{"status":"ready"}`, body)
	})

	t.Run("ShuttingDown", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, nil)
		s.SetShuttingDown()
		s.SetShuttingDown() // idempotent
		code, ctype, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, "application/json", ctype)
		require.Equal(t, `{"status":"shutting_down"}`, body)
		require.Zero(t, b.pings.Load(), "no ping during drain")
	})

	t.Run("ShuttingDownDuringPing", func(t *testing.T) {
		t.Parallel()
		var s *Server
		s, b := setup(t, func(c *Config) {
			c.PingPostgres = func(context.Context) error {
				s.SetShuttingDown()
				return nil
			}
		})
		code, _, body := b.get(t, "/_readiness")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, `{"status":"shutting_down"}`, body)
	})
}

func TestStatus(t *testing.T) {
	t.Parallel()

	t.Run("Fields", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		code, ctype, body := b.get(t, "/_status")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "application/json", ctype)
		require.True(t, strings.HasPrefix(body, `{"service":"buzz-relay","version":"v1.2.3","uptime_seconds":`), body)
		require.True(t, strings.HasSuffix(body, `,"postgres":"ok","redis":"disabled","read_replica":"disabled","connections":7,"subscriptions":11}`), body)

		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		require.Len(t, got, 8)
		uptime, ok := got["uptime_seconds"].(float64)
		require.True(t, ok)
		require.GreaterOrEqual(t, uptime, 90.0)
		require.Equal(t, uptime, float64(int64(uptime)), "whole seconds")
	})

	t.Run("PostgresErrorRedisDisconnected", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, func(c *Config) {
			c.RedisStatus = func() string { return RedisDisconnected }
			c.ReplicaStatus = func() string { return "unreachable" }
			c.Connections, c.Subscriptions = nil, nil
		})
		b.failPostgres(errors.New("down"))
		s.SetShuttingDown() // /_status still answers 200
		code, _, body := b.get(t, "/_status")
		require.Equal(t, http.StatusOK, code)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		require.Equal(t, "error", got["postgres"])
		require.Equal(t, "disconnected", got["redis"])
		require.Equal(t, "unreachable", got["read_replica"])
		require.Equal(t, 0.0, got["connections"])
		require.Equal(t, 0.0, got["subscriptions"])
	})

	t.Run("ZeroStartedCountsFromNew", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, func(c *Config) { c.Started = time.Time{} })
		_, _, body := b.get(t, "/_status")
		require.Contains(t, body, `"uptime_seconds":0,`)
	})
}

func TestRouting(t *testing.T) {
	t.Parallel()

	t.Run("UnknownPath", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		code, _, _ := b.get(t, "/health")
		require.Equal(t, http.StatusNotFound, code)
	})

	t.Run("WrongMethod", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, nil)
		for _, path := range []string{"/_liveness", "/_readiness", "/_status"} {
			code, _, _ := b.do(t, http.MethodPost, path)
			require.Equal(t, http.StatusMethodNotAllowed, code, path)
		}
	})

	t.Run("AppListenerMounts", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, nil)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", s.Liveness)
		mux.HandleFunc("GET /_liveness", s.Liveness)
		mux.HandleFunc("GET /_readiness", s.Readiness)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		b := &testBundle{url: srv.URL, client: srv.Client()}
		code, _, body := b.get(t, "/health")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok", body)
		code, _, body = b.get(t, "/_readiness")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, `{"status":"ready"}`, body)
	})
}

func TestMetricsHandler(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "buzz_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	srv := httptest.NewServer(MetricsHandler(reg))
	t.Cleanup(srv.Close)
	b := &testBundle{url: srv.URL, client: srv.Client()}

	code, ctype, body := b.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.HasPrefix(ctype, "text/plain; version=0.0.4"), ctype)
	require.Contains(t, body, "# TYPE buzz_test_total counter\nbuzz_test_total 3\n")

	code, _, _ = b.get(t, "/")
	require.Equal(t, http.StatusNotFound, code)
}

// TestMetricsPprof checks over real HTTP that the profiling endpoints are
// served only when asked for.
func TestMetricsPprof(t *testing.T) {
	t.Parallel()
	serve := func(opts MetricsOptions) *testBundle {
		srv := httptest.NewServer(MetricsHandlerWith(prometheus.NewRegistry(), opts))
		t.Cleanup(srv.Close)
		return &testBundle{url: srv.URL, client: srv.Client()}
	}
	off := serve(MetricsOptions{})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		code, _, _ := off.get(t, path)
		require.Equal(t, http.StatusNotFound, code, path)
	}
	code, _, _ := off.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	code, _, _ = serve(MetricsOptions{Pprof: false}).get(t, "/debug/pprof/heap")
	require.Equal(t, http.StatusNotFound, code, "MetricsHandlerWith without Pprof")

	on := serve(MetricsOptions{Pprof: true})
	code, _, body := on.get(t, "/debug/pprof/heap?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "heap profile:")
	code, ctype, body := on.get(t, "/debug/pprof/heap")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "application/octet-stream", ctype)
	require.True(t, strings.HasPrefix(body, "\x1f\x8b"), "a gzipped protobuf profile")
	code, _, body = on.get(t, "/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine")
	code, _, _ = on.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code, "metrics stay served")
	code, _, _ = on.get(t, "/")
	require.Equal(t, http.StatusNotFound, code)
}
