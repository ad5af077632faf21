package windowbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/buzz-relay/buzz/internal/app"
	relayconfig "github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/pgcluster"
)

// target is the relay under test and its database: the command starts
// both itself (startTarget); the benchmark test gets them from
// relaytest.
type target struct {
	// App is the running relay.
	App *app.Relay
	// Addr is the app listener, 127.0.0.1:port; requests carry their own
	// Host header.
	Addr string
	// DBURL is the relay's database; the fixture and EXPLAINs use a pool
	// of their own on it.
	DBURL string
	// closeFunc stops what startTarget started; nil for the test's relay.
	closeFunc func()
}

func (t *target) close() {
	if t.closeFunc != nil {
		t.closeFunc()
	}
}

// startTarget starts a private cluster under dataDir (a temporary
// directory when empty, removed by close) and a relay on loopback ports
// whose deployment community is localhost:<port>.
func startTarget(ctx context.Context, dataDir string, p *progress) (*target, error) {
	dir, temp := dataDir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "windowbench-")
		if err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
		dir, temp = d, true
	}
	removeDir := func() {
		if temp {
			_ = os.RemoveAll(dir)
		}
	}
	log := slog.New(slog.NewTextHandler(p.w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p.logf("starting PostgreSQL under %s", dir)
	cluster, err := pgcluster.Start(ctx, pgcluster.Config{DataDir: dir, Logger: log})
	if err != nil {
		removeDir()
		return nil, err
	}
	stopCluster := func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.Stop(sctx); err != nil {
			p.logf("stop PostgreSQL: %v", err)
		}
		removeDir()
	}
	t, err := startRelay(ctx, cluster.URL(), log)
	if err != nil {
		stopCluster()
		return nil, err
	}
	relayStop := t.closeFunc
	t.closeFunc = func() { relayStop(); stopCluster() }
	return t, nil
}

// startRelay runs a relay in this process on dbURL with three loopback
// listeners and waits until it is ready.
func startRelay(ctx context.Context, dbURL string, log *slog.Logger) (*target, error) {
	var ls [3]net.Listener
	closeAll := func() {
		for _, l := range ls {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen on loopback: %w", err)
		}
		ls[i] = l
	}
	port := func(i int) string { return strconv.Itoa(ls[i].Addr().(*net.TCPAddr).Port) }
	vars := map[string]string{
		"DATABASE_URL":      dbURL,
		"BUZZ_AUTO_MIGRATE": "true",
		"RELAY_URL":         "ws://localhost:" + port(0),
		"BUZZ_BIND_ADDR":    ls[0].Addr().String(),
		"BUZZ_HEALTH_PORT":  port(1),
		"BUZZ_METRICS_PORT": port(2),
		"BUZZ_LOG_LEVEL":    "warn",
		// Per-user quotas and the read-time budget off: the benchmark
		// reads far faster than a person.
		"BUZZ_READ_TIME_PER_SECOND_MS":                     "0",
		"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN":           "0",
		"BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN":          "0",
		"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC":          "0",
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN":  "0",
		"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN": "0",
		"BUZZ_CHANNEL_CREATES_PER_HOUR":                    "0",
	}
	cfg, _, err := relayconfig.Load(func(k string) string { return vars[k] }, nil)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("relay config: %w", err)
	}
	a, err := app.Start(ctx, cfg, log)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start relay: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- a.Run(rctx, ls[0], ls[1], ls[2]) }()
	stop := func() {
		cancel()
		<-done
		a.Close()
	}
	if err := waitReady(ctx, "http://"+ls[1].Addr().String()+"/_readiness", done); err != nil {
		stop()
		return nil, err
	}
	return &target{App: a, Addr: ls[0].Addr().String(), DBURL: dbURL, closeFunc: stop}, nil
}

// waitReady polls the readiness URL until it answers 200, the relay stops
// or 60 s pass.
func waitReady(ctx context.Context, url string, done chan error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("relay stopped before it was ready: %w", err)
		case <-ctx.Done():
			return errors.New("relay not ready after 60 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
