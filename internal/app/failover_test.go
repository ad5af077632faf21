package app_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/standbytest"
)

// Writer failover (docs/OPERATIONS.md "High availability"): the relay runs on
// the multi-host DATABASE_URL of a primary and its standby, the primary's
// postmaster is killed with SIGKILL and the standby promoted, as a failover
// manager would. Nothing in the relay is told: its pools find the new
// writer through target_session_attrs=read-write.

// failoverWorld is a relay on a primary/standby pair, a channel to publish
// in and an operator listener registered for one target, so every published
// mention also writes an operator_listener_outbox row (docs/PROTOCOL.md §15.4;
// no listener is configured on this relay, so the rows stay pending).
type failoverWorld struct {
	pair    *standbytest.Pair
	r       *relaytest.Relay
	cid     string
	channel string
	author  eventtest.Key
	target  string
}

func startFailover(t *testing.T, opts standbytest.Options, replica bool) *failoverWorld {
	t.Helper()
	ctx := context.Background()
	pair := standbytest.StartWith(t, opts)
	env := map[string]string{"DATABASE_URL": pair.FailoverURL, "BUZZ_AUDIT_ENABLED": "true"}
	if replica {
		env["READ_DATABASE_URL"] = pair.ReplicaURL
	}
	r := relaytest.Start(t, env)
	c, err := r.App.Store().CommunityByHost(ctx, r.Host)
	require.NoError(t, err)
	w := &failoverWorld{pair: pair, r: r, cid: c.ID, author: eventtest.NewKey(), target: eventtest.NewKey().PubKey}
	w.channel = fixture.Channel(t, r.App.Pool(), c.ID, w.author)
	require.NoError(t, r.App.Store().ListenerRegister(ctx, eventtest.NewKey().PubKey, []string{w.target}))
	return w
}

// dial opens an authenticated client connection as the author.
func (w *failoverWorld) dial(ctx context.Context) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return client.DialHost(ctx, "ws://127.0.0.1:"+strconv.Itoa(w.r.Port)+"/", w.r.Host, w.author.SK)
}

// mention is a kind 9 in the channel that p-tags the listener's target;
// tag makes its id unique.
func (w *failoverWorld) mention(tag string) (event.Event, error) {
	ev := event.Event{Kind: event.KindStreamMessage, CreatedAt: time.Now().Unix(), Content: "failover " + tag,
		Tags: event.Tags{{"h", w.channel}, {"p", w.target}}}
	return ev, ev.Sign(w.author.SK)
}

// ledger is what the publishers were told.
type ledger struct {
	mu      sync.Mutex
	acks    []ack
	refused map[string]int // OK false, by message
	noReply int            // no OK came (timeout, connection lost)
}

// ack is one event answered OK true.
type ack struct {
	id         string
	sent, okAt time.Time
}

func (l *ledger) note(id string, sent time.Time, ok bool, msg string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.noReply++
	case ok:
		l.acks = append(l.acks, ack{id: id, sent: sent, okAt: time.Now()})
	default:
		if l.refused == nil {
			l.refused = map[string]int{}
		}
		l.refused[msg]++
	}
}

// count returns how many acknowledgements were sent after since.
func (l *ledger) count(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.acks {
		if a.sent.After(since) {
			n++
		}
	}
	return n
}

