package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/httpapi"
	"github.com/buzz-relay/buzz/internal/ingest"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// snapshotAnswer is a 200 body of the read-state snapshot.
type snapshotAnswer struct {
	ReadStateSnapshot int             `json:"read_state_snapshot"`
	Complete          bool            `json:"complete"`
	Pubkey            string          `json:"pubkey"`
	SnapshotID        string          `json:"snapshot_id"`
	Events            json.RawMessage `json:"events"`
}

// snapshotBody is the snapshot request of pubkey.
func snapshotBody(pubkey string) []byte {
	return []byte(`[{"kinds":[30078],"authors":["` + pubkey + `"],"read_state_snapshot":1}]`)
}

// snapshot asks for key's read-state snapshot on the first community.
func (b *testBundle) snapshot(t *testing.T, key eventtest.Key) response {
	t.Helper()
	return b.signedPost(t, key, "/query", snapshotBody(key.PubKey))
}

// completeSnapshot asks for key's snapshot, requires a 200 of the
// documented shape and returns it with its events.
func (b *testBundle) completeSnapshot(t *testing.T, key eventtest.Key) (snapshotAnswer, []event.Event) {
	t.Helper()
	res := b.snapshot(t, key)
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.True(t, strings.HasPrefix(res.body, `{"read_state_snapshot":1,"complete":true,"pubkey":"`+key.PubKey+`","snapshot_id":"`), res.body[:min(len(res.body), 200)])
	var a snapshotAnswer
	require.NoError(t, json.Unmarshal([]byte(res.body), &a))
	require.Equal(t, 1, a.ReadStateSnapshot)
	require.True(t, a.Complete)
	require.Equal(t, key.PubKey, a.Pubkey)
	var evs []event.Event
	require.NoError(t, json.Unmarshal(a.Events, &evs))
	return a, evs
}

