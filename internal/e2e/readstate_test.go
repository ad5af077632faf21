package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/dbtest"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/logtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// docs/PROTOCOL.md §14 over real sockets against a real PostgreSQL: the
// runtime write path of NIP-RS read state (docs/PROTOCOL.md §14.2) and the
// read conformance it relies on (docs/PROTOCOL.md §14.5). The database rules alone are tested in internal/pg.

// rsBundle is a relay, its deployment community and one user.
type rsBundle struct {
	r    *relaytest.Relay
	cid  string
	user eventtest.Key
	w    *relaytest.WS
}

func setupRS(t *testing.T) *rsBundle {
	t.Helper()
	r := relaytest.Start(t, nil)
	b := &rsBundle{r: r, cid: communityID(t, r, r.Host), user: eventtest.NewKey()}
	b.w = r.Dial(t, "")
	b.w.Auth(b.user)
	return b
}

// newSlot returns a fresh read-state d value.
func newSlot() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return "read-state:" + hex.EncodeToString(b[:])
}

// rsEvent is a conforming read-state event of key at slot d, created at ts.
func rsEvent(t *testing.T, key eventtest.Key, d string, ts int64, opts ...eventtest.Option) event.Event {
	t.Helper()
	base := []eventtest.Option{eventtest.Tag("d", d), eventtest.Tag("t", "read-state"), eventtest.At(ts),
		eventtest.Content("nip44-" + strconv.Itoa(rand.IntN(1<<30)))}
	return key.Signed(t, event.KindAppData, append(base, opts...)...)
}

// coordRow is one events row of a coordinate.
type coordRow struct {
	id      string
	ts      int64
	deleted bool
}

// rows returns every events row at (kind, pubkey, d) in the community,
// deleted ones included.
func (b *rsBundle) rows(t *testing.T, kind int, pubkey, d string) []coordRow {
	t.Helper()
	pub, _ := hex.DecodeString(pubkey)
	rs, err := b.r.App.Pool().Query(context.Background(), `SELECT id, created_at, deleted_at IS NOT NULL FROM events
		WHERE community_id = $1 AND kind = $2 AND pubkey = $3 AND d_tag = $4 ORDER BY created_at, id`, b.cid, kind, pub, d)
	require.NoError(t, err)
	var out []coordRow
	for rs.Next() {
		var (
			id []byte
			ts time.Time
			r  coordRow
		)
		require.NoError(t, rs.Scan(&id, &ts, &r.deleted))
		r.id, r.ts = hex.EncodeToString(id), ts.Unix()
		out = append(out, r)
	}
	require.NoError(t, rs.Err())
	return out
}

// watermark returns the coordinate's watermark, or ok false.
func (b *rsBundle) watermark(t *testing.T, pubkey, d string) (id string, ts int64, ok bool) {
	t.Helper()
	pub, _ := hex.DecodeString(pubkey)
	var (
		eid []byte
		at  time.Time
	)
	err := b.r.App.Pool().QueryRow(context.Background(), `SELECT event_id, created_at FROM parameterized_event_watermarks
		WHERE community_id = $1 AND kind = 30078 AND pubkey = $2 AND d_tag = $3`, b.cid, pub, d).Scan(&eid, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false
	}
	require.NoError(t, err)
	return hex.EncodeToString(eid), at.Unix(), true
}

