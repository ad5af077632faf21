package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/standbytest"
)

// statusOf returns field of the relay's /_status.
func statusOf(t *testing.T, r *relaytest.Relay, field string) any {
	t.Helper()
	resp, err := http.Get(r.HealthURL + "/_status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body[field]
}

// waitStatus waits until /_status's field is want; the probe runs every 5 s.
func waitStatus(t *testing.T, r *relaytest.Relay, field string, want any) {
	t.Helper()
	require.Eventually(t, func() bool { return statusOf(t, r, field) == want }, 20*time.Second, 100*time.Millisecond,
		"/_status %s never became %v", field, want)
}

func readiness(t *testing.T, r *relaytest.Relay) int {
	t.Helper()
	resp, err := http.Get(r.HealthURL + "/_readiness")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// count sends a COUNT and returns its count.
func count(t *testing.T, w *relaytest.WS, sub string, filter any) float64 {
	t.Helper()
	w.Send("COUNT", sub, filter)
	for {
		msg := w.Next()
		if len(msg) > 2 && msg[0] == "COUNT" && msg[1] == sub {
			return msg[2].(map[string]any)["count"].(float64)
		}
	}
}

func ids(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = evs[i].ID
	}
	return out
}

// The read replica (docs/PROTOCOL.md §16.6) on a whole relay over real sockets, with
// READ_DATABASE_URL set to a real streaming standby.
func TestRelayWithReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := standbytest.Start(t)
	// REQ history is what this test routes; the hot window would answer
	// it from memory, so it is off.
	r := relaytest.Start(t, map[string]string{"DATABASE_URL": pair.WriterURL, "READ_DATABASE_URL": pair.ReplicaURL,
		"BUZZ_DB_READ_POOL_SIZE": "3", "BUZZ_HOT_WINDOW_EVENTS": "0"})
	rep := r.App.Replica()
	require.NotNil(t, rep, "the fence check passed")
	require.Equal(t, 3.0, r.Metric(t, "buzz_db_read_pool_max"))

	// An import (unarmed, before routing matters) of history an hour old.
	plain, err := pg.Open(ctx, pair.WriterURL, pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	defer plain.Close()
	c, err := r.App.Store().CommunityByHost(ctx, r.Host)
	require.NoError(t, err)
	author, reader := eventtest.NewKey(), eventtest.NewKey()
	channel := fixture.Channel(t, plain, c.ID, author)
	old := fixture.Event(t, plain, c.ID, author, event.KindStreamMessage, eventtest.Channel(channel),
		eventtest.At(time.Now().Unix()-7200))
	rep.TestSignals.Init()
	rep.TestSignals.Probed.WaitOrTimeout(t)
	pair.WaitReplayed(t)
	require.Equal(t, "reachable", statusOf(t, r, "read_replica"))

	w := r.Dial(t, "")
	w.Auth(reader)
	hist := map[string]any{"#h": []string{channel}, "kinds": []int{9}, "until": time.Now().Unix() - 3600}

	t.Run("HistoryServedByTheReplica", func(t *testing.T) {
		before := r.Metric(t, "buzz_db_replica_reads_total")
		got, closed, _ := w.Req("h1", hist)
		require.Empty(t, closed)
		require.Equal(t, []string{old.ID}, ids(got))
		require.Equal(t, before+1, r.Metric(t, "buzz_db_replica_reads_total"))
	})

	t.Run("PublishThenReadFindsIt", func(t *testing.T) {
		before := r.Metric(t, "buzz_db_replica_reads_total")
		pw := r.Dial(t, "")
		pw.Auth(author)
		fresh := author.Signed(t, event.KindStreamMessage, eventtest.Channel(channel))
		pw.MustPublish(fresh)
		got, _, _ := w.Req("h2", map[string]any{"#h": []string{channel}, "kinds": []int{9}})
		require.Equal(t, []string{fresh.ID, old.ID}, ids(got))
		got, _, _ = w.Req("h3", map[string]any{"ids": []string{fresh.ID}})
		require.Equal(t, []string{fresh.ID}, ids(got))
		require.Equal(t, 2.0, count(t, w, "c1", map[string]any{"#h": []string{channel}, "kinds": []int{9}, "until": time.Now().Unix()}))
		require.Equal(t, 1.0, count(t, w, "c2", hist))
		require.Equal(t, before, r.Metric(t, "buzz_db_replica_reads_total"), "head pages, ids and COUNT use the writer")
	})

	t.Run("StandbyStoppedReadsStillSucceed", func(t *testing.T) {
		degraded := r.Metric(t, "buzz_db_read_session_degraded")
		pair.StopStandby(t)
		got, closed, _ := w.Req("h4", hist)
		require.Empty(t, closed)
		require.Equal(t, []string{old.ID}, ids(got))
		require.Greater(t, r.Metric(t, "buzz_db_read_session_degraded"), degraded)
		require.Equal(t, http.StatusOK, readiness(t, r), "readiness never depends on the replica")
		waitStatus(t, r, "read_replica", "unreachable")
		require.Equal(t, http.StatusOK, readiness(t, r))
		pair.StartStandby(t)
		waitStatus(t, r, "read_replica", "reachable")
	})
	require.Equal(t, http.StatusOK, readiness(t, r))
}
