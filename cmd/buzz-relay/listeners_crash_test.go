package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/auth"
	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
)

// notice is one notification body a crash-test endpoint received in full.
type notice struct {
	Pubkey  string `json:"pubkey"`
	EventID string `json:"event_id"`
	Host    string `json:"community_host"`
	Kind    int    `json:"event_kind"`
}

// mentionKey is a (target pubkey, event id) pair: one delivery.
type mentionKey struct{ target, event string }

// crashEndpoint is a real local HTTPS listener that answers 204 and
// records every notification whose body it read completely (a POST cut
// short by the kill is no delivery). It verifies each POST's NIP-98
// header against the relay key and its own URL.
type crashEndpoint struct {
	srv      *httptest.Server
	certFile string
	relayPub string
	mu       sync.Mutex
	got      []notice
	bad      []string
}

func newCrashEndpoint(t *testing.T, relayPub string) *crashEndpoint {
	t.Helper()
	e := &crashEndpoint{relayPub: relayPub}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var n notice
		problem := ""
		if err := json.Unmarshal(body, &n); err != nil {
			problem = "body " + string(body) + ": " + err.Error()
		} else if n.Host != deploymentHost || n.Kind != 9 {
			problem = "body " + string(body) + ": not a kind 9 of " + deploymentHost
		} else if ev, err := auth.ParseNIP98Header(r.Header.Get("Authorization")); err != nil {
			problem = "auth: " + err.Error()
		} else {
			sum := sha256.Sum256(body)
			if !ev.VerifySignature() || ev.PubKey != e.relayPub || ev.Tags.First("u").Value() != e.srv.URL+"/hook" ||
				ev.Tags.First("payload").Value() != hex.EncodeToString(sum[:]) {
				problem = "auth event does not match: " + r.Header.Get("Authorization")
			}
		}
		e.mu.Lock()
		if problem != "" {
			e.bad = append(e.bad, problem)
		} else {
			e.got = append(e.got, n)
		}
		e.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	// Handshakes the kill cuts short are expected; their log lines are noise.
	e.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	e.certFile = filepath.Join(t.TempDir(), "listener.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(e.certFile, pemBytes, 0o600))
	return e
}

// received returns how many notifications arrived so far.
func (e *crashEndpoint) received() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

// counts returns how many times each (target, event) was received, and the
// malformed or wrongly signed POSTs.
func (e *crashEndpoint) counts() (map[mentionKey]int, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[mentionKey]int, len(e.got))
	for _, n := range e.got {
		out[mentionKey{n.Pubkey, n.EventID}]++
	}
	return out, append([]string(nil), e.bad...)
}

// registerTargets registers targets for listener over HTTP with NIP-98,
// against the operator API origin.
func registerTargets(t *testing.T, p *relayProc, listener eventtest.Key, origin string, targets []string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"pubkeys": targets})
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	tok := listener.Signed(t, auth.KindHTTPAuth, eventtest.Content(""), eventtest.Tag("u", origin+"/operator/listener/pubkeys"),
		eventtest.Tag("method", "POST"), eventtest.Tag("payload", hex.EncodeToString(sum[:])))
	req, err := http.NewRequest(http.MethodPost, "http://"+p.AppAddr+"/operator/listener/pubkeys", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", auth.NIP98Header(tok))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// mentionPublisher is one authenticated connection publishing kind 9
// events in ch as fast as the relay answers, each p-tagging one or two of
// targets and up to two unregistered pubkeys. Every event sent is recorded
// in sent with its registered targets (committed events that never got
// their OK are checked too); the ids that got OK true go to okIDs. It
// returns when stop closes or the connection ends (the kill).
func mentionPublisher(t *testing.T, w *wsClient, key eventtest.Key, ch string, targets []string,
	stop <-chan struct{}, okIDs chan<- string, sent *sync.Map) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		opts := []eventtest.Option{eventtest.Channel(ch), eventtest.Content("mention " + strconv.Itoa(i))}
		var mine []string
		for range 1 + rng.IntN(2) {
			tg := targets[rng.IntN(len(targets))]
			if len(mine) == 0 || mine[0] != tg {
				mine = append(mine, tg)
			}
			opts = append(opts, eventtest.Tag("p", tg))
		}
		for range rng.IntN(3) {
			opts = append(opts, eventtest.Tag("p", eventtest.NewKey().PubKey))
		}
		ev := key.Signed(t, 9, opts...)
		sent.Store(ev.ID, mine)
		b, _ := json.Marshal([]any{"EVENT", ev})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := w.c.Write(ctx, 1, b)
		cancel()
		if err != nil {
			return
		}
		msg, err := w.read()
		if err != nil {
			return // killed
		}
		if len(msg) >= 3 && msg[0] == "OK" && msg[1] == ev.ID && msg[2] == true {
			okIDs <- ev.ID
		}
	}
}

