package soak

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// The operation types, with their weights in the mix.
var mix = []struct {
	op     string
	weight int
}{
	{"publish-ws", 30},
	{"publish-http", 10},
	{"read-state", 10},
	{"req", 12},
	{"count", 8},
	{"search", 8},
	{"channel-window", 6},
	{"thread-window", 4},
	{"snapshot", 6},
}

// words are the vocabulary of message contents; search asks for them.
var words = []string{"deploy", "rollback", "incident", "latency", "canary", "schema", "migration",
	"backlog", "review", "release", "pager", "quota", "replica", "vacuum", "index", "budget"}

// community is one of the soak's three communities.
type community struct {
	host    string // the Host every request sends, e.g. c0.soak.test
	id      string // communities.id
	channel string // the open channel every worker posts in
}

// ack is one write the relay answered OK true: the ledger's line.
type ack struct {
	ID        string   `json:"id"`
	Host      string   `json:"host"`
	Kind      int      `json:"kind"`
	Via       string   `json:"via"`
	Author    string   `json:"author"`
	CreatedAt int64    `json:"created_at"`
	D         string   `json:"d,omitempty"`
	Mentions  []string `json:"mentions,omitempty"`
	// Duplicate is an OK true whose message starts "duplicate:": nothing
	// was stored by this write (a read-state version already replaced).
	Duplicate bool `json:"duplicate,omitempty"`
	// at is when the ledger recorded the OK (not in the ledger file).
	at time.Time
}

// ledger records every acknowledged write, in memory and as JSON lines.
type ledger struct {
	mu   sync.Mutex
	acks []ack
	w    io.Writer
}

func (l *ledger) add(a ack) {
	b, _ := json.Marshal(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	a.at = time.Now() // under the lock: the acks are in the order of their times
	l.acks = append(l.acks, a)
	if l.w != nil {
		_, _ = l.w.Write(append(b, '\n'))
	}
}

// firstStoredSince is when the ledger recorded its first OK that stored
// something (not a duplicate:) at or after t; false when there is none yet.
func (l *ledger) firstStoredSince(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.acks), func(i int) bool { return !l.acks[i].at.Before(t) })
	for ; i < len(l.acks); i++ {
		if !l.acks[i].Duplicate {
			return l.acks[i].at, true
		}
	}
	return time.Time{}, false
}

func (l *ledger) all() []ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ack(nil), l.acks...)
}

// load is the traffic of one run.
type load struct {
	relays  []*relayProc
	comms   []community
	targets []string // registered listener targets that mentions name
	opWait  time.Duration
	stats   *stats
	ledger  *ledger
	ops     atomic.Int64
	maxOps  int64
	pace    time.Duration // least time between the starts of one connection's operations
}

// worker is one client connection's loop state.
type worker struct {
	l      *load
	n      int
	rng    *rand.Rand
	sk     []byte
	pub    string
	comm   community
	relay  *relayProc
	conn   *client.Conn
	http   *client.HTTP
	roots  []string // own acknowledged top-level messages
	coords []string // read-state d tags, each written again and again
}

// run drives conns workers until ctx ends or maxOps operations were done.
func (l *load) run(ctx context.Context, conns int, seed uint64) {
	var wg sync.WaitGroup
	for i := range conns {
		w := &worker{l: l, n: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), sk: event.GenerateKey(),
			comm: l.comms[i%len(l.comms)], relay: l.relays[(i/len(l.comms))%len(l.relays)]}
		w.pub = event.PubKey(w.sk)
		w.http = &client.HTTP{BaseURL: w.relay.httpURL, Host: w.comm.host, SK: w.sk,
			Client: &http.Client{Timeout: l.opWait}}
		for range 4 {
			w.coords = append(w.coords, "read-state:"+hex.EncodeToString(randomBytes(w.rng, 16)))
		}
		wg.Go(func() { w.loop(ctx) })
	}
	wg.Wait()
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

