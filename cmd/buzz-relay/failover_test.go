package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/standbytest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// heldEndpoint is a real local HTTPS listener endpoint that records the
// event_id of every notification it read whole and answers 204, except
// that while held it keeps each request waiting until release.
type heldEndpoint struct {
	srv      *httptest.Server
	certFile string
	mu       sync.Mutex
	got      map[string]int
	waiting  int
	gate     chan struct{}
}

func newHeldEndpoint(t *testing.T) *heldEndpoint {
	t.Helper()
	e := &heldEndpoint{got: map[string]int{}, gate: make(chan struct{})}
	close(e.gate)
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n struct {
			EventID string `json:"event_id"`
		}
		body, err := io.ReadAll(r.Body)
		if err != nil || json.Unmarshal(body, &n) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		gate := e.gate
		e.waiting++
		e.mu.Unlock()
		<-gate
		e.mu.Lock()
		e.waiting--
		e.got[n.EventID]++
		e.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { e.release(); e.srv.Close() })
	e.certFile = filepath.Join(t.TempDir(), "listener.pem")
	require.NoError(t, os.WriteFile(e.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.srv.Certificate().Raw}), 0o600))
	return e
}

// hold makes later requests wait until release.
func (e *heldEndpoint) hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gate = make(chan struct{})
}

// release answers the waiting requests and stops holding.
func (e *heldEndpoint) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.gate:
	default:
		close(e.gate)
	}
}

// state returns how many requests wait and how often each event id was
// received.
func (e *heldEndpoint) state() (int, map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.waiting, maps.Clone(e.got)
}

// readinessOf returns the status of p's /_readiness, 0 when it does not
// answer.
func readinessOf(p *relayProc) int {
	code, _, err := httpGet(p.HealthURL + "/_readiness")
	if err != nil {
		return 0
	}
	return code
}

