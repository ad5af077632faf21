package e2e

import (
	"context"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/maintenance"
)

func expiration(at int64) eventtest.Option {
	return eventtest.Tag("expiration", strconv.FormatInt(at, 10))
}

// NIP-40 end to end (docs/PROTOCOL.md §6.6): an expired or malformed
// expiration is refused on both doors and never fanned out; an event
// stored with a near expiration is read by REQ, COUNT, search, /query and
// a channel window until it passes, and by none of them after, while its
// row still waits for the purge; the purge job then deletes it, and the
// audit chain keeps its event_created entry and still verifies.
func TestExpiration(t *testing.T) {
	t.Parallel()
	e := auSetup(t, nil) // BUZZ_EXPIRED_PURGE_INTERVAL_MS at its default: no purge during the test
	r := e.r
	owner := eventtest.NewKey()
	w := rpAuthed(t, r, "", owner)
	ch := uuid.NewString()
	w.MustPublish(owner.Signed(t, event.KindCreateGroup, eventtest.Channel(ch), eventtest.Tag("name", "expiring")))
	live := rpAuthed(t, r, "", owner)
	_, closed, eose := live.Req("live", map[string]any{"#h": []string{ch}, "kinds": []int{9}})
	require.True(t, eose, closed)

	now := time.Now().Unix()
	var refused []string
	for _, c := range []struct {
		name string
		kind int
		tags []eventtest.Option
		want string
	}{
		{"Expired", 9, []eventtest.Option{expiration(now - 1)}, "invalid: event has expired"},
		{"ExpiresNow", 9, []eventtest.Option{expiration(now)}, "invalid: event has expired"},
		{"NotANumber", 9, []eventtest.Option{eventtest.Tag("expiration", "soon")}, "invalid: malformed expiration tag"},
		{"Milliseconds", 9, []eventtest.Option{expiration(now * 1000)}, "invalid: malformed expiration tag"},
		{"TwoTags", 9, []eventtest.Option{expiration(now + 60), expiration(now + 120)}, "invalid: malformed expiration tag"},
		{"Ephemeral", 25000, []eventtest.Option{expiration(now - 1)}, "invalid: event has expired"},
	} {
		build := func(door string) event.Event {
			return owner.Signed(t, c.kind, append([]eventtest.Option{eventtest.Channel(ch), eventtest.Content(door + " " + c.name)}, c.tags...)...)
		}
		ev := build("ws")
		ok, msg := w.Publish(ev)
		require.False(t, ok, c.name)
		require.Equal(t, c.want, msg, c.name)
		refused = append(refused, ev.ID)
		if event.IsEphemeral(c.kind) {
			continue // WebSocket only
		}
		ev = build("http")
		status, body := r.PostEvent(t, "", owner, ev)
		require.Equal(t, http.StatusBadRequest, status, c.name)
		require.Contains(t, body, c.want, c.name)
		refused = append(refused, ev.ID)
	}
	require.Zero(t, countRows(t, r, `SELECT count(*) FROM events WHERE id = ANY($1)`, hexIDs(t, refused)))

	exp := time.Now().Unix() + 2
	soon := owner.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("zebra soon"), expiration(exp))
	keep := owner.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("zebra keep"))
	w.MustPublish(soon)
	w.MustPublish(keep)
	frames := rpReadUntil(t, live, func(fs [][]any) bool { return len(fs) >= 2 })
	require.Equal(t, []string{soon.ID, keep.ID}, []string{rpEventFrame(frames[0], "live"), rpEventFrame(frames[1], "live")},
		"an event that expires later is fanned out; a refused one never is")

	reads := func() (req, search, query, window []string, count int64) {
		t.Helper()
		filter := map[string]any{"#h": []string{ch}, "kinds": []int{9}}
		evs, closed, eose := w.Req("req", filter)
		require.True(t, eose, closed)
		req = rpIdsOf(evs)
		count, closed = rpCount(t, w, "count", filter)
		require.Empty(t, closed)
		evs, closed, eose = w.Req("search", map[string]any{"search": "zebra", "#h": []string{ch}})
		require.True(t, eose, closed)
		search = rpIdsOf(evs)
		query = rpIdsOf(queryEvents(t, r, owner, `[{"#h":["`+ch+`"],"kinds":[9]}]`))
		for _, ev := range queryEvents(t, r, owner, `[{"top_level":true,"#h":["`+ch+`"],"kinds":[9],"limit":50}]`) {
			if ev.Kind == 9 {
				window = append(window, ev.ID)
			}
		}
		return req, search, query, window, count
	}
	req, search, query, window, count := reads()
	both := []string{soon.ID, keep.ID}
	require.ElementsMatch(t, both, req)
	require.ElementsMatch(t, both, search)
	require.ElementsMatch(t, both, query)
	require.ElementsMatch(t, both, window)
	require.Equal(t, int64(2), count)

	time.Sleep(time.Until(time.Unix(exp, 0).Add(50 * time.Millisecond))) // the clock, not background work
	req, search, query, window, count = reads()
	require.Equal(t, []string{keep.ID}, req)
	require.Equal(t, []string{keep.ID}, search)
	require.Equal(t, []string{keep.ID}, query)
	require.Equal(t, []string{keep.ID}, window)
	require.Equal(t, int64(1), count, "COUNT agrees with REQ")
	require.Equal(t, 1, countRows(t, r, `SELECT count(*) FROM events WHERE id = $1`, idBytes(t, soon.ID)),
		"the row is still stored: the reads skip it on their own")
	ok, msg := w.Publish(owner.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("e", soon.ID, "", "reply")))
	require.False(t, ok)
	require.Equal(t, "invalid: reply parent not found", msg, "a write does not find the expired event either")
	ok, msg = w.Publish(owner.Signed(t, 7, eventtest.Channel(ch), eventtest.Tag("e", soon.ID), eventtest.Content("+")))
	require.False(t, ok)
	require.Equal(t, "invalid: reaction target event not found", msg)

	w.C.CloseNow() // no close handshake to wait for at shutdown
	live.C.CloseNow()
	pool := e.stop(t) // chains every pending intent
	job := maintenance.NewExpiredPurge(maintenance.ExpiredPurgeConfig{Pool: pool, Interval: 10 * time.Millisecond})
	job.TestSignals.Init()
	require.NoError(t, job.Start(context.Background()))
	require.Equal(t, int64(1), job.TestSignals.Purged.WaitOrTimeout(t))
	job.Stop()
	var left int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE id = $1`, idBytes(t, soon.ID)).Scan(&left))
	require.Zero(t, left)
	entries := auEntries(t, pool, e.cid)
	require.Len(t, auFind(entries, "event_created", soon.ID), 1, "the chain keeps the entry of the purged event")
	auVerified(t, pool, e.cid)
}

func hexIDs(t *testing.T, ids []string) [][]byte {
	t.Helper()
	out := make([][]byte, len(ids))
	for i, id := range ids {
		b, err := hex.DecodeString(id)
		require.NoError(t, err)
		out[i] = b
	}
	return out
}