// mentions counts the event_mentions rows of an event id.
func (b *rsBundle) mentions(t *testing.T, id string) int {
	t.Helper()
	eid, _ := hex.DecodeString(id)
	var n int
	require.NoError(t, b.r.App.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM event_mentions WHERE community_id = $1 AND event_id = $2`, b.cid, eid).Scan(&n))
	return n
}

// notStored requires the relay's answer for a read-state event that loses:
// OK true "duplicate:".
func notStored(t *testing.T, w *relaytest.WS, ev event.Event, why string) {
	t.Helper()
	ok, msg := w.Publish(ev)
	require.True(t, ok, why)
	require.Equal(t, "duplicate:", msg, why)
}

// Checks 1 and 2: a newer version replaces the head physically and
// advances the watermark; a same-second competitor wins with a lower id
// and loses with a higher one.
func TestReadStateReplacement(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	d := newSlot()
	now := time.Now().Unix()
	first := rsEvent(t, b.user, d, now-10)
	b.w.MustPublish(first)
	second := rsEvent(t, b.user, d, now-9)
	b.w.MustPublish(second)
	require.Equal(t, []coordRow{{id: second.ID, ts: now - 9}}, b.rows(t, 30078, b.user.PubKey, d), "one row")
	id, ts, ok := b.watermark(t, b.user.PubKey, d)
	require.True(t, ok)
	require.Equal(t, [2]any{second.ID, now - 9}, [2]any{id, ts})
	require.Equal(t, 1.0, b.r.Metric(t, "buzz_read_state_payloads_deleted_total"))

	// The same second; make one competitor with a lower and one
	// with a higher id than the head.
	var lower, higher *event.Event
	for lower == nil || higher == nil {
		ev := rsEvent(t, b.user, d, now-9)
		switch {
		case ev.ID < second.ID && lower == nil:
			lower = &ev
		case ev.ID > second.ID && higher == nil:
			higher = &ev
		}
	}
	notStored(t, b.w, *higher, "a higher id in the same second loses")
	require.Equal(t, []coordRow{{id: second.ID, ts: now - 9}}, b.rows(t, 30078, b.user.PubKey, d))
	id, _, _ = b.watermark(t, b.user.PubKey, d)
	require.Equal(t, second.ID, id, "the watermark did not move")
	b.w.MustPublish(*lower)
	require.Equal(t, []coordRow{{id: lower.ID, ts: now - 9}}, b.rows(t, 30078, b.user.PubKey, d), "a lower id wins")
	id, _, _ = b.watermark(t, b.user.PubKey, d)
	require.Equal(t, lower.ID, id)

	notStored(t, b.w, second, "the version it replaced")
	notStored(t, b.w, *lower, "the exact head again")
	require.Equal(t, 3.0, b.r.Metric(t, `buzz_read_state_writes_total{outcome="inserted"}`))
	require.Equal(t, 2.0, b.r.Metric(t, `buzz_read_state_writes_total{outcome="dominated"}`))
	require.Equal(t, 1.0, b.r.Metric(t, `buzz_read_state_writes_total{outcome="duplicate"}`))
	require.Equal(t, 0.0, b.r.Metric(t, "buzz_read_state_fence_errors_total"))

	// POST /events gives the same outcomes.
	status, body := b.r.PostEvent(t, "", b.user, second)
	require.Equal(t, http.StatusOK, status, body)
	require.JSONEq(t, `{"event_id":"`+second.ID+`","accepted":true,"message":"duplicate:"}`, body)
	third := rsEvent(t, b.user, d, now-5)
	status, body = b.r.PostEvent(t, "", b.user, third)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []coordRow{{id: third.ID, ts: now - 5}}, b.rows(t, 30078, b.user.PubKey, d))
}

// A NIP-09 deletion of the head removes the row and its mention
// rows physically; the watermark stays, so neither the deleted version nor
// an older one comes back.
func TestReadStateDeletion(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	d := newSlot()
	now := time.Now().Unix()
	old := rsEvent(t, b.user, d, now-20)
	b.w.MustPublish(old)
	head := rsEvent(t, b.user, d, now-10, eventtest.Tag("p", eventtest.NewKey().PubKey))
	b.w.MustPublish(head)
	require.Equal(t, 1, b.mentions(t, head.ID), "a live read-state event keeps its mention rows")
	b.w.MustPublish(b.user.Signed(t, event.KindDeletion, eventtest.Tag("e", head.ID), eventtest.Tag("k", "30078")))
	require.Empty(t, b.rows(t, 30078, b.user.PubKey, d), "physically gone")
	require.Zero(t, b.mentions(t, head.ID), "its mention rows too")
	id, _, ok := b.watermark(t, b.user.PubKey, d)
	require.True(t, ok)
	require.Equal(t, head.ID, id, "the watermark outlives the payload")
	notStored(t, b.w, head, "the deleted version")
	notStored(t, b.w, old, "an older version")
	notStored(t, b.w, rsEvent(t, b.user, d, now-15), "a version between")
	require.Empty(t, b.rows(t, 30078, b.user.PubKey, d))
	// The relay's own watermark check decided, not the database trigger.
	require.Equal(t, 2.0, b.r.Metric(t, `buzz_read_state_writes_total{outcome="dominated"}`))
	require.Equal(t, 1.0, b.r.Metric(t, `buzz_read_state_writes_total{outcome="duplicate"}`), "the deleted version's exact tuple")
	require.Equal(t, 0.0, b.r.Metric(t, `buzz_read_state_writes_total{outcome="stale_db"}`))
	newer := rsEvent(t, b.user, d, now-1)
	b.w.MustPublish(newer)
	require.Equal(t, []coordRow{{id: newer.ID, ts: now - 1}}, b.rows(t, 30078, b.user.PubKey, d))
}

// Checks 8, 9 and 10: lookalikes and other addressable kinds keep NIP-33's
// soft-delete history; the channel is not part of a coordinate.
func TestReadStateLookalikes(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	now := time.Now().Unix()
	slot := strings.TrimPrefix(newSlot(), "read-state:")
	cases := []struct {
		name string
		d    string
		opts []eventtest.Option
		tTag bool
	}{
		{"UppercaseSlot", "read-state:" + strings.ToUpper(slot), nil, true},
		{"ShortSlot", "read-state:" + slot[:31], nil, true},
		{"LongSlot", "read-state:" + slot + "a", nil, true},
		{"TwoDTags", newSlot(), []eventtest.Option{eventtest.Tag("d", "read-state:"+slot)}, true},
		{"TwoTTags", newSlot(), []eventtest.Option{eventtest.Tag("t", "read-state")}, true},
		{"ThreeElementT", newSlot(), []eventtest.Option{eventtest.Tag("t", "read-state", "x")}, false},
		{"NoPrefix", "state:" + slot, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mk := func(ts int64) event.Event {
				opts := append([]eventtest.Option{eventtest.Tag("d", c.d), eventtest.At(ts)}, c.opts...)
				if c.tTag {
					opts = append(opts, eventtest.Tag("t", "read-state"))
				}
				return b.user.Signed(t, event.KindAppData, opts...)
			}
			first, second := mk(now-10), mk(now-9)
			b.w.MustPublish(first)
			b.w.MustPublish(second)
			require.Equal(t, []coordRow{{id: first.ID, ts: now - 10, deleted: true}, {id: second.ID, ts: now - 9}},
				b.rows(t, 30078, b.user.PubKey, c.d), "soft-delete history kept")
			_, _, ok := b.watermark(t, b.user.PubKey, c.d)
			require.False(t, ok, "no watermark")
		})
	}

	t.Run("Kind30023", func(t *testing.T) {
		d := newSlot()
		var ids []string
		for i := range 3 {
			ev := b.user.Signed(t, 30023, eventtest.Tag("d", d), eventtest.Tag("t", "read-state"), eventtest.At(now-int64(10-i)))
			b.w.MustPublish(ev)
			ids = append(ids, ev.ID)
		}
		require.Equal(t, []coordRow{{id: ids[0], ts: now - 10, deleted: true}, {id: ids[1], ts: now - 9, deleted: true}, {id: ids[2], ts: now - 8}},
			b.rows(t, 30023, b.user.PubKey, d), "superseded rows kept with deleted_at")
	})

	t.Run("ChannelOutsideTheCoordinate", func(t *testing.T) {
		chA := insertChannel(t, b.r, b.cid, b.user, channelOpts{})
		chB := insertChannel(t, b.r, b.cid, b.user, channelOpts{})
		d := newSlot()
		first := rsEvent(t, b.user, d, now-10, eventtest.Channel(chA))
		second := rsEvent(t, b.user, d, now-9, eventtest.Channel(chB))
		b.w.MustPublish(first)
		b.w.MustPublish(second)
		require.Equal(t, []coordRow{{id: second.ID, ts: now - 9}}, b.rows(t, 30078, b.user.PubKey, d), "one coordinate")
	})
}

// insertRaw inserts ev as a writer that bypasses the relay would (an older
// binary, hand-written SQL) and returns the rows affected.
func insertRaw(ctx context.Context, q pg.Querier, cid string, ev event.Event) (int64, error) {
	id, _ := hex.DecodeString(ev.ID)
	pub, _ := hex.DecodeString(ev.PubKey)
	sig, _ := hex.DecodeString(ev.Sig)
	tags, _ := json.Marshal(ev.Tags)
	d := ev.Tags.First("d").Value()
	tag, err := q.Exec(ctx, `INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag)
		VALUES ($1, $2, $3, to_timestamp($4), $5, $6, $7, $8, $9)`, cid, id, pub, ev.CreatedAt, ev.Kind, tags, ev.Content, sig, d)
	return tag.RowsAffected(), err
}

// The mixed-version sequence. A through this relay; B through a
// simulated old writer (soft delete of A, then insert of B); a NIP-09
// deletion of B; a late mention row for B from the old writer; replays of B
// and of X (A < X < B).
func TestReadStateMixedVersions(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	ctx := context.Background()
	pool := b.r.App.Pool()
	d := newSlot()
	now := time.Now().Unix()
	evA := rsEvent(t, b.user, d, now-30)
	b.w.MustPublish(evA)

	evB := rsEvent(t, b.user, d, now-10)
	pubA, _ := hex.DecodeString(evA.PubKey)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE events SET deleted_at = now() WHERE community_id = $1 AND kind = 30078 AND pubkey = $2
			AND d_tag = $3 AND deleted_at IS NULL`, b.cid, pubA, d); err != nil {
			return err
		}
		n, err := insertRaw(ctx, tx, b.cid, evB)
		require.Equal(t, int64(1), n)
		return err
	}), "the old writer's replacement")
	require.Equal(t, []coordRow{{id: evB.ID, ts: now - 10}}, b.rows(t, 30078, b.user.PubKey, d), "A is physically gone")
	id, _, _ := b.watermark(t, b.user.PubKey, d)
	require.Equal(t, evB.ID, id, "the database advanced to B")

	b.w.MustPublish(b.user.Signed(t, event.KindDeletion, eventtest.Tag("e", evB.ID)))
	require.Empty(t, b.rows(t, 30078, b.user.PubKey, d), "B is physically gone")

	// The old writer's mention row for B, after B's commit and deletion:
	// skipped by the mention fence, no error, no deadlock.
	eid, _ := hex.DecodeString(evB.ID)
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tag, err := pool.Exec(mctx, `INSERT INTO event_mentions (community_id, pubkey_hex, event_id, event_created_at, event_kind)
		VALUES ($1, $2, $3, to_timestamp($4), 30078)`, b.cid, eventtest.NewKey().PubKey, eid, evB.CreatedAt)
	require.NoError(t, err)
	require.Zero(t, tag.RowsAffected())

	notStored(t, b.w, evB, "B replayed through the relay")
	n, err := insertRaw(ctx, pool, b.cid, evB)
	require.NoError(t, err)
	require.Zero(t, n, "B replayed by the old writer: 0 rows")
	evX := rsEvent(t, b.user, d, now-20)
	notStored(t, b.w, evX, "X through the relay")
	_, err = insertRaw(ctx, pool, b.cid, evX)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23514", pgErr.Code)
	require.Equal(t, "stale NIP-RS event rejected by durable watermark", pgErr.Message)
	require.Empty(t, b.rows(t, 30078, b.user.PubKey, d))
	id, _, _ = b.watermark(t, b.user.PubKey, d)
	require.Equal(t, evB.ID, id)
}