// wantSnapshotID is the documented snapshot_id, computed apart from the
// relay: SHA-256 over the raw ids in ascending byte order.
func wantSnapshotID(t *testing.T, ids ...string) string {
	t.Helper()
	raw := make([][]byte, len(ids))
	for i, id := range ids {
		b, err := hex.DecodeString(id)
		require.NoError(t, err)
		raw[i] = b
	}
	slices.SortFunc(raw, bytes.Compare)
	h := sha256.New()
	for _, b := range raw {
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// slot returns a random read-state slot: 32 lowercase hex characters.
func slot() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// readState is a conforming read-state event of key for slot s at ts.
func readState(t *testing.T, key eventtest.Key, s string, ts int64, content string) event.Event {
	t.Helper()
	return key.Signed(t, event.KindAppData, eventtest.Tag("d", "read-state:"+s), eventtest.Tag("t", "read-state"),
		eventtest.At(ts), eventtest.Content(content))
}

// submitTo runs events through the pipeline as tenant tn; each must be
// accepted.
func (b *testBundle) submitTo(t *testing.T, tn tenant.Tenant, evs ...event.Event) {
	t.Helper()
	for _, ev := range evs {
		res := b.pipeline.Submit(context.Background(), ingest.Request{Tenant: tn, Author: ev.PubKey, Source: ingest.SourceWebSocket, Event: ev})
		require.Equal(t, ingest.Accepted, res.Code, res.Message)
	}
}

// bulkReadState writes n conforming read-state rows of pubkey straight
// into events, content n bytes of "x" each, one second apart below the
// current time: a fast way to the limits (no read path checks ids or
// signatures).
func bulkReadState(t *testing.T, pool *pgxpool.Pool, communityID, pubkey string, n, contentBytes int) {
	t.Helper()
	pub, err := hex.DecodeString(pubkey)
	require.NoError(t, err)
	salt := slot()
	_, err = pool.Exec(context.Background(), `
		INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag)
		SELECT $1, sha256(convert_to($3 || ':' || g, 'UTF8')), $2, now() - make_interval(secs => g), 30078,
		       jsonb_build_array(jsonb_build_array('d', 'read-state:' || md5($3 || ':' || g)), '["t","read-state"]'::jsonb),
		       repeat('x', $4), decode(repeat('ab', 64), 'hex'), 'read-state:' || md5($3 || ':' || g)
		FROM generate_series(1, $5::int) g`, communityID, pub, salt, contentBytes, n)
	require.NoError(t, err)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// rawEvent is an event with random id and signature, not signed: for rows
// written with fixture.Store that no read path verifies.
func rawEvent(pubkey string, kind int, ts int64, content string, tags ...event.Tag) event.Event {
	id, sig := make([]byte, 32), make([]byte, 64)
	_, _ = rand.Read(id)
	_, _ = rand.Read(sig)
	return event.Event{ID: hex.EncodeToString(id), PubKey: pubkey, CreatedAt: ts, Kind: kind,
		Tags: tags, Content: content, Sig: hex.EncodeToString(sig)}
}

func TestReadStateSnapshot(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	t.Run("Complete", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		me, other := b.key, eventtest.NewKey()
		now := time.Now().Unix()
		s1, s2, s3 := slot(), slot(), slot()
		oldS1 := readState(t, me, s1, now-60, "s1 v1")
		b.submit(t, oldS1)
		newS1 := readState(t, me, s1, now-5, "s1 v2") // replaces oldS1
		tieA := readState(t, me, s2, now-20, "s2")
		tieB := readState(t, me, s3, now-20, "s3")
		b.submit(t, newS1, tieA, tieB)

		// Never part of my snapshot: nonconforming 30078 application data
		// and lookalikes, another kind with read-state tags, another user's
		// read state here, and my read state in another community.
		b.submit(t,
			me.Signed(t, event.KindAppData, eventtest.Tag("d", "myapp:settings"), eventtest.At(now-1)),
			me.Signed(t, event.KindAppData, eventtest.Tag("d", "read-state:"+strings.ToUpper(slot())), eventtest.Tag("t", "read-state"), eventtest.At(now-1)),
			me.Signed(t, event.KindAppData, eventtest.Tag("d", "read-state:"+slot()[:31]), eventtest.Tag("t", "read-state"), eventtest.At(now-1)),
			me.Signed(t, event.KindAppData, eventtest.Tag("d", "read-state:"+slot()), eventtest.At(now-1)),
			me.Signed(t, event.KindAppData, eventtest.Tag("d", "read-state:"+slot()), eventtest.Tag("t", "read-state", "x"), eventtest.At(now-1)),
			me.Signed(t, event.KindAppData, eventtest.Tag("d", "read-state:"+slot()), eventtest.Tag("t", "read-state"), eventtest.Tag("t", "read-state"), eventtest.At(now-1)),
			me.Signed(t, 30023, eventtest.Tag("d", "read-state:"+slot()), eventtest.Tag("t", "read-state"), eventtest.At(now-1)),
			readState(t, other, s2, now-1, "other user"),
		)
		b.submitTo(t, b.tb, readState(t, me, slot(), now-1, "other community"))
		// A conforming row deleted by hand (a NIP-09 deletion or an older
		// writer's replacement leave deleted_at set, or remove the row).
		gone := readState(t, me, slot(), now-2, "deleted")
		fixture.Store(t, d.pool, b.ta.CommunityID, "", gone)
		_, err := d.pool.Exec(context.Background(), `UPDATE events SET deleted_at = now() WHERE community_id = $1 AND id = decode($2, 'hex')`,
			b.ta.CommunityID, gone.ID)
		require.NoError(t, err)
		// A conforming row that was stored already deleted (as a legacy
		// NIP-09 deletion that retention keeps, docs/PROTOCOL.md §14.4).
		kept := readState(t, me, slot(), now-2, "kept deleted")
		_, err = d.pool.Exec(context.Background(), `
			INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag, deleted_at)
			VALUES ($1, decode($2, 'hex'), decode($3, 'hex'), to_timestamp($4), 30078, $5::jsonb, $6, decode($7, 'hex'), $8, now())`,
			b.ta.CommunityID, kept.ID, kept.PubKey, kept.CreatedAt, string(mustJSON(t, kept.Tags)), kept.Content, kept.Sig, kept.Tags.First("d").Value())
		require.NoError(t, err)

		a, got := b.completeSnapshot(t, me)
		ties := []event.Event{tieA, tieB}
		slices.SortFunc(ties, func(x, y event.Event) int { return strings.Compare(x.ID, y.ID) })
		require.Equal(t, []event.Event{newS1, ties[0], ties[1]}, got, "newest first, ties by ascending id, the events as stored")
		require.Equal(t, wantSnapshotID(t, newS1.ID, tieA.ID, tieB.ID), a.SnapshotID)

		again, _ := b.completeSnapshot(t, me)
		require.Equal(t, a.SnapshotID, again.SnapshotID, "the same set has the same id")

		newS2 := readState(t, me, s2, now-3, "s2 v2")
		b.submit(t, newS2)
		changed, got := b.completeSnapshot(t, me)
		require.NotEqual(t, a.SnapshotID, changed.SnapshotID)
		require.Equal(t, wantSnapshotID(t, newS1.ID, newS2.ID, tieB.ID), changed.SnapshotID)
		require.Equal(t, []event.Event{newS2, newS1, tieB}, got)

		// The other user sees only theirs.
		_, theirs := b.completeSnapshot(t, other)
		require.Len(t, theirs, 1)
		require.Equal(t, "other user", theirs[0].Content)

		// Someone with no read state gets an empty, complete snapshot.
		empty, none := b.completeSnapshot(t, eventtest.NewKey())
		require.Empty(t, none)
		require.Equal(t, `[]`, string(empty.Events))
		require.Equal(t, wantSnapshotID(t), empty.SnapshotID)
	})

	t.Run("BadShapes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		me := b.key.PubKey
		someone := eventtest.NewKey().PubKey
		const (
			only    = "invalid: read_state_snapshot must be the only filter of the request"
			value   = "invalid: read_state_snapshot must be 1"
			fields  = "invalid: read_state_snapshot takes only kinds, authors and read_state_snapshot, got "
			kinds   = "invalid: read_state_snapshot requires kinds to be exactly [30078]"
			authors = "invalid: read_state_snapshot requires authors to be exactly one pubkey, the authenticated one"
			others  = "restricted: read_state_snapshot reads only the authenticated pubkey's read state"
		)
		ok := `{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1`
		cases := []struct{ name, body, msg string }{
			{"SecondFilter", `[` + ok + `},{"kinds":[1]}]`, only},
			{"SecondFilterFirst", `[{"kinds":[1]},` + ok + `}]`, only},
			{"TwoSnapshots", `[` + ok + `},` + ok + `}]`, only},
			{"Limit", `[` + ok + `,"limit":10}]`, fields + "limit"},
			{"Since", `[` + ok + `,"since":1}]`, fields + "since"},
			{"Until", `[` + ok + `,"until":1}]`, fields + "until"},
			{"LimitSinceUntil", `[` + ok + `,"until":1,"since":0,"limit":5}]`, fields + "limit, since, until"},
			{"TagFilter", `[` + ok + `,"#t":["read-state"]}]`, fields + "#t"},
			{"EmptyTagFilter", `[` + ok + `,"#d":[]}]`, fields + "#d"},
			{"IDs", `[` + ok + `,"ids":[]}]`, fields + "ids"},
			{"Search", `[` + ok + `,"search":"x"}]`, fields + "search"},
			{"OtherExtension", `[` + ok + `,"before_id":"x"}]`, fields + "before_id"},
			{"TwoKinds", `[{"kinds":[30078,1],"authors":["` + me + `"],"read_state_snapshot":1}]`, kinds},
			{"OtherKind", `[{"kinds":[30023],"authors":["` + me + `"],"read_state_snapshot":1}]`, kinds},
			{"NoKinds", `[{"authors":["` + me + `"],"read_state_snapshot":1}]`, kinds},
			{"OtherAuthor", `[{"kinds":[30078],"authors":["` + someone + `"],"read_state_snapshot":1}]`, others},
			{"TwoAuthors", `[{"kinds":[30078],"authors":["` + me + `","` + someone + `"],"read_state_snapshot":1}]`, authors},
			{"NoAuthors", `[{"kinds":[30078],"read_state_snapshot":1}]`, authors},
			{"ValueTwo", `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":2}]`, value},
			{"ValueZero", `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":0}]`, value},
			{"ValueString", `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":"1"}]`, value},
			{"ValueFloat", `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":1.0}]`, value},
			{"ValueTrue", `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":true}]`, value},
			{"ValueNull", `[{"kinds":[30078],"authors":["` + me + `"],"read_state_snapshot":null}]`, value},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				res := b.signedPost(t, b.key, "/query", []byte(tc.body))
				require.Equal(t, http.StatusBadRequest, res.status, res.body)
				require.Equal(t, errorJSON(tc.msg), res.body)
			})
		}

		t.Run("UppercaseAuthorIsTheReader", func(t *testing.T) {
			t.Parallel()
			res := b.signedPost(t, b.key, "/query", snapshotBody(strings.ToUpper(me)))
			require.Equal(t, http.StatusOK, res.status, res.body)
		})

		// Without authentication the bridge refuses before the body is
		// read (docs/PROTOCOL.md §8.1), as for every /query.
		t.Run("NoAuthorization", func(t *testing.T) {
			t.Parallel()
			res := b.do(t, http.MethodPost, b.ta.Host, "/query", snapshotBody(me), nil)
			require.Equal(t, http.StatusUnauthorized, res.status, res.body)
			require.NotContains(t, res.body, "read_state_snapshot")
		})
	})

	t.Run("TooManyEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		me := eventtest.NewKey()
		bulkReadState(t, d.pool, b.ta.CommunityID, me.PubKey, read.SnapshotMaxEvents, 10)
		b = b.serve(t) // a door whose clock is not older than NIP-98's window after the bulk write
		_, got := b.completeSnapshot(t, me)
		require.Len(t, got, read.SnapshotMaxEvents, "exactly the limit is served whole")

		bulkReadState(t, d.pool, b.ta.CommunityID, me.PubKey, 1, 10)
		res := b.snapshot(t, me)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.status, res.body[:min(len(res.body), 200)])
		require.Equal(t, errorJSON("read_state_snapshot too large: more than 4096 read-state events"), res.body)
	})

	t.Run("TooManyBytes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		me := eventtest.NewKey()
		bulkReadState(t, d.pool, b.ta.CommunityID, me.PubKey, 31, 262144)
		b = b.serve(t)
		a, _ := b.completeSnapshot(t, me)
		// One more event whose JSON makes the array exactly the limit.
		last := rawEvent(me.PubKey, event.KindAppData, time.Now().Unix()-1000, "",
			event.Tag{"d", "read-state:" + slot()}, event.Tag{"t", "read-state"})
		last.Content = strings.Repeat("y", read.SnapshotMaxArrayBytes-len(a.Events)-1-len(last.AppendJSON(nil)))
		fixture.Store(t, d.pool, b.ta.CommunityID, "", last)
		exact, got := b.completeSnapshot(t, me)
		require.Len(t, exact.Events, read.SnapshotMaxArrayBytes, "an array of exactly the limit is served whole")
		require.Len(t, got, 32)

		bulkReadState(t, d.pool, b.ta.CommunityID, me.PubKey, 1, 0)
		res := b.snapshot(t, me)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.status, res.body[:min(len(res.body), 200)])
		require.Equal(t, errorJSON("read_state_snapshot too large: the events exceed 8388608 bytes of JSON"), res.body)

		// Far more than the limit: the statement stops sending rows once
		// their content alone passes it, and the answer is still a 413,
		// never a shorter "complete" set. Content just under 256 KiB makes
		// 32 rows fit within 8 MiB of content but not of JSON.
		many := eventtest.NewKey()
		bulkReadState(t, d.pool, b.ta.CommunityID, many.PubKey, 40, 262144-1000)
		res = b.snapshot(t, many)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.status, res.body[:min(len(res.body), 200)])
		require.Equal(t, errorJSON("read_state_snapshot too large: the events exceed 8388608 bytes of JSON"), res.body)
	})

	t.Run("CorruptRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		ts := time.Now().Unix() - 100
		// Conforming by docs/PROTOCOL.md §14.1 (tag elements may be any JSON value),
		// but not an event: a tag holds a number.
		numeric := eventtest.NewKey()
		b.submit(t, readState(t, numeric, slot(), ts, "fine"))
		s := slot()
		_, err := d.pool.Exec(context.Background(), `
			INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, d_tag)
			VALUES ($1, sha256(convert_to($2, 'UTF8')), decode($3, 'hex'), now(), 30078, $4::jsonb, '', decode(repeat('ab', 64), 'hex'), $5)`,
			b.ta.CommunityID, s, numeric.PubKey, `[["d","read-state:`+s+`"],["t","read-state"],["n",1]]`, "read-state:"+s)
		require.NoError(t, err)
		// Kind 30078 is global-only: a read-state row in a channel was not
		// written by this relay.
		channelled := eventtest.NewKey()
		fixture.Store(t, d.pool, b.ta.CommunityID, b.general, readState(t, channelled, slot(), ts, "in a channel"))
		b = b.serve(t)
		for _, key := range []eventtest.Key{numeric, channelled} {
			res := b.snapshot(t, key)
			require.Equal(t, http.StatusServiceUnavailable, res.status, res.body)
			require.Equal(t, errorJSON("error: read_state_snapshot unavailable: the read-state events could not be read; retry later"), res.body)
		}
	})

	t.Run("DatabaseDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, d)
		b.submit(t, readState(t, b.key, slot(), time.Now().Unix(), "x"))
		down := b.serve(t, func(c *httpapi.Config) { c.Reader = read.New(read.Config{Pool: d.downPool(t)}) })
		res := down.snapshot(t, b.key)
		require.Equal(t, http.StatusServiceUnavailable, res.status, res.body)
		require.Equal(t, errorJSON("error: read_state_snapshot unavailable: the read-state events could not be read; retry later"), res.body)
	})
}