// Everything that holds state across the writer recovers on a promoted
// standby with no operator action (docs/OPERATIONS.md "High availability"):
// two relay processes over Redis on the multi-host URL of a primary and
// its synchronous standby, the standby also their read replica, audit on,
// an operator listener configured on both. The primary is killed while
// the listener endpoint holds notifications the workers claimed, and the
// standby promoted. Then:
//   - the listener workers, whose claims failed while no writer answered,
//     claim again: the dead writer's claims are delivered again once their
//     lease passed, mentions published after the promotion are delivered,
//     and the outbox drains: every acknowledged mention reached the endpoint;
//   - a removal via A reaches B over Redis and closes the removed member's
//     subscription there (control messages);
//   - the read-state watermark written before the kill still refuses an
//     older version, and a newer one is stored;
//   - the replica proof holds on the promoted server: history is served
//     from it again, and its replay lag reads 0, not the distance from the
//     last position it replayed as a standby;
//   - the audit chain verifies on the new primary.
func TestFailoverStateRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := standbytest.StartWith(t, standbytest.Options{Synchronous: true})
	e := newHeldEndpoint(t)
	listener, target := eventtest.NewKey(), eventtest.NewKey()
	const origin = "https://ops.example"
	// The hot window is off: the history reads test the replica route, and
	// a window that holds the page answers it without the replica (the
	// first read after the promotion, made while the new primary's
	// heartbeat is not yet fresh, would warm it).
	s := startScaleOut(t, map[string]string{
		"DATABASE_URL":              pair.FailoverURL,
		"READ_DATABASE_URL":         pair.ReplicaURL,
		"BUZZ_AUDIT_ENABLED":        "true",
		"BUZZ_OPERATOR_LISTENERS":   listener.PubKey + ":" + e.srv.URL + "/hook",
		"RELAY_OPERATOR_API_ORIGIN": origin,
		"SSL_CERT_FILE":             e.certFile,
		"BUZZ_HOT_WINDOW_EVENTS":    "0",
	})
	registerTargets(t, s.a, listener, origin, []string{target.PubKey})

	owner, u := eventtest.NewKey(), eventtest.NewKey()
	ownerA := authedPeer(t, s.a, "owner on A", owner)
	ch := createChannel(t, ownerA, owner, private)
	ownerA.mustPublish(addMember(t, owner, ch, u.PubKey))
	uB := authedPeer(t, s.b, "U on B", u)
	uB.subscribe("live", channelFilter(ch))

	// History an hour old, imported on the writer without the created_at
	// floor, for reads the replica may serve.
	plain, err := pg.Open(ctx, pair.WriterURL, pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	oldCh := fixture.Channel(t, plain, s.community, owner)
	old := fixture.Event(t, plain, s.community, owner, event.KindStreamMessage, eventtest.Channel(oldCh),
		eventtest.At(time.Now().Unix()-7200))
	plain.Close()
	pair.WaitReplayed(t)
	history := map[string]any{"#h": []string{oldCh}, "kinds": []int{9}, "until": time.Now().Unix() - 3600}
	replicaRead := func(what string) {
		t.Helper()
		var before float64
		require.Eventually(t, func() bool {
			before = s.a.metric("buzz_db_replica_reads_total")
			got, closed := ownerA.req("h", history)
			require.Empty(t, closed)
			require.Equal(t, []string{old.ID}, idsOf(got))
			return s.a.metric("buzz_db_replica_reads_total") == before+1
		}, 30*time.Second, 200*time.Millisecond, "history served by the replica %s", what)
	}
	replicaRead("before the failover")

	// A read-state version of U's, written before the kill.
	slot := "read-state:" + strings.ReplaceAll(uuid.NewString(), "-", "")
	at := time.Now().Unix()
	readState := func(ts int64) event.Event {
		return u.Signed(t, event.KindAppData, eventtest.Tag("d", slot), eventtest.Tag("t", "read-state"), eventtest.At(ts), nonce())
	}
	uA := authedPeer(t, s.a, "U on A", u)
	uA.mustPublish(readState(at))

	// Mentions the workers claim and post, held by the endpoint.
	mention := func(w *peer, i int) string {
		ev := owner.Signed(t, event.KindStreamMessage, eventtest.Channel(ch), eventtest.Tag("p", target.PubKey),
			eventtest.Content("mention "+strconv.Itoa(i)))
		w.mustPublish(ev)
		return ev.ID
	}
	e.hold()
	var mentions []string
	for i := range 5 {
		mentions = append(mentions, mention(ownerA, i))
	}
	require.Eventually(t, func() bool { n, _ := e.state(); return n > 0 }, 20*time.Second, 10*time.Millisecond,
		"a worker claimed a mention and posts it")

	pair.KillPrimary(t)
	for _, p := range s.both() {
		require.Eventually(t, func() bool { return readinessOf(p) == http.StatusServiceUnavailable }, 15*time.Second,
			10*time.Millisecond, "readiness 503 on %s while no writer answers", p.AppAddr)
	}
	// The endpoint accepts what it held while no writer can record it, and
	// both workers find no writer to claim from before the promotion.
	e.release()
	for _, p := range s.both() {
		p.waitMetric("buzz_operator_listener_claim_errors_total", 30*time.Second, func(v float64) bool { return v > 0 })
	}
	pair.Promote(t)
	for _, p := range s.both() {
		require.Eventually(t, func() bool { return readinessOf(p) == http.StatusOK }, 30*time.Second,
			50*time.Millisecond, "readiness 200 on %s once the new primary answers", p.AppAddr)
	}
	promoted := time.Now()

	ownerB := authedPeer(t, s.b, "owner on B", owner)
	for i := 5; i < 10; i++ {
		mentions = append(mentions, mention(ownerB, i))
	}

	// Control messages: the removal via A closes U's subscription on B.
	ownerA.mustPublish(removeMember(t, owner, ch, u.PubKey))
	uB.take(deliveryWait, "CLOSED of live", isFrame("CLOSED", "live", wire.MsgAccessRevoked))

	// The durable watermark came across: an older version loses, a newer wins.
	ok, msg := uA.publish(readState(at - 10))
	require.True(t, ok)
	require.Equal(t, "duplicate:", msg, "the watermark written before the kill refuses an older version")
	uA.mustPublish(readState(at + 1))

	// The replica proof holds again on the promoted server, and its lag is 0.
	replicaRead("after the promotion")
	require.Eventually(t, func() bool { return s.a.metric("buzz_db_replica_lag_bytes") == 0 }, 20*time.Second,
		100*time.Millisecond, "a promoted replica reports no replay lag")

	// Listener deliveries: every acknowledged mention reached the endpoint
	// and the outbox drained, the dead writer's claims after their lease.
	newPrimary, err := pgx.Connect(ctx, pair.ReplicaURL)
	require.NoError(t, err)
	defer newPrimary.Close(ctx)
	pending := func() int {
		var n int
		require.NoError(t, newPrimary.QueryRow(ctx, `SELECT count(*) FROM operator_listener_outbox`).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool {
		_, got := e.state()
		for _, id := range mentions {
			if got[id] == 0 {
				return false
			}
		}
		return pending() == 0
	}, 90*time.Second, 100*time.Millisecond, "every mention delivered and the outbox drained")
	_, got := e.state()
	t.Logf("listener: %d mentions delivered by %s after the promotion, %v posts each", len(mentions),
		time.Since(promoted).Round(time.Millisecond), got)

	cli := baseEnv()
	cli["DATABASE_URL"] = pair.ReplicaURL
	res := runBinary(t, cli, "audit", "verify", "--community", deploymentHost)
	require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
}
