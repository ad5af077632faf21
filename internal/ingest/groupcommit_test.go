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

// countRows counts the rows of an event in events, event_mentions and
// audit_outbox.
func countRows(t *testing.T, b *testBundle, id string) [3]int {
	t.Helper()
	var n [3]int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM events WHERE community_id = $1 AND id = decode($2, 'hex')),
		(SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = decode($2, 'hex')),
		(SELECT count(*) FROM audit_outbox WHERE community_id = $1 AND dedupe_key = 'event_created:' || $2)`,
		b.tenant.CommunityID, id).Scan(&n[0], &n[1], &n[2]))
	return n
}

// Group commit: concurrent one-statement events commit in groups, and each
// still gets its own answer: accepted once, duplicate: for every other
// copy, with its row, its mention and its audit intent.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := metrics.New(prometheus.NewRegistry())
	b.p = New(Config{Pool: b.pool, Live: b.fanout, RelayKey: b.relay.SK,
		AuditEnabled: true, Metrics: m})
	t.Cleanup(b.p.Close)
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