// TestReadStateSnapshotStatementFails takes the snapshot while a schema
// change holds events in ACCESS EXCLUSIVE mode and the reader's
// connections have a lock_timeout: the statement itself fails in the
// database. Its own database, since the lock stops every read of events.
func TestReadStateSnapshotStatementFails(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	impatient := d.openPool(t, map[string]string{"lock_timeout": "200ms"})
	b := setup(t, d, func(c *httpapi.Config) { c.Reader = read.New(read.Config{Pool: impatient}) })
	ev := readState(t, b.key, slot(), time.Now().Unix(), "x")
	b.submit(t, ev)

	ctx := context.Background()
	tx, err := d.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	res := b.snapshot(t, b.key)
	require.Equal(t, http.StatusServiceUnavailable, res.status, res.body)
	require.Equal(t, errorJSON("error: read_state_snapshot unavailable: the read-state events could not be read; retry later"), res.body)

	require.NoError(t, tx.Rollback(ctx))
	_, got := b.completeSnapshot(t, b.key)
	require.Equal(t, []event.Event{ev}, got, "served again once the lock is gone")
}

// writeRecord is one read-state write of the consistency test.
type writeRecord struct {
	seq    int64
	coord  int
	id     string
	stored bool
	// start is before the submit, end after its answer: the commit lies
	// between them.
	start, end time.Time
}

