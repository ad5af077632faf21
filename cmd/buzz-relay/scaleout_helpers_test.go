package main

// Helpers of the multi-process tests (scaleout_test.go, docs/PROTOCOL.md §16): two
// real `buzz-relay serve` processes on one database, one relay key and one
// real redis-server, WebSocket clients that read all the time, and
// readers of /metrics and the processes' logs.

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/redistest"
)

// Bounds of the scale-out checks. The documented figures are upper bounds for
// correctness; the tests wait a few times longer before they fail.
const (
	// deliveryWait is how long a cross-process delivery, cache drop or
	// eviction may take (docs/OPERATIONS.md says within a second).
	deliveryWait = 3 * time.Second
	// reconnectWait is how long both processes may take to show
	// buzz_pubsub_connected 1 after Redis returns (retries at most 30 s apart, docs/PROTOCOL.md §16.3).
	reconnectWait = 35 * time.Second
	// frameWait bounds any other wait for a frame the relay owes.
	frameWait = 10 * time.Second
)

// deploymentHost is the deployment community of the default RELAY_URL,
// which both processes serve; relayTag is the AUTH relay tag it expects.
const (
	deploymentHost = "localhost:3000"
	relayTag       = "ws://localhost:3000"
)

// scaleOut is a running two-process deployment: A and B share the
// database, the relay key and Redis, and listen on ports of their own.
type scaleOut struct {
	t     *testing.T
	redis *redistest.Server
	a, b  *relayProc
	// community is the deployment community's id.
	community string
	// relayPub is the public key of the shared BUZZ_RELAY_PRIVATE_KEY.
	relayPub string
}

// startScaleOut starts a redis-server, then A and B on one fresh database,
// and returns once both are ready and connected to Redis. extra is added
// to both environments.
func startScaleOut(t *testing.T, extra map[string]string) *scaleOut {
	t.Helper()
	rs := redistest.Start(t)
	sk := event.GenerateKey()
	envA := externalEnv(t)
	envB := relayEnv(t)
	for _, env := range []map[string]string{envA, envB} {
		env["DATABASE_URL"] = envA["DATABASE_URL"]
		env["BUZZ_RELAY_PRIVATE_KEY"] = hex.EncodeToString(sk)
		env["REDIS_URL"] = rs.URL()
		for k, v := range extra {
			env[k] = v
		}
	}
	s := &scaleOut{t: t, redis: rs, relayPub: event.PubKey(sk)}
	// A first: it creates the deployment community B then finds.
	s.a = startReady(t, envA)
	s.b = startReady(t, envB)
	s.community = communityOf(t, envA, deploymentHost)
	for _, p := range s.both() {
		p.waitMetric("buzz_pubsub_connected", reconnectWait, func(v float64) bool { return v == 1 })
	}
	return s
}

// both returns A and B.
func (s *scaleOut) both() []*relayProc { return []*relayProc{s.a, s.b} }

// communityOf returns the id of the community serving host, from
// `buzz-relay community list` on env's database.
func communityOf(t *testing.T, env map[string]string, host string) string {
	t.Helper()
	cli := baseEnv()
	cli["DATABASE_URL"] = env["DATABASE_URL"]
	res := runBinary(t, cli, "community", "list")
	require.Equal(t, 0, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	for _, line := range res.lines(t) {
		if line["host"] == host {
			return line["community_id"].(string)
		}
	}
	t.Fatalf("no community for %s:\n%s", host, res.Stdout)
	return ""
}

// processID returns the process_id the relay logged at start.
func (p *relayProc) processID() string {
	p.t.Helper()
	for _, rec := range p.logRecords() {
		if rec["msg"] == "process started" {
			if id, ok := rec["process_id"].(string); ok {
				return id
			}
		}
	}
	p.t.Fatalf("no process_id logged:\n%s", p.Stdout)
	return ""
}

// metricsURL is the relay's Prometheus endpoint.
func (p *relayProc) metricsURL() string {
	return "http://127.0.0.1:" + p.Env["BUZZ_METRICS_PORT"] + "/metrics"
}

// metric returns the sum of every sample of the metric name (all label
// sets), 0 when it has none.
func (p *relayProc) metric(name string) float64 {
	p.t.Helper()
	code, body, err := httpGet(p.metricsURL())
	require.NoError(p.t, err)
	require.Equal(p.t, http.StatusOK, code)
	return sumSamples(p.t, body, name)
}

// sumSamples adds up the samples of name in a Prometheus text exposition.
func sumSamples(t *testing.T, body, name string) float64 {
	t.Helper()
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series := line[:strings.IndexAny(line, "{ ")]
		if series != name {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, "metric line %q", line)
		sum += v
	}
	return sum
}