// publishUntil publishes mentions one at a time on its own connection
// until ctx ends, redialling a lost connection.
func (w *failoverWorld) publishUntil(ctx context.Context, name string, l *ledger) {
	var conn *client.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for n := 0; ctx.Err() == nil; n++ {
		if conn == nil {
			c, err := w.dial(ctx)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		ev, err := w.mention(name + "-" + strconv.Itoa(n))
		if err != nil {
			panic(err) // a valid key always signs
		}
		sent := time.Now()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		ok, msg, err := conn.Publish(pctx, ev)
		cancel()
		l.note(ev.ID, sent, ok, msg, err)
		if err != nil {
			conn.Close()
			conn = nil
		}
		if !ok {
			time.Sleep(20 * time.Millisecond) // no hot loop while the writer is away
		}
	}
}

// publishOne publishes one mention and returns its id once answered OK
// true, publishing a new one after each refusal until within passes.
func (w *failoverWorld) publishOne(t *testing.T, tag string, within time.Duration) string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	var last string
	for i := 0; time.Now().Before(deadline); i++ {
		conn, err := w.dial(ctx)
		if err != nil {
			last = err.Error()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		ev, err := w.mention(tag + "-" + strconv.Itoa(i))
		require.NoError(t, err)
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		ok, msg, err := conn.Publish(pctx, ev)
		cancel()
		conn.Close()
		if ok {
			return ev.ID
		}
		last = fmt.Sprintf("%q %v", msg, err)
		time.Sleep(50 * time.Millisecond)
	}
	require.FailNow(t, "no OK true", "within %s; last answer %s", within, last)
	return ""
}

func (w *failoverWorld) readiness(t *testing.T) int {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(w.r.HealthURL + "/_readiness")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// chainDrain bounds the wait for the audit chainer to chain every intent
// on the writer: after errors it backs off per community, up to 30 s
// (internal/audit chainer.go), but one poll (250 ms) after the writer is
// back is the usual case.
const chainDrain = 30 * time.Second

// failoverLoss is what checkAcked found missing on a writer: acknowledged
// events without their row, their event_created audit entry or their
// operator_listener_outbox row, and the audit chain's verification.
type failoverLoss struct {
	Events, AuditEntries, ListenerRows []string
	// OutboxLeft counts audit intents still unchained when the wait ended.
	OutboxLeft int
	// ChainLength is the community's audit chain length; VerifyErr is
	// audit.Verify's error over all of it.
	ChainLength int64
	VerifyErr   error
}

// lost reports whether anything acknowledged is missing or the chain is
// broken.
func (f failoverLoss) lost() bool {
	return len(f.Events)+len(f.AuditEntries)+len(f.ListenerRows) > 0 || f.OutboxLeft > 0 || f.VerifyErr != nil
}

// checkAcked is the one check of both failover cases: it waits (at most
// chainDrain) for the relay's chainer to empty the community's
// audit queues on dbURL, then looks up every acknowledged event there and
// verifies the community's audit chain (docs/PROTOCOL.md §13.6).
func checkAcked(t *testing.T, dbURL, cid string, acked []string) failoverLoss {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chainDrain+30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var f failoverLoss
	deadline := time.Now().Add(chainDrain)
	for {
		require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_outbox WHERE community_id = $1)
			+ (SELECT count(*) FROM audit_intent_groups WHERE community_id = $1)`, cid).Scan(&f.OutboxLeft))
		if f.OutboxLeft == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	raw := make([][]byte, len(acked))
	for i, id := range acked {
		raw[i], err = hex.DecodeString(id)
		require.NoError(t, err)
	}
	missing := func(sql string, arg any) []string {
		rows, err := conn.Query(ctx, sql, cid, arg)
		require.NoError(t, err)
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		have := map[string]bool{}
		for _, id := range found {
			have[id] = true
		}
		var out []string
		for _, id := range acked {
			if !have[id] {
				out = append(out, id)
			}
		}
		return out
	}
	f.Events = missing(`SELECT encode(id, 'hex') FROM events WHERE community_id = $1 AND id = ANY($2::bytea[])`, raw)
	f.AuditEntries = missing(`SELECT object_id FROM audit_log WHERE community_id = $1 AND action = 'event_created'
		AND object_id = ANY($2::text[])`, acked)
	f.ListenerRows = missing(`SELECT encode(event_id, 'hex') FROM operator_listener_outbox WHERE community_id = $1
		AND event_id = ANY($2::bytea[])`, raw)
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM audit_log WHERE community_id = $1`, cid).Scan(&f.ChainLength))
	if _, err := audit.Verify(ctx, conn, audit.VerifyParams{CommunityID: cid, From: 1, To: f.ChainLength}); err != nil {
		f.VerifyErr = err
	}
	return f
}

// chainHead is the community's last audit entry on dbURL.
func chainHead(t *testing.T, dbURL, cid string) (seq int64, hash []byte) {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, dbURL, pg.PoolConfig{MaxConns: 1})
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, pool.QueryRow(ctx, `SELECT seq, hash FROM audit_log WHERE community_id = $1 ORDER BY seq DESC LIMIT 1`, cid).
		Scan(&seq, &hash))
	return seq, hash
}