// snapshotRecord is one snapshot of the consistency test: sent after
// start, answered before end.
type snapshotRecord struct {
	start, end time.Time
	events     []event.Event
}

// TestReadStateSnapshotConsistency has 20 writers replace the read state
// of one reader through the ingest pipeline while snapshots are taken.
// Each event's content is "seq:<n>" of a global sequence and its
// created_at rises with n, so on each coordinate the stored events, by
// sequence, are the successive heads. Against the write log every
// snapshot must hold one event per coordinate, each a stored event, and
// there must be one instant inside the snapshot's request at which all of
// them were live heads: after each one's write began and before its
// successor's write was answered.
func TestReadStateSnapshotConsistency(t *testing.T) {
	t.Parallel()
	const (
		writers      = 20
		perWriter    = 15
		coords       = 4
		minSnapshots = 20
	)
	d := newDB(t)
	b := setup(t, d, func(c *httpapi.Config) { c.NowFunc = time.Now })
	reader := b.key
	slots := make([]string, coords)
	coordOf := map[string]int{}
	for i := range slots {
		slots[i] = slot()
		coordOf["read-state:"+slots[i]] = i
	}
	base := time.Now().Unix() - 800 // every created_at stays inside ingest's drift window
	var (
		seq  atomic.Int64
		mu   sync.Mutex
		log  []writeRecord
		byID = map[string]int64{}
	)
	write := func(t *testing.T, coord int) {
		n := seq.Add(1)
		ev := readState(t, reader, slots[coord], base+n, "seq:"+strconv.FormatInt(n, 10))
		start := time.Now()
		res := b.pipeline.Submit(context.Background(), ingest.Request{Tenant: b.ta, Author: reader.PubKey, Source: ingest.SourceWebSocket, Event: ev})
		end := time.Now()
		if res.Code != ingest.Accepted && res.Code != ingest.Duplicate {
			t.Errorf("write seq %d: %v %s", n, res.Code, res.Message)
		}
		mu.Lock()
		log = append(log, writeRecord{seq: n, coord: coord, id: ev.ID, stored: res.Code == ingest.Accepted, start: start, end: end})
		byID[ev.ID] = n
		mu.Unlock()
	}
	for c := range coords { // every coordinate has a head before the first snapshot
		write(t, c)
	}

	var (
		wg    sync.WaitGroup
		done  atomic.Bool
		snaps []snapshotRecord
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				write(t, w%coords)
			}
		}()
	}
	go func() {
		wg.Wait()
		done.Store(true)
	}()
	for !done.Load() || len(snaps) < minSnapshots {
		start := time.Now()
		res := b.snapshot(t, reader)
		end := time.Now()
		require.Equal(t, http.StatusOK, res.status, res.body)
		var a snapshotAnswer
		require.NoError(t, json.Unmarshal([]byte(res.body), &a))
		var evs []event.Event
		require.NoError(t, json.Unmarshal(a.Events, &evs))
		snaps = append(snaps, snapshotRecord{start: start, end: end, events: evs})
	}
	wg.Wait()

	// The stored events of each coordinate in sequence order: the heads it
	// had, one after the other.
	slices.SortFunc(log, func(x, y writeRecord) int { return int(x.seq - y.seq) })
	heads := make([][]writeRecord, coords)
	for _, w := range log {
		if w.stored {
			heads[w.coord] = append(heads[w.coord], w)
		}
	}
	for c := range heads {
		require.NotEmpty(t, heads[c])
	}
	var lastEnd time.Time
	for _, w := range log {
		if w.end.After(lastEnd) {
			lastEnd = w.end
		}
	}
	during := 0
	for i, s := range snaps {
		lo, hi := s.start, s.end
		seen := map[int]bool{}
		for _, ev := range s.events {
			c, ok := coordOf[ev.Tags.First("d").Value()]
			require.True(t, ok, "snapshot %d holds an event of no test coordinate", i)
			require.False(t, seen[c], "snapshot %d holds two events of coordinate %d", i, c)
			seen[c] = true
			n, ok := byID[ev.ID]
			require.True(t, ok, "snapshot %d holds an event that was never written", i)
			require.Equal(t, "seq:"+strconv.FormatInt(n, 10), ev.Content)
			at := slices.IndexFunc(heads[c], func(w writeRecord) bool { return w.seq == n })
			require.GreaterOrEqual(t, at, 0, "snapshot %d holds seq %d, which was never stored", i, n)
			if h := heads[c][at]; h.start.After(lo) {
				lo = h.start
			}
			if at+1 < len(heads[c]) {
				if next := heads[c][at+1]; next.end.Before(hi) {
					hi = next.end
				}
			}
		}
		require.Len(t, seen, coords, "snapshot %d misses a coordinate", i)
		require.True(t, lo.Before(hi), "snapshot %d: no instant at which all its events were live heads", i)
		if s.start.Before(lastEnd) {
			during++
		}
	}
	require.GreaterOrEqual(t, during, 5, "snapshots taken while the writers ran")
	t.Logf("%d writes (%d stored), %d snapshots, %d while writing", len(log), countStored(log), len(snaps), during)
}

func countStored(log []writeRecord) int {
	n := 0
	for _, w := range log {
		if w.stored {
			n++
		}
	}
	return n
}