// loop runs operations until ctx ends or the run's cap is reached,
// reconnecting (with backoff) when the connection is lost.
func (w *worker) loop(ctx context.Context) {
	defer func() {
		if w.conn != nil {
			_ = w.conn.Close()
		}
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil && w.l.ops.Add(1) <= w.l.maxOps {
		if w.conn == nil {
			if err := w.dial(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
		}
		op := w.pick()
		octx, cancel := context.WithTimeout(ctx, w.l.opWait)
		began := time.Now()
		msg, lost := w.do(octx, op)
		took := time.Since(began)
		hung := octx.Err() != nil && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil && msg != "" {
			return // the run ended under this operation: not its failure
		}
		if hung && msg != "" {
			msg = "hang: " + op + " " + msg
		}
		w.l.stats.add(op, began, took, msg)
		if lost && w.conn != nil {
			_ = w.conn.Close()
			w.conn = nil
		}
		if wait := time.Until(began.Add(w.l.pace)); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// dial opens and authenticates the worker's connection.
func (w *worker) dial(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, w.l.opWait)
	defer cancel()
	began := time.Now()
	c, err := client.DialHost(dctx, w.relay.wsURL, w.comm.host, w.sk)
	msg := ""
	if err != nil {
		msg = errText(err)
		if dctx.Err() != nil && ctx.Err() == nil {
			msg = "hang: connect " + msg
		}
	}
	if ctx.Err() == nil {
		w.l.stats.add("connect", began, time.Since(began), msg)
	}
	if err != nil {
		return err
	}
	w.conn = c
	return nil
}

func (w *worker) pick() string {
	total := 0
	for _, m := range mix {
		total += m.weight
	}
	r := w.rng.IntN(total)
	for _, m := range mix {
		if r < m.weight {
			return m.op
		}
		r -= m.weight
	}
	return mix[0].op
}

// do runs one operation. msg is "" on success, else the failure text;
// lost reports that the WebSocket is gone and must be dialled again.
func (w *worker) do(ctx context.Context, op string) (msg string, lost bool) {
	var err error
	switch op {
	case "publish-ws", "publish-http":
		return w.publish(ctx, op)
	case "read-state":
		return w.readState(ctx)
	case "req":
		_, err = w.conn.Query(ctx, event.Filter{Kinds: []int{9}, Tags: map[string][]string{"h": {w.comm.channel}}, Limit: intp(20)})
	case "count":
		_, err = w.conn.Count(ctx, event.Filter{Kinds: []int{9}, Tags: map[string][]string{"h": {w.comm.channel}}})
	case "search":
		q := words[w.rng.IntN(len(words))]
		_, err = w.conn.Query(ctx, event.Filter{Kinds: []int{9}, Search: &q, Limit: intp(10)})
	case "channel-window":
		_, err = w.post(ctx, []map[string]any{{"top_level": true, "#h": []string{w.comm.channel}, "kinds": []int{9}, "limit": 20}}, 39006)
	case "thread-window":
		if len(w.roots) == 0 {
			_, err = w.post(ctx, []map[string]any{{"top_level": true, "#h": []string{w.comm.channel}, "kinds": []int{9}, "limit": 5}}, 39006)
			break
		}
		root := w.roots[w.rng.IntN(len(w.roots))]
		_, err = w.post(ctx, []map[string]any{{"thread_window": true, "#h": []string{w.comm.channel}, "#e": []string{root}, "kinds": []int{9}, "limit": 20}}, 39007)
	case "snapshot":
		_, err = w.post(ctx, []map[string]any{{"kinds": []int{30078}, "authors": []string{w.pub}, "read_state_snapshot": 1}}, 0)
	}
	if err == nil {
		return "", false
	}
	ws := op == "req" || op == "count" || op == "search"
	return errText(err), ws && isLost(err)
}

// isLost reports whether err means the WebSocket connection is gone.
func isLost(err error) bool {
	var refused *client.RefusedError
	return !errors.As(err, &refused)
}

func intp(n int) *int { return &n }

// publish sends a kind 9 in the community's channel: a quarter of them
// mention a listener target, a fifth reply to an earlier message.
func (w *worker) publish(ctx context.Context, op string) (string, bool) {
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindStreamMessage,
		Tags: event.Tags{{"h", w.comm.channel}}}
	var b strings.Builder
	for i := range 8 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[w.rng.IntN(len(words))])
	}
	ev.Content = b.String() + " " + strconv.Itoa(w.n)
	var mentions []string
	if len(w.l.targets) > 0 && w.rng.IntN(4) == 0 {
		t := w.l.targets[w.rng.IntN(len(w.l.targets))]
		ev.Tags = append(ev.Tags, event.Tag{"p", t})
		mentions = append(mentions, t)
	}
	reply := len(w.roots) > 0 && w.rng.IntN(5) == 0
	if reply {
		ev.Tags = append(ev.Tags, event.Tag{"e", w.roots[w.rng.IntN(len(w.roots))], "", "reply"})
	}
	if err := ev.Sign(w.sk); err != nil {
		return "sign: " + err.Error(), false
	}
	var ok bool
	var msg string
	var err error
	if op == "publish-http" {
		ok, msg, err = w.http.Publish(ctx, ev)
	} else {
		ok, msg, err = w.conn.Publish(ctx, ev)
	}
	if err != nil {
		return errText(err), op == "publish-ws" && isLost(err)
	}
	if !ok {
		return msg, false
	}
	w.l.ledger.add(ack{ID: ev.ID, Host: w.comm.host, Kind: ev.Kind, Via: op, Author: w.pub, CreatedAt: ev.CreatedAt,
		Mentions: mentions, Duplicate: strings.HasPrefix(msg, "duplicate:")})
	if !reply && len(w.roots) < 64 {
		w.roots = append(w.roots, ev.ID)
	}
	return "", false
}