// A capped query returns the newest events, ties by the
// lowest id, with every predicate (#t included) applied before the cap.
func TestReadStateCappedQuery(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	now := time.Now().Unix()
	var rs []event.Event
	for i := range 3 {
		ev := rsEvent(t, b.user, newSlot(), now-100+int64(i/2)) // two share a second
		b.w.MustPublish(ev)
		rs = append(rs, ev)
	}
	for i := range 3 { // newer application data
		b.w.MustPublish(b.user.Signed(t, event.KindAppData, eventtest.Tag("d", "app-"+strconv.Itoa(i)), eventtest.At(now-10+int64(i))))
	}
	got, closed, _ := b.w.Req("all", map[string]any{"kinds": []int{30078}, "authors": []string{b.user.PubKey}, "limit": 2})
	require.Empty(t, closed)
	require.Len(t, got, 2, "R3: at least 2 when 2 match")
	require.GreaterOrEqual(t, got[0].CreatedAt, got[1].CreatedAt, "newest first")

	got, closed, _ = b.w.Req("rs", map[string]any{"kinds": []int{30078}, "authors": []string{b.user.PubKey}, "#t": []string{"read-state"}, "limit": 2})
	require.Empty(t, closed)
	// rs[2] is the newest (now-99); rs[0] and rs[1] share now-100, the
	// lower id wins the second place.
	second := rs[0]
	if rs[1].ID < rs[0].ID {
		second = rs[1]
	}
	require.Equal(t, []string{rs[2].ID, second.ID}, []string{got[0].ID, got[1].ID}, "R1: #t before the cap; ties by lowest id")
	// The same on POST /query.
	require.Equal(t, []string{rs[2].ID, second.ID}, brQuery(t, b.r, b.user,
		`[{"kinds":[30078],"authors":["`+b.user.PubKey+`"],"#t":["read-state"],"limit":2}]`), "R1 on /query")
	require.Len(t, brQuery(t, b.r, b.user, `[{"kinds":[30078],"authors":["`+b.user.PubKey+`"],"limit":2}]`), 2, "R3 on /query")
}