// A synchronous standby loses nothing: publishers run through the kill of
// the primary and the promotion of the standby; the relay reconnects by
// itself, readiness is 503 while no writer answers and 200 after, every
// event answered OK true is on the new primary with its audit entry and its
// listener outbox row, the audit chain verifying, and the read replica's
// fence (the armed writer pool and the floor trigger) holds there.
func TestFailoverSynchronousStandby(t *testing.T) {
	t.Parallel()
	w := startFailover(t, standbytest.Options{Synchronous: true}, true)
	require.NotNil(t, w.r.App.Replica(), "the fence check passed at start")
	l := &ledger{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { w.publishUntil(ctx, "p"+strconv.Itoa(i), l) })
	}
	defer func() { stop(); wg.Wait() }()
	start := time.Now()
	require.Eventually(t, func() bool { return l.count(start) >= 30 }, 20*time.Second, 5*time.Millisecond, "publishing before the kill")
	require.Equal(t, http.StatusOK, w.readiness(t))

	killed := time.Now()
	w.pair.KillPrimary(t)
	require.Eventually(t, func() bool { return w.readiness(t) == http.StatusServiceUnavailable }, 10*time.Second, 5*time.Millisecond,
		"readiness is 503 while no writer is reachable")
	promoting := time.Now()
	w.pair.Promote(t)
	promoted := time.Now()
	require.Eventually(t, func() bool { return l.count(promoted) >= 30 }, 20*time.Second, 5*time.Millisecond,
		"publishing resumes on the new primary")
	require.Eventually(t, func() bool { return w.readiness(t) == http.StatusOK }, 10*time.Second, 5*time.Millisecond,
		"readiness is 200 once the new primary answers")
	stop()
	wg.Wait()
	later := w.publishOne(t, "later", 5*time.Second)
	// The read replica's fence holds on the new writer: the writer pool's
	// connections there are armed with the created_at floor, whose trigger
	// came across with the data (docs/PROTOCOL.md §16.6).
	require.NoError(t, w.r.App.Replica().Verify(context.Background()), "the fence holds on the new primary")

	l.mu.Lock()
	acks := append([]ack(nil), l.acks...)
	refused := l.refused
	noReply := l.noReply
	l.mu.Unlock()
	// The first OK true on the new primary is the first one after the
	// promotion began: the standby was read-only until then. (Backends of
	// the killed postmaster may still commit for a few milliseconds after
	// the kill, until they notice its death; those OKs come earlier.)
	var firstOK time.Time
	ids := []string{later}
	for _, a := range acks {
		ids = append(ids, a.id)
		if a.okAt.After(promoting) && (firstOK.IsZero() || a.okAt.Before(firstOK)) {
			firstOK = a.okAt
		}
	}
	t.Logf("failover: kill to first OK true on the new primary %s (kill to promotion %s, pg_ctl promote %s, promoted to first OK %s); "+
		"%d acknowledged (%d sent after the kill), refused %v, no answer %d",
		firstOK.Sub(killed).Round(time.Millisecond), promoting.Sub(killed).Round(time.Millisecond),
		promoted.Sub(promoting).Round(time.Millisecond), firstOK.Sub(promoted).Round(time.Millisecond),
		len(ids), l.count(killed), refused, noReply)
	for msg := range refused {
		require.True(t, strings.HasPrefix(msg, "error: "), "a publish while the writer is away is answered error:, not %q", msg)
	}

	loss := checkAcked(t, w.pair.ReplicaURL, w.cid, ids)
	require.False(t, loss.lost(), "nothing acknowledged is lost: %+v", loss)
	require.GreaterOrEqual(t, loss.ChainLength, int64(len(ids)), "every acknowledged event has its chain entry")
}

// An asynchronous standby stopped before the last writes reach it, then
// promoted after the primary's death, does lose them: checkAcked sees
// exactly the events acknowledged while it was stopped as missing, with
// their audit entries and outbox rows, while the chain on the new primary
// still verifies and no longer holds the old head.
func TestFailoverAsynchronousStandbyLoss(t *testing.T) {
	t.Parallel()
	w := startFailover(t, standbytest.Options{}, false)
	var kept, cut []string
	for i := range 10 {
		kept = append(kept, w.publishOne(t, "kept-"+strconv.Itoa(i), 5*time.Second))
	}
	w.pair.WaitReplayed(t)
	w.pair.StopStandby(t)
	for i := range 10 {
		cut = append(cut, w.publishOne(t, "cut-"+strconv.Itoa(i), 5*time.Second))
	}
	old := checkAcked(t, w.pair.WriterURL, w.cid, append(kept, cut...))
	require.False(t, old.lost(), "the old primary holds everything: %+v", old)
	oldSeq, oldHash := chainHead(t, w.pair.WriterURL, w.cid)

	w.pair.KillPrimary(t)
	require.Eventually(t, func() bool { return w.readiness(t) == http.StatusServiceUnavailable }, 10*time.Second, 5*time.Millisecond)
	w.pair.StartStandby(t)
	w.pair.Promote(t)
	after := w.publishOne(t, "after", 20*time.Second)
	require.Eventually(t, func() bool { return w.readiness(t) == http.StatusOK }, 10*time.Second, 5*time.Millisecond)

	loss := checkAcked(t, w.pair.ReplicaURL, w.cid, append(append(append([]string(nil), kept...), cut...), after))
	require.True(t, loss.lost(), "the check sees the loss")
	sort.Strings(cut)
	for _, got := range [][]string{loss.Events, loss.AuditEntries, loss.ListenerRows} {
		sort.Strings(got)
		require.Equal(t, cut, got, "exactly the writes the standby never received are missing")
	}
	require.NoError(t, loss.VerifyErr, "the shorter chain is still a valid chain")
	require.Zero(t, loss.OutboxLeft, "the chainer resumed on the new primary")
	seq, _ := chainHead(t, w.pair.ReplicaURL, w.cid)
	conn, err := pgx.Connect(context.Background(), w.pair.ReplicaURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var same int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE community_id = $1 AND seq = $2 AND hash = $3`,
		w.cid, oldSeq, oldHash).Scan(&same))
	require.Zero(t, same, "a checkpoint of the old head (seq %d) names an entry the new primary does not hold", oldSeq)
	t.Logf("async failover: %d acknowledged events lost; old head seq %d, new head seq %d", len(loss.Events), oldSeq, seq)
}