// readState publishes a new version of one of the worker's four read-state
// coordinates, dated now: a version of the same second with a higher id
// than the stored one is answered "duplicate:" and not stored, which the
// ledger records.
func (w *worker) readState(ctx context.Context) (string, bool) {
	d := w.coords[w.rng.IntN(len(w.coords))]
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindAppData,
		Tags: event.Tags{{"d", d}, {"t", "read-state"}}, Content: "opaque-" + strconv.Itoa(w.rng.IntN(1_000_000))}
	if err := ev.Sign(w.sk); err != nil {
		return "sign: " + err.Error(), false
	}
	ok, msg, err := w.conn.Publish(ctx, ev)
	if err != nil {
		return errText(err), isLost(err)
	}
	if !ok {
		return msg, false
	}
	w.l.ledger.add(ack{ID: ev.ID, Host: w.comm.host, Kind: ev.Kind, Via: "read-state", Author: w.pub,
		CreatedAt: ev.CreatedAt, D: d, Duplicate: strings.HasPrefix(msg, "duplicate:")})
	return "", false
}

// post sends filters to /query with NIP-98 and checks the answer: an
// array that ends with a bounds event of kind bounds, or, for bounds 0, a
// read-state snapshot object.
func (w *worker) post(ctx context.Context, filters []map[string]any, bounds int) (int, error) {
	body, _ := json.Marshal(filters)
	u := "http://" + w.comm.host + "/query"
	auth, err := client.NIP98Header(w.sk, http.MethodPost, u, body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.relay.httpURL+"/query", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Host = w.comm.host
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("POST /query: %w", errHang)
		}
		return 0, fmt.Errorf("POST /query: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, client.MaxResponseBytes))
	if err != nil {
		return 0, fmt.Errorf("POST /query: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = "HTTP " + strconv.Itoa(resp.StatusCode) + " " + strings.TrimSpace(string(b))
		}
		return 0, &client.RefusedError{Op: "POST /query", Status: resp.StatusCode, Message: e.Error}
	}
	if bounds == 0 {
		var snap struct {
			Complete bool              `json:"complete"`
			Events   []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(b, &snap); err != nil || !snap.Complete {
			return 0, &client.RefusedError{Op: "POST /query", Status: resp.StatusCode, Message: "invalid answer: not a complete snapshot"}
		}
		return len(snap.Events), nil
	}
	var evs []struct {
		Kind int `json:"kind"`
	}
	if err := json.Unmarshal(b, &evs); err != nil || len(evs) == 0 || evs[len(evs)-1].Kind != bounds {
		return 0, &client.RefusedError{Op: "POST /query", Status: resp.StatusCode,
			Message: "invalid answer: no kind " + strconv.Itoa(bounds) + " bounds event last"}
	}
	return len(evs) - 1, nil
}