// Same-process half: S1 holds the read-state filter; E is
// published on another connection and acknowledged; S2 on S1's connection
// ends with EOSE only after E reached S1. 200 rounds. The cross-process
// half is TestScaleOutBarrier in cmd/buzz-relay.
func TestReadStateBarrier(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	filter := map[string]any{"kinds": []int{30078}, "authors": []string{b.user.PubKey}, "#t": []string{"read-state"}}
	_, closed, _ := b.w.Req("s1", filter)
	require.Empty(t, closed)
	pub := b.r.Dial(t, "")
	pub.Auth(b.user)
	d := newSlot()
	base := time.Now().Unix() - 300
	fresh := map[string]any{"kinds": []int{30078}, "authors": []string{b.user.PubKey}, "#t": []string{"read-state"}, "limit": 0}
	for round := range 200 {
		e := rsEvent(t, b.user, d, base+int64(round))
		pub.MustPublish(e)
		sub := "s2-" + strconv.Itoa(round)
		b.w.Send("REQ", sub, fresh)
		var seen []string
		for {
			msg := b.w.Next()
			if msg[0] == "EVENT" && msg[1] == "s1" {
				seen = append(seen, msg[2].(map[string]any)["id"].(string))
			}
			if msg[0] == "EOSE" && msg[1] == sub {
				break
			}
		}
		require.Equal(t, []string{e.ID}, seen, "round %d: E on S1 before the EOSE of S2", round)
		b.w.Send("CLOSE", sub)
	}
}