// outboxRows returns the (target, event) pairs in the operator-listener
// outbox, with their state.
func outboxRows(t *testing.T, pool *pgxpool.Pool) map[mentionKey]string {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT encode(target_pubkey, 'hex'), encode(event_id, 'hex'), state FROM operator_listener_outbox`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[mentionKey]string{}
	for rows.Next() {
		var k mentionKey
		var state string
		require.NoError(t, rows.Scan(&k.target, &k.event, &state))
		out[k] = state
	}
	require.NoError(t, rows.Err())
	return out
}

// storedMentions returns the ids of the kind 9 events stored.
func storedMentions(t *testing.T, pool *pgxpool.Pool) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT encode(id, 'hex') FROM events WHERE kind = 9`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// docs/PROTOCOL.md §15.4, §15.5 across a crash: kill -9 while 8 connections publish
// kind 9 events mentioning registered targets, restart on the same
// database, and check that nothing acknowledged was lost and that
// duplicates come only from rows in flight at the kill.
//
// The rule checked. Let K be the outbox rows in state 'sending' read from
// the database after the kill and before the restart (the dead process's
// claims: one claim turn, so at most 10). Then:
//   - every event that got OK true is in events;
//   - at the kill, for every stored event and each registered target it
//     p-tags, the outbox row exists or the endpoint has already received
//     that (pubkey, event_id) — the rows commit with the event;
//   - after the restart the outbox drains, and every such (pubkey,
//     event_id) was received exactly once, or once or twice if its row is
//     in K; nothing else was received (no unregistered pubkey, no event
//     that is not stored), and every POST was signed by the relay key;
//   - the restarted process logs the worker start line and is ready, and
//     `audit verify` of the deployment community exits 0.
func TestListenerDeliverySurvivesKill(t *testing.T) {
	t.Parallel()
	sk := event.GenerateKey()
	e := newCrashEndpoint(t, event.PubKey(sk))
	listener := eventtest.NewKey()
	const origin = "https://ops.example"
	pool, url := dbtest.NewDB(t)
	env := relayEnv(t)
	// The relay's sessions carry a name of their own, so the test can tell
	// when every one of them has ended after the kill.
	const relaySessions = "buzz_crash_relay"
	env["DATABASE_URL"] = url + "&application_name=" + relaySessions
	env["BUZZ_OPERATOR_LISTENERS"] = listener.PubKey + ":" + e.srv.URL + "/hook"
	env["RELAY_OPERATOR_API_ORIGIN"] = origin
	env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(sk)
	env["SSL_CERT_FILE"] = e.certFile
	p := startReady(t, env)

	targets := make([]string, 20)
	registered := map[string]bool{}
	for i := range targets {
		targets[i] = eventtest.NewKey().PubKey
		registered[targets[i]] = true
	}
	registerTargets(t, p, listener, origin, targets)

	owner := eventtest.NewKey()
	ch := createChannel(t, authedPeer(t, p, "owner", owner), owner)

	okIDs := make(chan string, 100000)
	var sent sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		key := eventtest.NewKey()
		w := dialWS(t, p, deploymentHost)
		w.auth(key, relayTag)
		wg.Go(func() { mentionPublisher(t, w, key, ch, targets, stop, okIDs, &sent) })
	}
	// The kill comes while publishing goes on and deliveries complete:
	// after a few hundred OKs and some notifications received.
	deadline := time.Now().Add(time.Minute)
	for len(okIDs) < 300 || e.received() < 50 {
		select {
		case <-p.done:
			t.Fatal("relay exited")
		case <-time.After(10 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "300 OKs and 50 notifications within a minute (%d, %d)", len(okIDs), e.received())
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	close(stop)
	wg.Wait()
	close(okIDs)
	var accepted []string
	for id := range okIDs {
		accepted = append(accepted, id)
	}
	require.GreaterOrEqual(t, len(accepted), 300)

	// The state the dead process left. The kill closes the relay's
	// sockets, but a backend reads what is already in its socket before it
	// sees the end: one whose COMMIT arrived just before the kill may run
	// it after, and shows 'idle' until it is scheduled. A backend exits once
	// it reads the end, so the database is settled when none of the dead
	// relay's sessions is left.
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, relaySessions).Scan(&left))
		return left == 0
	}, 30*time.Second, 20*time.Millisecond, "every session of the dead relay ended")
	atKill := outboxRows(t, pool)
	inFlight := map[mentionKey]bool{}
	for k, state := range atKill {
		if state == "sending" {
			inFlight[k] = true
		}
	}
	require.LessOrEqual(t, len(inFlight), 10, "one claim turn of at most 10 rows was in flight")
	receivedAtKill, bad := e.counts()
	require.Empty(t, bad)
	stored := storedMentions(t, pool)
	for _, id := range accepted {
		require.True(t, stored[id], "OK-true event %s is stored", id)
	}
	want := map[mentionKey]bool{}
	for id := range stored {
		mine, ok := sent.Load(id)
		require.True(t, ok, "stored event %s was published by the test", id)
		for _, tg := range mine.([]string) {
			k := mentionKey{tg, id}
			want[k] = true
			_, queued := atKill[k]
			require.True(t, queued || receivedAtKill[k] > 0,
				"at the kill, the mention of %s in %s is queued or delivered", tg, id)
		}
	}

	restarted := startReady(t, env)
	// The services start beside the listeners, so the line may follow readiness.
	require.Eventually(t, func() bool {
		for _, rec := range restarted.logRecords() {
			if rec["msg"] == "operator-listener mention delivery worker started" {
				return rec["listeners"] == 1.0
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the restarted process logs the worker start line with listeners=1:\n%s", restarted.Stdout)
	restarted.requireReady()

	// Rows left 'sending' are reclaimed once their 30 s lease expires.
	deadline = time.Now().Add(90 * time.Second)
	for {
		var listenerRows, auditRows int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM operator_listener_outbox), (SELECT count(*) FROM audit_outbox) + (SELECT count(*) FROM audit_intent_groups)`).Scan(&listenerRows, &auditRows))
		if listenerRows == 0 && auditRows == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline),
			"both outboxes drain after the restart (%d listener rows, %d audit rows left): %v", listenerRows, auditRows, outboxRows(t, pool))
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	restarted.stop()

	got, bad := e.counts()
	require.Empty(t, bad)
	duplicates := 0
	var wrong []string
	for k := range want {
		switch n := got[k]; {
		case n == 1:
		case n == 2 && inFlight[k]:
			duplicates++
		default:
			wrong = append(wrong, fmt.Sprintf("%s in %s received %d times (in flight at the kill: %v)", k.target, k.event, n, inFlight[k]))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%d of %d mentions not received exactly once (twice at most if in flight at the kill); first: %v",
			len(wrong), len(want), wrong[:min(len(wrong), 5)])
	}
	for k, n := range got {
		require.True(t, want[k], "received %d× a notification for %s in %s, which is no stored mention of a registered target", n, k.target, k.event)
	}
	require.LessOrEqual(t, duplicates, len(inFlight))
	t.Logf("%d OK-true events, %d stored, %d mentions, %d received before the kill, %d queued at the kill (%d in flight), %d duplicates",
		len(accepted), len(stored), len(want), len(receivedAtKill), len(atKill), len(inFlight), duplicates)

	res := runBinary(t, restarted.Env, "audit", "verify", "--community", deploymentHost)
	require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
}