// waitMetric polls the metric until ok accepts it, failing after d.
func (p *relayProc) waitMetric(name string, d time.Duration, ok func(float64) bool) float64 {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := p.metric(name)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s on %s is still %v after %s", name, p.AppAddr, v, d)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

// status returns /_status as a JSON object.
func (p *relayProc) status() map[string]any {
	p.t.Helper()
	code, body, err := httpGet(p.HealthURL + "/_status")
	require.NoError(p.t, err)
	require.Equal(p.t, http.StatusOK, code, body)
	var m map[string]any
	require.NoError(p.t, json.Unmarshal([]byte(body), &m), body)
	return m
}

// requireReady requires /_readiness to answer 200.
func (p *relayProc) requireReady() {
	p.t.Helper()
	code, body, err := httpGet(p.HealthURL + "/_readiness")
	require.NoError(p.t, err)
	require.Equal(p.t, http.StatusOK, code, "readiness of %s: %s", p.AppAddr, body)
}

// peer is a WebSocket client of one relay process. A goroutine reads its
// frames all the time, so the relay's pings are answered while the test
// waits on something else; the test takes the frames from a queue.
type peer struct {
	t         *testing.T
	name      string
	relay     string // the relay tag of AUTH: ws:// and the host dialled
	c         *websocket.Conn
	challenge string
	frames    chan []any
	done      chan struct{}
	// err is the read error that ended the reader; set before done closes.
	err error
	// stash holds frames set aside by take, publish and subscribe, in
	// arrival order, ahead of the queue.
	mu    sync.Mutex
	stash [][]any
}

// peerQueue bounds the frames a peer holds unread; a test that lets more
// pile up is broken, and the reader then stops answering pings.
const peerQueue = 4096

// dialPeer connects to p with the deployment host and reads the AUTH
// challenge. The connection is closed, and its reader waited for, when
// the test ends.
func dialPeer(t *testing.T, p *relayProc, name string) *peer {
	t.Helper()
	return dialPeerHost(t, p, name, deploymentHost)
}

// dialPeerHost is dialPeer with the Host header of another community.
func dialPeerHost(t *testing.T, p *relayProc, name, host string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+p.AppAddr+"/", &websocket.DialOptions{
		Host: host, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	require.NoError(t, err, "dial %s (%s): %v", name, p.AppAddr, resp)
	c.SetReadLimit(4 << 20)
	w := &peer{t: t, name: name, relay: "ws://" + host, c: c, frames: make(chan []any, peerQueue), done: make(chan struct{})}
	go w.read()
	t.Cleanup(w.close)
	msg := w.next(frameWait)
	require.Equal(t, "AUTH", msg[0], "%s: first frame %v", name, msg)
	w.challenge = msg[1].(string)
	return w
}

// authedPeer is dialPeer then AUTH as key.
func authedPeer(t *testing.T, p *relayProc, name string, key eventtest.Key) *peer {
	t.Helper()
	w := dialPeer(t, p, name)
	w.auth(key)
	return w
}

func (w *peer) read() {
	defer close(w.done)
	defer close(w.frames)
	for {
		_, b, err := w.c.Read(context.Background())
		if err != nil {
			w.err = err
			return
		}
		var msg []any
		if err := json.Unmarshal(b, &msg); err != nil {
			w.err = err
			return
		}
		w.frames <- msg
	}
}

// close ends the connection and waits for the reader.
func (w *peer) close() {
	_ = w.c.CloseNow()
	<-w.done
}

func (w *peer) send(parts ...any) {
	w.t.Helper()
	b, err := json.Marshal(parts)
	require.NoError(w.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(w.t, w.c.Write(ctx, websocket.MessageText, b), "%s: write", w.name)
}

// tryNext returns the next frame in arrival order, or false when none
// came within d. It fails the test when the connection has ended.
func (w *peer) tryNext(d time.Duration) ([]any, bool) {
	w.t.Helper()
	w.mu.Lock()
	if len(w.stash) > 0 {
		f := w.stash[0]
		w.stash = w.stash[1:]
		w.mu.Unlock()
		return f, true
	}
	w.mu.Unlock()
	received := func(f []any, ok bool) ([]any, bool) {
		if !ok {
			w.t.Fatalf("%s: connection ended: %v", w.name, w.err)
		}
		return f, true
	}
	select { // a frame already queued wins over an expired timer
	case f, ok := <-w.frames:
		return received(f, ok)
	default:
	}
	if d <= 0 {
		return nil, false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case f, ok := <-w.frames:
		return received(f, ok)
	case <-timer.C:
		return nil, false
	}
}

// next is tryNext that fails after d.
func (w *peer) next(d time.Duration) []any {
	w.t.Helper()
	f, ok := w.tryNext(d)
	if !ok {
		w.t.Fatalf("%s: no frame within %s", w.name, d)
	}
	return f
}

// expect reads frames in arrival order until match accepts one, and
// returns it and every frame read before it. It fails after d.
func (w *peer) expect(d time.Duration, what string, match func([]any) bool) (got []any, before [][]any) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for {
		f, ok := w.tryNext(time.Until(deadline))
		if !ok {
			w.t.Fatalf("%s: %s not received within %s; read meanwhile: %v", w.name, what, d, before)
		}
		if match(f) {
			return f, before
		}
		before = append(before, f)
	}
}

// take returns the first frame match accepts, from the set-aside frames or
// the queue; every other frame it reads is set aside for later reads, in
// order. It fails after d.
func (w *peer) take(d time.Duration, what string, match func([]any) bool) []any {
	w.t.Helper()
	w.mu.Lock()
	for i, f := range w.stash {
		if match(f) {
			w.stash = slices.Delete(w.stash, i, i+1)
			w.mu.Unlock()
			return f
		}
	}
	w.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-w.frames:
			if !ok {
				w.t.Fatalf("%s: connection ended waiting for %s: %v", w.name, what, w.err)
			}
			if match(f) {
				return f
			}
			w.mu.Lock()
			w.stash = append(w.stash, f)
			w.mu.Unlock()
		case <-timer.C:
			w.t.Fatalf("%s: %s not received within %s", w.name, what, d)
		}
	}
}