// 50 clients publish to one coordinate with random created_at in
// a 3-second span, half through POST /events and half over WebSocket:
// afterwards exactly one row, equal to the watermark and to the greatest
// tuple submitted. While they write, no connection of the relay waits on
// the coordinate's advisory lock: the writes queue in the process before
// they take one (docs/ARCHITECTURE.md "Writes of one coordinate").
func TestReadStateConcurrentWriters(t *testing.T) {
	t.Parallel()
	b := setupRS(t)
	d := newSlot()
	base := time.Now().Unix() - 5
	evs := make([]event.Event, 50)
	for i := range evs {
		evs[i] = rsEvent(t, b.user, d, base+rand.Int64N(3))
	}
	conns := make([]*relaytest.WS, 25)
	for i := range conns {
		conns[i] = b.r.Dial(t, "")
		conns[i].Auth(b.user)
	}
	// The 50 writes take the coordinate's lock one after the other; on a
	// loaded machine (the race detector, the rest of the suite beside it)
	// the last one can wait several seconds, which is not what this tests.
	const wait = time.Minute
	sampled, waiting := make(chan struct{}), make(chan int, 1)
	go func() { waiting <- advisoryWaiters(b.r.DBURL, sampled) }()
	var wg sync.WaitGroup
	answers := make([]string, len(evs))
	for i := range evs {
		wg.Go(func() {
			if i%2 == 0 {
				ok, msg, err := conns[i/2].PublishWithin(evs[i], wait)
				answers[i] = strconv.FormatBool(ok) + " " + msg
				if err != nil {
					answers[i] = err.Error()
				}
				return
			}
			status, body := b.r.PostEvent(t, "", b.user, evs[i])
			answers[i] = strconv.Itoa(status) + " " + body
		})
	}
	wg.Wait()
	close(sampled)
	require.Zero(t, <-waiting, "relay connections seen waiting on an advisory lock")
	for i, a := range answers {
		require.True(t, strings.HasPrefix(a, "true") || strings.HasPrefix(a, "200"), "client %d: %s", i, a)
	}
	best := evs[0]
	for _, ev := range evs[1:] {
		if ev.CreatedAt > best.CreatedAt || (ev.CreatedAt == best.CreatedAt && ev.ID < best.ID) {
			best = ev
		}
	}
	require.Equal(t, []coordRow{{id: best.ID, ts: best.CreatedAt}}, b.rows(t, 30078, b.user.PubKey, d))
	id, ts, ok := b.watermark(t, b.user.PubKey, d)
	require.True(t, ok)
	require.Equal(t, [2]any{best.ID, best.CreatedAt}, [2]any{id, ts})
}

// advisoryWaiters samples, until stop closes, the backends of url's
// database that wait on an advisory lock, and returns the most seen at once
// (-1 if it could not sample).
func advisoryWaiters(url string, stop <-chan struct{}) int {
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return -1
	}
	defer conn.Close(context.Background())
	most := 0
	for {
		select {
		case <-stop:
			return most
		default:
		}
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n); err != nil {
			return -1
		}
		most = max(most, n)
	}
}

