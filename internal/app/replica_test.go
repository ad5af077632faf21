package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/logtest"
)

// floorSetting is buzz.created_at_floor on a connection of a's writer pool.
func floorSetting(t *testing.T, a *Relay) *string {
	t.Helper()
	var v *string
	require.NoError(t, a.db.Pool.QueryRow(context.Background(), "SELECT current_setting('buzz.created_at_floor', true)").Scan(&v))
	return v
}

// statusReplica is /_status's read_replica, over a real HTTP connection to
// a's health handler.
func statusReplica(t *testing.T, a *Relay) string {
	t.Helper()
	srv := httptest.NewServer(a.health.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/_status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		ReadReplica string `json:"read_replica"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.ReadReplica
}

// The wiring of READ_DATABASE_URL; what the replica serves is tested in
// internal/read and internal/replica against a real standby, and over
// real sockets in TestRelayWithReplica.
func TestReplicaWiring(t *testing.T) {
	t.Parallel()

	t.Run("WithoutReplicaWriterUnarmed", func(t *testing.T) {
		t.Parallel()
		a := setup(t, nil).start(t)
		defer a.Close()
		require.Nil(t, a.services.Replica)
		require.Nil(t, a.db.ReadPool)
		require.Nil(t, floorSetting(t, a), "fixtures and imports may write old rows")
		require.Equal(t, "disabled", statusReplica(t, a))
	})

	t.Run("ReplicaArmsTheWriterAndRunsTheProbe", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.cfg.ReadDatabaseURL, b.cfg.DBReadPoolSize = b.cfg.DatabaseURL, 3
		a := b.start(t)
		require.NotNil(t, a.services.Replica)
		require.Contains(t, a.services.list(), any(a.services.Replica))
		require.Equal(t, "960", *floorSetting(t, a))
		require.EqualValues(t, 3, a.db.ReadPool.Config().MaxConns)
		a.Close()
		require.Error(t, a.db.ReadPool.Ping(context.Background()), "Close closed the read pool")
	})

	t.Run("ReplicaDownAtStartDoesNotStopIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.cfg.ReadDatabaseURL, b.cfg.DBReadPoolSize = "postgres://buzz@/buzz?host="+t.TempDir(), 2
		a := b.start(t)
		defer a.Close()
		require.NotNil(t, a.services.Replica, "the replica is dialled on first use")
	})

	t.Run("FailedFenceKeepsReadsOnTheWriter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, err := b.pool.Exec(context.Background(), "ALTER TABLE events_p_default DISABLE TRIGGER events_created_at_floor")
		require.NoError(t, err)
		b.cfg.ReadDatabaseURL, b.cfg.DBReadPoolSize = b.cfg.DatabaseURL, 2
		var logs logtest.Buffer
		b.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		a := b.start(t)
		defer a.Close()
		require.Nil(t, a.services.Replica)
		require.Nil(t, a.db.ReadPool)
		require.Contains(t, logs.String(), "read replica not used; every read stays on the writer")
		require.Contains(t, logs.String(), "events_created_at_floor is missing or disabled on events_p_default")
		require.Equal(t, "unused", statusReplica(t, a))
	})
}
