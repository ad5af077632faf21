package ingest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/wire"
)

// setupMetered is setup with a pipeline whose metrics the test reads:
// audit on, the group delay given (0: the default).
func setupMetered(t *testing.T, delay time.Duration) (*testBundle, *metrics.Metrics) {
	t.Helper()
	b := setup(t)
	m := metrics.New(prometheus.NewRegistry())
	b.p = New(Config{Pool: b.pool, Live: b.fanout, RelayKey: b.relay.SK, AuditEnabled: true, Metrics: m,
		GroupDelay: delay})
	t.Cleanup(b.p.Close)
	return b, m
}

// groupStats reads the group commit metrics: batches, events in them, and
// batches retried one by one.
func groupStats(t *testing.T, m *metrics.Metrics) (batches uint64, events float64, retries float64) {
	t.Helper()
	var h, c dto.Metric
	require.NoError(t, m.GroupCommitEvents.Write(&h))
	require.NoError(t, m.GroupCommitRetries.Write(&c))
	return h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(), c.GetCounter().GetValue()
}

// submitAll submits every event at once, each from its own goroutine (one
// connection each), and returns the results in order.
func submitAll(b *testBundle, author eventtest.Key, evs []event.Event) []Result {
	out := make([]Result, len(evs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range evs {
		wg.Go(func() {
			<-start
			out[i] = b.p.Submit(context.Background(), b.request(author, evs[i]))
		})
	}
	close(start)
	wg.Wait()
	return out
}

// countRows counts the rows of an event in events and event_mentions, and
// its audit intents.
func countRows(t *testing.T, b *testBundle, id string) [3]int {
	t.Helper()
	var n [3]int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM events WHERE community_id = $1 AND id = decode($2, 'hex')),
		(SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = decode($2, 'hex')),
		(SELECT count(*) FROM audit_outbox WHERE community_id = $1 AND dedupe_key = 'event_created:' || $2)
		+ (SELECT count(*) FROM audit_intent_groups g, unnest(g.object_ids) AS o(id) WHERE g.community_id = $1 AND o.id = $2)`,
		b.tenant.CommunityID, id).Scan(&n[0], &n[1], &n[2]))
	return n
}

// Group commit: concurrent one-statement events commit in groups, and each
// still gets its own answer: accepted once, duplicate: for every other
// copy, with its row, its mention and its audit intent.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	b, m := setupMetered(t, 0)
	owner, mentioned := eventtest.NewKey(), eventtest.NewKey()
	channel := b.channel(t, owner)
	var evs []event.Event
	for i := range 150 {
		ev := owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel),
			eventtest.Tag("p", mentioned.PubKey), eventtest.Content("grouped "+strconv.Itoa(i)))
		evs = append(evs, ev)
		if i%3 == 0 {
			evs = append(evs, ev) // a second copy in flight at the same time
		}
	}
	res := submitAll(b, owner, evs)
	accepted := map[string]int{}
	for i, r := range res {
		switch r.Code {
		case Accepted:
			accepted[evs[i].ID]++
		case Duplicate:
			require.Equal(t, wire.MsgDuplicate, r.Message)
		default:
			t.Fatalf("event %d: %+v", i, r)
		}
	}
	require.Len(t, accepted, 150)
	for id, n := range accepted {
		require.Equal(t, 1, n, "one copy of %s accepted, the other duplicate:", id)
		require.Equal(t, [3]int{1, 1, 1}, countRows(t, b, id), "row, mention and intent of %s", id)
	}
	batches, grouped, retries := groupStats(t, m)
	require.Equal(t, float64(len(evs)), grouped, "every insert went through the group commit")
	require.Less(t, batches, uint64(len(evs)), "some batches held several events")
	require.Zero(t, retries)
}

// buzz_ingest_group_commit_seconds times each group commit from its
// statement to its commit's answer: a commit held 300 ms by a lock on
// events is observed as at least that long, once.
func TestGroupCommitSeconds(t *testing.T) {
	t.Parallel()
	b, m := setupMetered(t, 0)
	owner := eventtest.NewKey()
	channel := b.channel(t, owner)
	seconds := func() (uint64, float64) {
		var h dto.Metric
		require.NoError(t, m.GroupCommitSeconds.Write(&h))
		return h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum()
	}
	n0, sum0 := seconds()
	const held = 300 * time.Millisecond
	release := lockEvents(t, b)
	r := submitLater(b, owner, owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel), eventtest.Content("held")))
	awaitLockWaiters(t, b, 1)
	time.Sleep(held)
	release()
	res := <-r
	require.Equal(t, Accepted, res.Code, "%+v", res)
	// The batch's time is observed as its commit() returns, just after it
	// answered the submitters.
	require.Eventually(t, func() bool { n, _ := seconds(); return n-n0 >= 1 }, 5*time.Second, 5*time.Millisecond)
	n, sum := seconds()
	require.Equal(t, uint64(1), n-n0, "one group commit observed")
	require.GreaterOrEqual(t, sum-sum0, held.Seconds(), "the commit's wait for the lock is in its time")
	batches, _, _ := groupStats(t, m)
	require.Equal(t, batches, n, "one observation per group commit")
}

// One event that fails at commit (here the created_at floor, armed on the
// writer pool as with READ_DATABASE_URL) gets its own refusal; the events
// that shared its batch are retried one by one and stored.
func TestGroupCommitOneBadEvent(t *testing.T) {
	t.Parallel()
	_, url := dbtest.NewDB(t)
	armed, err := pg.Open(context.Background(), url, pg.PoolConfig{MaxConns: 8, CreatedAtFloor: 960 * time.Second})
	require.NoError(t, err)
	t.Cleanup(armed.Close)
	b := setup(t)
	s := store.New(armed)
	c, err := s.CommunityEnsure(context.Background(), "group.test")
	require.NoError(t, err)
	b.pool, b.store, b.tenant.CommunityID, b.tenant.Host = armed, s, c.ID, "group.test"
	m := metrics.New(prometheus.NewRegistry())
	// The pipeline's clock runs 150 s behind the database's (see
	// TestCreatedAtFloor): an event 1000 s old passes the drift check and
	// fails the floor at COMMIT.
	b.p = New(Config{Pool: armed, Live: b.fanout, RelayKey: b.relay.SK, AuditEnabled: true, Metrics: m,
		NowFunc: func() time.Time { return time.Now().Add(-150 * time.Second) }})
	t.Cleanup(b.p.Close)
	owner := eventtest.NewKey()
	channel := b.channel(t, owner)
	refused := Result{Code: Rejected, Message: "invalid: event timestamp too far from server time"}
	// Rounds until a bad event shared a batch with good ones (the first
	// round nearly always does); every round's answers are checked.
	for round := 0; round < 5; round++ {
		var evs []event.Event
		bad := map[string]bool{}
		for i := range 60 {
			opts := []eventtest.Option{eventtest.Channel(channel), eventtest.Content("r" + strconv.Itoa(round) + " " + strconv.Itoa(i))}
			if i%15 == 7 {
				opts = append(opts, eventtest.At(time.Now().Unix()-1000))
			}
			ev := owner.Signed(t, event.KindStreamMessage, opts...)
			if i%15 == 7 {
				bad[ev.ID] = true
			}
			evs = append(evs, ev)
		}
		for i, r := range submitAll(b, owner, evs) {
			id := evs[i].ID
			if bad[id] {
				require.Equal(t, refused, Result{Code: r.Code, Message: r.Message})
				require.Equal(t, [3]int{0, 0, 0}, countRows(t, b, id), "nothing of the refused event is stored")
				continue
			}
			require.Equal(t, Accepted, r.Code, "event %d of round %d: %+v", i, round, r)
			require.Equal(t, [3]int{1, 0, 1}, countRows(t, b, id), "row and intent of %s", id)
		}
		if _, _, retries := groupStats(t, m); retries > 0 {
			return
		}
	}
	t.Fatal("in 5 rounds of 60 concurrent events no refused event shared a batch")
}

// loneBatches reads how many group commits held a single event.
func loneBatches(t *testing.T, m *metrics.Metrics) uint64 {
	t.Helper()
	var h dto.Metric
	require.NoError(t, m.GroupCommitEvents.Write(&h))
	for _, b := range h.GetHistogram().GetBucket() {
		if b.GetUpperBound() == 1 {
			return b.GetCumulativeCount()
		}
	}
	t.Fatal("no bucket for batches of one event")
	return 0
}

// lockEvents holds a SHARE lock on events, which every insert waits for
// and no read does, until the returned function is called.
func lockEvents(t *testing.T, b *testBundle) (release func()) {
	t.Helper()
	return lockTable(t, b, "events")
}

// lockTable holds a SHARE lock on table until the returned function is
// called.
func lockTable(t *testing.T, b *testBundle, table string) (release func()) {
	t.Helper()
	tx, err := b.pool.Begin(context.Background())
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), `LOCK TABLE `+table+` IN SHARE MODE`)
	require.NoError(t, err)
	released := false
	release = func() {
		if !released {
			released = true
			require.NoError(t, tx.Rollback(context.Background()))
		}
	}
	t.Cleanup(release)
	return release
}

// awaitLockWaiters waits until n backends of this database wait for a lock.
func awaitLockWaiters(t *testing.T, b *testBundle, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got))
		return got == n
	}, 10*time.Second, 5*time.Millisecond, "%d inserts waiting for the lock", n)
}

// submitLater submits ev from its own goroutine; the result arrives on the
// returned channel.
func submitLater(b *testBundle, author eventtest.Key, ev event.Event) <-chan Result {
	out := make(chan Result, 1)
	go func() { out <- b.p.Submit(context.Background(), b.request(author, ev)) }()
	return out
}

// Under load no event commits alone (docs/PERFORMANCE.md "Group commit: no
// event alone under load"). The group delay is long here (1 s) so that the
// order of events is the test's, not the machine's: events queued behind
// the batch on its way go together in the next one, however long it takes,
// and a flusher that would commit a single event just after a batch of
// several waits for a second. A lone publisher on an idle relay never
// waits.
func TestGroupCommitNoEventAlone(t *testing.T) {
	t.Parallel()
	const delay = time.Second
	newBundle := func(t *testing.T, delay time.Duration) (*testBundle, *metrics.Metrics, eventtest.Key, func(string) event.Event) {
		b, m := setupMetered(t, delay)
		owner := eventtest.NewKey()
		channel := b.channel(t, owner)
		msg := func(text string) event.Event {
			return owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel), eventtest.Content(text))
		}
		return b, m, owner, msg
	}
	accepted := func(t *testing.T, rs ...<-chan Result) {
		t.Helper()
		for i, r := range rs {
			res := <-r
			require.Equal(t, Accepted, res.Code, "event %d: %+v", i, res)
		}
	}

	t.Run("BehindABatchOnItsWay", func(t *testing.T) {
		t.Parallel()
		b, m, owner, msg := newBundle(t, delay)
		batches0, _, _ := groupStats(t, m)
		lone0 := loneBatches(t, m)
		release := lockEvents(t, b)
		// a starts the flusher at once (nothing else is on its way) and is
		// held by the lock.
		a := submitLater(b, owner, msg("a"))
		awaitLockWaiters(t, b, 1)
		// b queues behind it and stays queued past the delay, until c
		// comes; both wait for a's batch, one batch being in flight.
		bb := submitLater(b, owner, msg("b"))
		time.Sleep(delay + delay/2)
		c := submitLater(b, owner, msg("c"))
		time.Sleep(delay / 2)
		release()
		accepted(t, a, bb, c)
		batches, _, _ := groupStats(t, m)
		require.Equal(t, uint64(2), batches-batches0, "a alone, then b and c together")
		require.Equal(t, uint64(1), loneBatches(t, m)-lone0, "only a, on an idle relay, committed alone")
	})

	t.Run("JustAfterSeveral", func(t *testing.T) {
		t.Parallel()
		b, m, owner, msg := newBundle(t, delay)
		release := lockEvents(t, b)
		a := submitLater(b, owner, msg("a"))
		awaitLockWaiters(t, b, 1)
		// b and c queue together behind a and commit as one batch.
		bb, c := submitLater(b, owner, msg("b")), submitLater(b, owner, msg("c"))
		time.Sleep(delay / 2)
		release()
		accepted(t, a, bb, c)
		batches0, _, _ := groupStats(t, m)
		lone0 := loneBatches(t, m)
		require.Equal(t, uint64(1), lone0, "a alone, b and c together")
		// d comes just after that batch of several committed: its
		// flusher waits for a second event, e, and commits as soon as e
		// comes.
		start := time.Now()
		d := submitLater(b, owner, msg("d"))
		time.Sleep(delay / 2)
		e := submitLater(b, owner, msg("e"))
		accepted(t, d, e)
		require.Less(t, time.Since(start), delay, "the wait ended when e came")
		batches, _, _ := groupStats(t, m)
		require.Equal(t, uint64(1), batches-batches0, "d and e together")
		require.Equal(t, lone0, loneBatches(t, m))
	})

	t.Run("LonePublisherNeverWaits", func(t *testing.T) {
		t.Parallel()
		// A longer delay: a slow machine's commits stay far from it.
		const long = 5 * time.Second
		b, m, owner, msg := newBundle(t, long)
		lone0 := loneBatches(t, m)
		start := time.Now()
		for i := range 3 {
			b.mustSubmit(t, owner, msg("alone "+strconv.Itoa(i)))
		}
		require.Less(t, time.Since(start), long, "three events one after the other, none waited for a second")
		require.Equal(t, uint64(3), loneBatches(t, m)-lone0)
	})
}

// lockIntentGroups holds a SHARE lock on audit_intent_groups, which only
// batches of several events write to (a lone event's intent goes to
// audit_outbox), until the returned function is called.
func lockIntentGroups(t *testing.T, b *testBundle) (release func()) {
	t.Helper()
	return lockTable(t, b, "audit_intent_groups")
}

// awaitQueued waits until n events are queued for the next batch.
func awaitQueued(t *testing.T, b *testBundle, n int) {
	t.Helper()
	g := b.p.group
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == n
	}, 10*time.Second, 5*time.Millisecond, "%d events queued", n)
}

// secondBatches reads buzz_ingest_group_commit_second_batches_total.
func secondBatches(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	var c dto.Metric
	require.NoError(t, m.GroupCommitSecondBatches.Write(&c))
	return c.GetCounter().GetValue()
}

// channelMessages creates a channel of a new owner and n stream messages
// of the owner in it, their contents prefix and their index.
func channelMessages(t *testing.T, b *testBundle, n int, prefix string) (eventtest.Key, []event.Event) {
	t.Helper()
	owner := eventtest.NewKey()
	channel := b.channel(t, owner)
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = owner.Signed(t, event.KindStreamMessage, eventtest.Channel(channel),
			eventtest.Content(prefix+" "+strconv.Itoa(i)))
	}
	return owner, evs
}

// loneThenBatch submits evs[0] alone, held on a pooled connection by a
// lock on events while the rest queue behind it, then releases the lock:
// the rest go as one batch through the pipe. It returns their results'
// channels once the lone event is answered.
func loneThenBatch(t *testing.T, b *testBundle, owner eventtest.Key, evs []event.Event) []<-chan Result {
	t.Helper()
	releaseEvents := lockEvents(t, b)
	lone := submitLater(b, owner, evs[0])
	awaitLockWaiters(t, b, 1)
	var rs []<-chan Result
	for _, ev := range evs[1:] {
		rs = append(rs, submitLater(b, owner, ev))
	}
	awaitQueued(t, b, len(evs)-1)
	releaseEvents()
	require.Equal(t, Accepted, (<-lone).Code)
	return rs
}

// twoBatchesOnTheirWay brings a pipeline to a batch of two events held on
// the server by a lock on audit_intent_groups, with a second batch of four
// sent behind it on the same connection (docs/PERFORMANCE.md "Group
// commit: a second batch on its way"). It returns the six results' channels,
// the events, and the function releasing the lock.
func twoBatchesOnTheirWay(t *testing.T, b *testBundle, m *metrics.Metrics) ([]<-chan Result, []event.Event, func()) {
	t.Helper()
	owner, evs := channelMessages(t, b, 10, "on its way")
	// First with no other lock: the pipe takes its connection and
	// prepares its statement, which waits for every lock on the tables
	// it writes.
	for _, r := range loneThenBatch(t, b, owner, evs[:3]) {
		require.Equal(t, Accepted, (<-r).Code)
	}
	// Then the batch of two waits on the server for the lock on
	// audit_intent_groups, and four more events queued go behind it.
	releaseGroups := lockIntentGroups(t, b)
	rs := loneThenBatch(t, b, owner, evs[3:6])
	awaitLockWaiters(t, b, 1)
	require.Zero(t, secondBatches(t, m))
	for _, ev := range evs[6:] {
		rs = append(rs, submitLater(b, owner, ev))
	}
	require.Eventually(t, func() bool { return secondBatches(t, m) == 1 }, 10*time.Second, 5*time.Millisecond,
		"four events queued went as a second batch")
	time.Sleep(100 * time.Millisecond)
	awaitLockWaiters(t, b, 1) // the second waits behind the first, on its connection
	for i, r := range rs {
		select {
		case res := <-r:
			t.Fatalf("event %d answered before its batch could commit: %+v", i, res)
		default:
		}
	}
	return rs, evs[4:], releaseGroups
}

// A second batch sent behind one on its way commits after it, and every
// event gets its own answer.
func TestGroupCommitSecondBatch(t *testing.T) {
	t.Parallel()
	b, m := setupMetered(t, 0)
	batches0, events0, _ := groupStats(t, m)
	rs, evs, release := twoBatchesOnTheirWay(t, b, m)
	release()
	for i, r := range rs {
		res := <-r
		require.Equal(t, Accepted, res.Code, "event %d: %+v", i, res)
		require.Equal(t, [3]int{1, 0, 1}, countRows(t, b, evs[i].ID), "row and intent of event %d", i)
	}
	batches, events, retries := groupStats(t, m)
	require.Equal(t, uint64(5), batches-batches0, "twice one alone then two, then four")
	require.Equal(t, float64(10), events-events0)
	require.Zero(t, retries)
}

// The writer's connection lost with two batches on their way: both are
// retried event by event, nothing is lost, and what their server had not
// committed is not counted as an ambiguous commit that was stored.
func TestGroupCommitWriterConnectionLost(t *testing.T) {
	t.Parallel()
	b, m := setupMetered(t, 0)
	rs, evs, _ := twoBatchesOnTheirWay(t, b, m)
	var pid int32
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&pid))
	var ok bool
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
	require.True(t, ok)
	// The lock on audit_intent_groups is still held: the events alone
	// write their intents to audit_outbox and commit.
	for i, r := range rs {
		res := <-r
		require.Equal(t, Accepted, res.Code, "event %d: %+v", i, res)
		require.Equal(t, [3]int{1, 0, 1}, countRows(t, b, evs[i].ID), "row and intent of event %d", i)
	}
	_, _, retries := groupStats(t, m)
	require.Equal(t, float64(2), retries, "both batches retried one by one")
	var c dto.Metric
	require.NoError(t, m.AmbiguousCommits.WithLabelValues(outcomeFannedOut).Write(&c))
	require.Zero(t, c.GetCounter().GetValue(), "no batch had committed")
}

// A second batch is no smaller than the one on its way (docs/PERFORMANCE.md
// "Group commit: a second batch as large as the first"): behind a batch of
// six, five queued events wait, and the sixth sends them all.
func TestGroupCommitSecondBatchAsLargeAsTheFirst(t *testing.T) {
	t.Parallel()
	b, m := setupMetered(t, 0)
	owner, evs := channelMessages(t, b, 16, "as large")
	for _, r := range loneThenBatch(t, b, owner, evs[:3]) { // the pipe prepares its statement
		require.Equal(t, Accepted, (<-r).Code)
	}
	// A batch of six waits on the server for the lock on
	// audit_intent_groups.
	releaseGroups := lockIntentGroups(t, b)
	rs := loneThenBatch(t, b, owner, evs[3:10])
	awaitLockWaiters(t, b, 1)
	batches0, events0, _ := groupStats(t, m)
	for _, ev := range evs[10:15] {
		rs = append(rs, submitLater(b, owner, ev))
	}
	awaitQueued(t, b, 5)
	time.Sleep(100 * time.Millisecond)
	require.Zero(t, secondBatches(t, m), "five queued behind six wait")
	rs = append(rs, submitLater(b, owner, evs[15]))
	require.Eventually(t, func() bool { return secondBatches(t, m) == 1 }, 10*time.Second, 5*time.Millisecond,
		"six queued went as a second batch")
	batches, events, _ := groupStats(t, m)
	require.Equal(t, uint64(1), batches-batches0)
	require.Equal(t, float64(6), events-events0, "the second batch holds all six")
	releaseGroups()
	for i, r := range rs {
		require.Equal(t, Accepted, (<-r).Code, "event %d", i)
	}
}