// docs/PROTOCOL.md §14.8: right after the purge migration is applied, the relay logs
// one line per community with the rows and bytes it purged. The database
// is one that recorded 0006 but not 0007 (as during an upgrade), holding a
// coordinate with two superseded versions behind a live head, as an older
// binary left them.
func TestReadStatePurgeLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, url := dbtest.NewDB(t)
	env := map[string]string{"DATABASE_URL": url, "BUZZ_AUTO_MIGRATE": "true", "BUZZ_LOG_LEVEL": "info"}
	first := relaytest.Start(t, env) // migrates and creates the deployment community
	cid := communityID(t, first, first.Host)
	first.Stop()

	_, err := pool.Exec(ctx, `DROP TABLE read_state_retention_purges`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM buzz_schema_migrations WHERE name = '0007_read_state_purge_superseded.sql'`)
	require.NoError(t, err)
	user, d := eventtest.NewKey(), newSlot()
	now := time.Now().Unix()
	var superseded int64
	for i, ts := range []int64{now - 30, now - 20, now - 10} {
		ev := rsEvent(t, user, d, ts)
		n, err := insertRaw(ctx, pool, cid, ev)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		if i < 2 {
			// Marked deleted in place (an UPDATE would fire 0006's purge
			// trigger and delete it at once).
			_, err := pool.Exec(ctx, `ALTER TABLE events DISABLE TRIGGER trg_events_purge_soft_deleted_nip_rs`)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = decode($2, 'hex')`, cid, ev.ID)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `ALTER TABLE events ENABLE TRIGGER trg_events_purge_soft_deleted_nip_rs`)
			require.NoError(t, err)
			tags, _ := json.Marshal(ev.Tags)
			superseded += int64(len(ev.Content) + len(tags))
		}
	}

	var logs logtest.Buffer
	second := relaytest.StartWithLogger(t, env, &logs)
	second.Stop()
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"read-state history purged"`) {
			require.Nil(t, line, "one line per community")
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.NotNil(t, line, "the purge is logged:\n%s", logs.String())
	require.Equal(t, cid, line["community_id"])
	require.Equal(t, 2.0, line["rows"])
	require.GreaterOrEqual(t, line["bytes"], float64(superseded)/2, "content plus tags text, as PostgreSQL measures them")
	var live int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE community_id = $1 AND d_tag = $2`, cid, d).Scan(&live))
	require.Equal(t, 1, live, "the superseded rows are gone")
}

// docs/PROTOCOL.md §14.2: the hard-delete fence meeting the relay's own delete is a
// bug: the whole transaction rolls back, the answer is an internal error,
// the fence error is counted and logged at error level with the community
// id and kind. The fault is real: the fence function is replaced, in this
// test's own database, by one that refuses every delete.
func TestReadStateFenceError(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	r := relaytest.StartWithLogger(t, nil, &logs)
	cid := communityID(t, r, r.Host)
	b := &rsBundle{r: r, cid: cid, user: eventtest.NewKey()}
	b.w = r.Dial(t, "")
	b.w.Auth(b.user)
	d := newSlot()
	now := time.Now().Unix()
	head := rsEvent(t, b.user, d, now-10)
	b.w.MustPublish(head)
	_, err := r.App.Pool().Exec(context.Background(), `CREATE OR REPLACE FUNCTION guard_nip_rs_hard_delete() RETURNS trigger
		LANGUAGE plpgsql AS $$ BEGIN
		  RAISE EXCEPTION 'NIP-RS hard delete requires corrected writer opt-in' USING ERRCODE = 'check_violation';
		END $$`)
	require.NoError(t, err)
	ok, msg := b.w.Publish(rsEvent(t, b.user, d, now-5))
	require.False(t, ok)
	require.Equal(t, "error: internal server error", msg)
	require.Equal(t, []coordRow{{id: head.ID, ts: now - 10}}, b.rows(t, 30078, b.user.PubKey, d), "rolled back: the head survives")
	id, _, _ := b.watermark(t, b.user.PubKey, d)
	require.Equal(t, head.ID, id)
	require.Equal(t, 1.0, r.Metric(t, "buzz_read_state_fence_errors_total"))
	r.Stop()
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "hard-delete fence") {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.NotNil(t, line, "logged:\n%s", logs.String())
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, cid, line["community_id"])
	require.Equal(t, 30078.0, line["kind"])
}
