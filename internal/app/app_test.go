package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/service"
)

// appName marks the relay's own connections, so a test can count them.
const appName = "buzz_server_test"

type testBundle struct {
	pool *pgxpool.Pool // the test's own connections, not the relay's
	cfg  config.Config
	log  *slog.Logger
}

func setup(t *testing.T, env map[string]string) *testBundle {
	t.Helper()
	pool, url := dbtest.NewDB(t)
	vars := map[string]string{
		"DATABASE_URL":      url + "&application_name=" + appName,
		"BUZZ_AUTO_MIGRATE": "true",
		"RELAY_URL":         "ws://localhost:3000",
		"BUZZ_DB_POOL_SIZE": "4",
		"BUZZ_LOG_LEVEL":    "warn",
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, _, err := config.Load(func(k string) string { return vars[k] }, nil)
	require.NoError(t, err)
	return &testBundle{pool: pool, cfg: cfg,
		log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

func (b *testBundle) start(t *testing.T) *Relay {
	t.Helper()
	a, err := Start(context.Background(), b.cfg, b.log)
	require.NoError(t, err)
	return a
}

// relayConnections counts the sessions the relay holds on its database.
func (b *testBundle) relayConnections(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, appName).Scan(&n))
	return n
}

// requireNoRelayConnections waits until the server has ended the relay's
// sessions: a backend leaves pg_stat_activity shortly after its client
// closed the connection, and PostgreSQL sends no signal for it.
func (b *testBundle) requireNoRelayConnections(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return b.relayConnections(t) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the relay's database sessions are still open")
}

// partitionExists reports whether the events partition of month t exists.
func (b *testBundle) partitionExists(t *testing.T, month time.Time) bool {
	t.Helper()
	var ok bool
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, pg.PartitionName(month)).Scan(&ok))
	return ok
}

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("RegistersServicesAndCloseReleasesEverything", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		a := b.start(t)
		s := a.services
		require.Nil(t, s.Listeners, "no delivery worker without configured listeners")
		require.NotNil(t, s.HotListener, "the hot window is on by default")
		require.Equal(t, []service.Service{s.Partitions, s.Analyze, s.ReplayPurge, s.ExpiredPurge, s.Membership, s.HotListener, s.ListenerReaper}, s.list(),
			"the listener reaper runs on every process")
		for _, svc := range s.list() {
			require.NotNil(t, svc)
		}
		require.NotNil(t, a.audit, "audit is on by default")
		now := time.Now().UTC()
		first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		for i := range 4 {
			require.True(t, b.partitionExists(t, first.AddDate(0, i, 0)), "month +%d", i)
		}
		require.False(t, b.partitionExists(t, first.AddDate(0, 4, 0)))
		require.Positive(t, b.relayConnections(t), "the relay and audit pools are open")

		a.Close()
		b.requireNoRelayConnections(t) // Close closed the relay's and the audit pool
		require.Error(t, a.db.Pool.Ping(context.Background()))
		require.Error(t, a.audit.Pool.Ping(context.Background()))
	})

	t.Run("CurrentMonthPartitionFailureStopsStartup", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		now := time.Now().UTC()
		day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		_, err := b.pool.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE blocker PARTITION OF events FOR VALUES FROM ('%s') TO ('%s')`,
			day.Format(time.DateOnly), day.AddDate(0, 0, 1).Format(time.DateOnly)))
		require.NoError(t, err)
		_, err = Start(context.Background(), b.cfg, b.log)
		require.ErrorContains(t, err, "create the current month's events partition: create partition "+pg.PartitionName(now)+": ")
		b.requireNoRelayConnections(t) // a failed Start leaves no connection open
	})
}

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("StartsAndStopsTheServices", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]string{"BUZZ_REQUIRE_RELAY_MEMBERSHIP": "true",
			"RELAY_OWNER_PUBKEY": eventtest.NewKey().PubKey, "BUZZ_EXPIRED_PURGE_INTERVAL_MS": "1000"})
		b.cfg.MembershipRecheck = 10 * time.Millisecond
		a := b.start(t)
		defer a.Close()
		a.services.Membership.TestSignals.Init()
		a.services.ExpiredPurge.TestSignals.Init()
		listeners := make([]net.Listener, 3)
		for i := range listeners {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			listeners[i] = l
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx, listeners[0], listeners[1], listeners[2]) }()
		require.Zero(t, a.services.Membership.TestSignals.Rechecked.WaitOrTimeout(t), "a tick with no connection")
		var owners int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM relay_members m
			JOIN communities c ON c.id = m.community_id WHERE c.host = 'localhost:3000' AND m.role = 'owner'`).Scan(&owners))
		require.Equal(t, 1, owners, "Run bootstrapped the deployment community and its owner before serving")
		require.True(t, a.services.Membership.Running())
		require.Zero(t, a.services.ExpiredPurge.TestSignals.Purged.WaitOrTimeout(t),
			"the expired purge runs every BUZZ_EXPIRED_PURGE_INTERVAL_MS")
		cancel()
		require.NoError(t, <-done)
		for _, svc := range a.services.list() {
			require.False(t, svc.(interface{ Running() bool }).Running(), "%T still running after Run", svc)
		}
		require.False(t, a.audit.Chainer.Running())
		require.False(t, a.audit.Observer.Running())
	})
}

func TestBindFailure(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	t.Cleanup(func() { busy.Close() })
	port := busy.Addr().(*net.TCPAddr).Port

	t.Run("HealthPortTakenNamesTheThreePorts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]string{"BUZZ_BIND_ADDR": "127.0.0.1:0", "BUZZ_HEALTH_PORT": fmt.Sprint(port)})
		a := b.start(t)
		defer a.Close()
		_, _, _, err := a.Listen()
		require.ErrorContains(t, err, fmt.Sprintf("listen on BUZZ_HEALTH_PORT %d: ", port))
		require.ErrorContains(t, err, fmt.Sprintf("(the relay listens on three ports, BUZZ_BIND_ADDR 127.0.0.1:0, "+
			"BUZZ_HEALTH_PORT %d and BUZZ_METRICS_PORT 9102: another relay on this machine needs all three moved)", port))
	})

	t.Run("LeavesNoCommunity", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]string{"BUZZ_BIND_ADDR": fmt.Sprintf("127.0.0.1:%d", port),
			"RELAY_OWNER_PUBKEY": eventtest.NewKey().PubKey})
		a := b.start(t)
		defer a.Close()
		_, _, _, err := a.Listen()
		require.ErrorContains(t, err, fmt.Sprintf("listen on BUZZ_BIND_ADDR 127.0.0.1:%d: ", port))
		var communities, members int
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM communities), (SELECT count(*) FROM relay_members)`).Scan(&communities, &members))
		require.Zero(t, communities, "a start that cannot bind writes no community")
		require.Zero(t, members)
	})
}