// setAside returns and forgets the frames take, publish and req have set
// aside so far.
func (w *peer) setAside() [][]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.stash
	w.stash = nil
	return out
}

// auth answers the challenge as key and requires OK true.
func (w *peer) auth(key eventtest.Key) {
	w.t.Helper()
	ev := key.Signed(w.t, event.KindAuth, eventtest.Content(""),
		eventtest.Tag("challenge", w.challenge), eventtest.Tag("relay", w.relay))
	require.True(w.t, w.publishFrame("AUTH", ev))
}

// publish sends ev and returns its OK; other frames are set aside.
func (w *peer) publish(ev event.Event) (bool, string) {
	w.t.Helper()
	w.send("EVENT", ev)
	f := w.take(frameWait, "OK for "+ev.ID, isOK(ev.ID))
	return f[2].(bool), f[3].(string)
}

// publishFrame sends [verb, ev] and requires OK true for it.
func (w *peer) publishFrame(verb string, ev event.Event) bool {
	w.t.Helper()
	w.send(verb, ev)
	f := w.take(frameWait, "OK for "+ev.ID, isOK(ev.ID))
	require.Equal(w.t, true, f[2], "%s: %s kind %d refused: %v", w.name, verb, ev.Kind, f)
	return true
}

// mustPublish publishes ev and requires OK true.
func (w *peer) mustPublish(ev event.Event) {
	w.t.Helper()
	ok, msg := w.publish(ev)
	require.True(w.t, ok, "%s: kind %d refused: %s", w.name, ev.Kind, msg)
}

