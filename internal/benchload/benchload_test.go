package benchload

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	cfg       Config
	community string
	channel   string
	key       eventtest.Key
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	key := eventtest.NewKey()
	cm := fixture.Community(t, pool)
	ch := fixture.Channel(t, pool, cm.ID, key)
	return &testBundle{community: cm.ID, channel: ch, key: key, cfg: Config{Pool: pool, Store: store.New(pool), Signers: 2,
		SignFunc: func(ev *event.Event) error { return ev.Sign(key.SK) }}}
}

// events returns n unsigned channel messages in batches of size: event i
// mentions i%3 distinct pubkeys and is deleted when deleted(i).
func (b *testBundle) events(n, size int, deleted func(int) bool) [][]Event {
	var out [][]Event
	for i := range n {
		if i%size == 0 {
			out = append(out, nil)
		}
		ev := &event.Event{PubKey: b.key.PubKey, CreatedAt: time.Now().Unix() - int64(n-i), Kind: event.KindStreamMessage,
			Tags: event.Tags{{"h", b.channel}}, Content: "message " + strconv.Itoa(i)}
		for m := range i % 3 {
			ev.Tags = append(ev.Tags, event.Tag{"p", eventtest.NewKey().PubKey})
			if m == 0 {
				ev.Tags = append(ev.Tags, ev.Tags[len(ev.Tags)-1]) // a repeated p tag is one mention
			}
		}
		ev.ID = ev.ComputeID()
		out[len(out)-1] = append(out[len(out)-1], Event{
			EventInsertParams: store.EventInsertParams{CommunityID: b.community, Event: ev, Channel: b.channel},
			Deleted:           deleted != nil && deleted(i)})
	}
	return out
}

// feed sends batches on a channel as a generator does and reports when it
// has sent them all.
func feed(batches [][]Event) (<-chan []Event, <-chan struct{}) {
	in, sent := make(chan []Event), make(chan struct{})
	go func() {
		defer close(sent)
		defer close(in)
		for _, b := range batches {
			in <- b
		}
	}()
	return in, sent
}

func (b *testBundle) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, b.cfg.Pool.QueryRow(t.Context(), sql, b.community).Scan(&n))
	return n
}

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("StoresThroughTheBatchInsert", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var calls atomic.Int64
		b.cfg.ProgressEvery = time.Millisecond
		b.cfg.ProgressFunc = func(int64) { calls.Add(1) }
		batches := b.events(250, 100, func(i int) bool { return i%10 == 0 })
		in, sent := feed(batches)
		res, err := Load(t.Context(), b.cfg, in)
		require.NoError(t, err)
		<-sent
		require.Equal(t, Result{Events: 250, Mentions: 249, Deleted: 25}, res)
		require.Equal(t, 250, b.count(t, `SELECT count(*) FROM events WHERE community_id = $1`))
		require.Equal(t, 25, b.count(t, `SELECT count(*) FROM events WHERE community_id = $1 AND deleted_at IS NOT NULL`))
		require.Equal(t, 249, b.count(t, `SELECT count(*) FROM event_mentions WHERE community_id = $1`),
			"the mentions ingest writes: one per distinct p tag")
		require.Positive(t, calls.Load(), "progress was reported")
		var bad int
		require.NoError(t, b.cfg.Pool.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE community_id = $1
			AND (sig IS NULL OR length(sig) <> 64)`, b.community).Scan(&bad))
		require.Zero(t, bad, "every event is stored with its signature")
	})

	t.Run("StoredEventsAreNotCounted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batches := b.events(30, 10, nil)
		in, _ := feed(batches[:1])
		_, err := Load(t.Context(), b.cfg, in)
		require.NoError(t, err)
		in, _ = feed(batches)
		res, err := Load(t.Context(), b.cfg, in)
		require.NoError(t, err)
		require.EqualValues(t, 20, res.Events, "the first batch was already stored")
		require.Equal(t, 30, b.count(t, `SELECT count(*) FROM events WHERE community_id = $1`))
	})

	t.Run("SignErrorDrainsTheGenerator", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var signed atomic.Int64
		b.cfg.SignFunc = func(ev *event.Event) error {
			if signed.Add(1) > 15 {
				return errors.New("no key")
			}
			return ev.Sign(b.key.SK)
		}
		in, sent := feed(b.events(200, 10, nil))
		_, err := Load(t.Context(), b.cfg, in)
		require.ErrorContains(t, err, "no key")
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Fatal("the generator is blocked: Load did not drain its channel")
		}
	})

	t.Run("StoreErrorStopsTheLoad", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		batches := b.events(40, 10, nil)
		batches[1][3].Event.ID = "not hex"
		b.cfg.SignFunc = func(*event.Event) error { return nil }
		in, sent := feed(batches)
		_, err := Load(t.Context(), b.cfg, in)
		require.ErrorContains(t, err, "store 10 events")
		<-sent
	})
}