// req sends a REQ and returns its history, or the reason it was closed
// with before EOSE. Frames of other subscriptions are set aside.
func (w *peer) req(sub string, filters ...any) (history []event.Event, closed string) {
	w.t.Helper()
	w.send(append([]any{"REQ", sub}, filters...)...)
	for {
		f := w.take(frameWait, "EOSE of "+sub, func(f []any) bool { return len(f) >= 2 && f[1] == sub })
		switch f[0] {
		case "EVENT":
			history = append(history, frameEvent(w.t, f))
		case "EOSE":
			return history, ""
		case "CLOSED":
			return history, f[2].(string)
		default:
			w.t.Fatalf("%s: unexpected frame for %s: %v", w.name, sub, f)
		}
	}
}

// subscribe is req that requires EOSE.
func (w *peer) subscribe(sub string, filters ...any) []event.Event {
	w.t.Helper()
	history, closed := w.req(sub, filters...)
	require.Empty(w.t, closed, "%s: REQ %s closed", w.name, sub)
	return history
}

// isOK matches ["OK", id, …].
func isOK(id string) func([]any) bool {
	return func(f []any) bool { return len(f) == 4 && f[0] == "OK" && f[1] == id }
}

// isEvent matches ["EVENT", sub, {"id": id …}].
func isEvent(sub, id string) func([]any) bool {
	return func(f []any) bool { return eventID(f, sub) == id }
}

// isFrame matches a frame equal to want.
func isFrame(want ...any) func([]any) bool {
	return func(f []any) bool { return slices.Equal(f, want) }
}

// eventID is the id of an ["EVENT", sub, ev] frame, "" for any other.
func eventID(f []any, sub string) string {
	if len(f) != 3 || f[0] != "EVENT" || f[1] != sub {
		return ""
	}
	ev, ok := f[2].(map[string]any)
	if !ok {
		return ""
	}
	id, _ := ev["id"].(string)
	return id
}

// frameEvent decodes the event of an ["EVENT", sub, ev] frame.
func frameEvent(t *testing.T, f []any) event.Event {
	t.Helper()
	require.Len(t, f, 3, "%v", f)
	b, err := json.Marshal(f[2])
	require.NoError(t, err)
	ev, err := event.Parse(b)
	require.NoError(t, err, "%s", b)
	return ev
}

// idsOf lists the ids of evs.
func idsOf(evs []event.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

// Events the checks publish.

// nonce gives a command a random content, so that two identical commands
// signed in the same second are still two events.
func nonce() eventtest.Option { return eventtest.Content("n-" + uuid.NewString()[:8]) }

// createChannel creates a channel through w (authenticated as owner) and
// returns its id; opts add tags to the 9007.
func createChannel(t *testing.T, w *peer, owner eventtest.Key, opts ...eventtest.Option) string {
	t.Helper()
	id := uuid.NewString()
	base := []eventtest.Option{nonce(), eventtest.Channel(id), eventtest.Tag("name", "c-"+id[:8])}
	w.mustPublish(owner.Signed(t, 9007, append(base, opts...)...))
	return id
}

// private is the option of a private 9007.
var private = eventtest.Tag("visibility", "private")

// addMember is a 9000 by actor adding target to ch.
func addMember(t *testing.T, actor eventtest.Key, ch, target string) event.Event {
	t.Helper()
	return actor.Signed(t, 9000, nonce(), eventtest.Channel(ch), eventtest.Tag("p", target))
}

// removeMember is a 9001 by actor removing target from ch.
func removeMember(t *testing.T, actor eventtest.Key, ch, target string) event.Event {
	t.Helper()
	return actor.Signed(t, 9001, nonce(), eventtest.Channel(ch), eventtest.Tag("p", target))
}

// message is a kind 9 in ch.
func message(t *testing.T, author eventtest.Key, ch, content string) event.Event {
	t.Helper()
	return author.Signed(t, 9, eventtest.Content(content), eventtest.Channel(ch))
}

// channelFilter is {"#h":[ch],"kinds":[9]}.
func channelFilter(ch string) map[string]any {
	return map[string]any{"#h": []string{ch}, "kinds": []int{9}}
}
