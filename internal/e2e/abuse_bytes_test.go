package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
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
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/wire"
)

// The byte budgets of the relay these tests run: small, so a handful of
// events reach them.
const (
	abMaxEvent = 16384
	abReadMax  = 4 * abMaxEvent
)

// abEventOfSize signs a kind 1 event by k whose serialized JSON is exactly
// size bytes, padded in a tag: tags count against the event size.
func abEventOfSize(t *testing.T, k eventtest.Key, size int, at int64) event.Event {
	t.Helper()
	base := k.Signed(t, event.KindNote, eventtest.Content("big"), eventtest.At(at), eventtest.Tag("t", ""))
	ev := k.Signed(t, event.KindNote, eventtest.Content("big"), eventtest.At(at),
		eventtest.Tag("t", strings.Repeat("a", size-base.JSONSize())))
	require.Equal(t, size, ev.JSONSize())
	require.Len(t, ev.AppendJSON(nil), size)
	return ev
}

// abIDs returns the events' ids.
func abIDs(evs []event.Event) []string {
	ids := make([]string, len(evs))
	for i := range evs {
		ids[i] = evs[i].ID
	}
	return ids
}

// abQuery posts filters to /query as k and returns the events of the
// 200 answer and the answer's length.
func abQuery(t *testing.T, r *relaytest.Relay, k eventtest.Key, filters ...any) ([]event.Event, int) {
	t.Helper()
	body, err := json.Marshal(filters)
	require.NoError(t, err)
	status, resp := r.HTTP(t, "", http.MethodPost, "/query", &k, body)
	require.Equal(t, http.StatusOK, status, string(resp))
	var raws []json.RawMessage
	require.NoError(t, json.Unmarshal(resp, &raws))
	evs := make([]event.Event, len(raws))
	for i, raw := range raws {
		evs[i], err = event.Parse(raw)
		require.NoError(t, err)
	}
	return evs, len(resp)
}

// abBytes is the events' serialized size in all.
func abBytes(evs []event.Event) int {
	n := 0
	for i := range evs {
		n += evs[i].JSONSize()
	}
	return n
}

// TestAbuseEventSize covers BUZZ_MAX_EVENT_BYTES on both doors: an event
// whose JSON (a tag pads it: tags count) is exactly the maximum is
// accepted, one byte more is refused with the same text on each door and
// not stored, a POST /events body over twice the maximum is a 413 with
// that text, and the WebSocket stays usable after the refusal.
func TestAbuseEventSize(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{"BUZZ_MAX_EVENT_BYTES": strconv.Itoa(abMaxEvent)})
	now := time.Now().Unix()
	over := wire.EventTooLarge(abMaxEvent+1, abMaxEvent)
	require.Equal(t, "invalid: event too large (16385 bytes, maximum 16384)", over)

	t.Run("WebSocket", func(t *testing.T) {
		t.Parallel()
		k := eventtest.NewKey()
		w := r.Dial(t, "")
		w.Auth(k)
		at := abEventOfSize(t, k, abMaxEvent, now)
		w.MustPublish(at)
		big := abEventOfSize(t, k, abMaxEvent+1, now-1)
		ok, msg := w.Publish(big)
		require.False(t, ok)
		require.Equal(t, over, msg)
		probe := k.Signed(t, event.KindNote, eventtest.Content("still usable"))
		w.MustPublish(probe)
		got, closed, eose := w.Req("mine", map[string]any{"authors": []string{k.PubKey}, "kinds": []int{event.KindNote}})
		require.True(t, eose, closed)
		require.ElementsMatch(t, []string{at.ID, probe.ID}, abIDs(got), "the refused event is not stored")
	})

	t.Run("HTTP", func(t *testing.T) {
		t.Parallel()
		k := eventtest.NewKey()
		at := abEventOfSize(t, k, abMaxEvent, now)
		status, body := r.PostEvent(t, "", k, at)
		require.Equal(t, http.StatusOK, status, body)
		require.JSONEq(t, `{"event_id":"`+at.ID+`","accepted":true,"message":""}`, body)
		big := abEventOfSize(t, k, abMaxEvent+1, now-1)
		status, body = r.PostEvent(t, "", k, big)
		require.Equal(t, http.StatusBadRequest, status)
		require.JSONEq(t, `{"error":"`+over+`"}`, body)

		huge := abEventOfSize(t, k, 2*abMaxEvent+1, now-2)
		raw := huge.AppendJSON(nil)
		status, resp := r.HTTP(t, "", http.MethodPost, "/events", &k, raw)
		require.Equal(t, http.StatusRequestEntityTooLarge, status)
		require.JSONEq(t, `{"error":"`+wire.EventTooLarge(len(raw), abMaxEvent)+`"}`, string(resp))

		got, _ := abQuery(t, r, k, map[string]any{"authors": []string{k.PubKey}, "kinds": []int{event.KindNote}})
		require.Equal(t, []string{at.ID}, abIDs(got), "only the event at the maximum is stored")
	})
}

// TestAbuseReadBudget covers BUZZ_READ_MAX_BYTES: an attacker stores
// events of the largest size; a REQ's history and a /query answer stop at
// a whole event before the budget, newest first, and end normally (EOSE,
// a complete array); the budget spans all filters of a request; and a
// reader that pages on with until gets every stored event once.
func TestAbuseReadBudget(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_MAX_EVENT_BYTES": strconv.Itoa(abMaxEvent),
		"BUZZ_READ_MAX_BYTES":  strconv.Itoa(abReadMax),
	})
	attacker := eventtest.NewKey()
	aw := r.Dial(t, "")
	aw.Auth(attacker)
	now := time.Now().Unix()
	// Three full events, then two halves and a half and one byte, oldest
	// last: the five newest total exactly the budget.
	var full []event.Event
	for i := range 3 {
		full = append(full, abEventOfSize(t, attacker, abMaxEvent, now-int64(10*(i+1))))
	}
	half := abEventOfSize(t, attacker, abMaxEvent/2, now-40)
	lastHalf := abEventOfSize(t, attacker, abMaxEvent/2, now-50)
	overByOne := abEventOfSize(t, attacker, abMaxEvent/2+1, now-50)
	// Twenty more full events, one a second, older still, to page through.
	var flood []event.Event
	for i := range 20 {
		flood = append(flood, abEventOfSize(t, attacker, abMaxEvent, now-100-int64(i)))
	}
	for _, ev := range append(append(full, half, lastHalf, overByOne), flood...) {
		aw.MustPublish(ev)
	}
	exact := append(append([]event.Event{}, full...), half, lastHalf)
	require.Equal(t, abReadMax, abBytes(exact))
	oneOver := append(append([]event.Event{}, full...), half, overByOne)
	require.Equal(t, abReadMax+1, abBytes(oneOver))

	reader := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(reader)

	t.Run("REQExactBudgetWhole", func(t *testing.T) {
		got, closed, eose := w.Req("exact", map[string]any{"ids": abIDs(exact)})
		require.True(t, eose, closed)
		require.Equal(t, abIDs(exact), abIDs(got))
	})

	t.Run("REQOneByteOverStopsBeforeLast", func(t *testing.T) {
		got, closed, eose := w.Req("over", map[string]any{"ids": abIDs(oneOver)})
		require.True(t, eose, closed)
		require.Equal(t, abIDs(oneOver[:4]), abIDs(got))
	})

	t.Run("QueryExactBudgetWhole", func(t *testing.T) {
		got, n := abQuery(t, r, reader, map[string]any{"ids": abIDs(exact)})
		require.Equal(t, abIDs(exact), abIDs(got))
		require.Equal(t, abReadMax+len(exact)+1, n, "the array holds the events, commas and brackets")
	})

	t.Run("QueryOneByteOverStopsBeforeLast", func(t *testing.T) {
		got, _ := abQuery(t, r, reader, map[string]any{"ids": abIDs(oneOver)})
		require.Equal(t, abIDs(oneOver[:4]), abIDs(got))
	})

	t.Run("BudgetSpansFilters", func(t *testing.T) {
		filters := []any{map[string]any{"ids": abIDs(flood[:3])}, map[string]any{"ids": abIDs(flood[3:6])}}
		got, closed, eose := w.Req("two", filters...)
		require.True(t, eose, closed)
		require.Equal(t, abIDs(flood[:4]), abIDs(got))
		qgot, _ := abQuery(t, r, reader, filters...)
		require.Equal(t, abIDs(flood[:4]), abIDs(qgot))
	})

	t.Run("TenFiltersInParallel", func(t *testing.T) {
		filters := make([]any, 10)
		for i := range filters {
			filters[i] = map[string]any{"ids": []string{flood[i].ID}}
		}
		for round := range 3 {
			got, closed, eose := w.Req("ten"+strconv.Itoa(round), filters...)
			require.True(t, eose, closed)
			require.Equal(t, abIDs(flood[:4]), abIDs(got), "filter order, cut at the budget")
		}
		qgot, _ := abQuery(t, r, reader, filters...)
		require.Equal(t, abIDs(flood[:4]), abIDs(qgot))
	})

	t.Run("PagingLosesNothing", func(t *testing.T) {
		want := append(append(append([]event.Event{}, full...), half), flood...)
		want = append(want[:4], append([]event.Event{lastHalf, overByOne}, want[4:]...)...)
		var seen []event.Event
		var qseen []event.Event
		until := now
		for pages := 0; ; pages++ {
			require.Less(t, pages, 20, "paging ends")
			filter := map[string]any{"authors": []string{attacker.PubKey}, "kinds": []int{event.KindNote}, "until": until}
			got, closed, eose := w.Req("page"+strconv.Itoa(pages), filter)
			require.True(t, eose, closed)
			require.LessOrEqual(t, abBytes(got), abReadMax)
			qgot, _ := abQuery(t, r, reader, filter)
			require.Equal(t, abIDs(got), abIDs(qgot), "both doors page alike")
			if len(got) == 0 {
				break
			}
			fresh := 0
			for _, ev := range got {
				if !abHas(seen, ev.ID) {
					seen = append(seen, ev)
					fresh++
				}
			}
			qseen = append(qseen, qgot...)
			// NIP-01 until is inclusive: the next page starts at the oldest
			// second received, and a page that brings nothing new moves
			// below it.
			until = got[len(got)-1].CreatedAt
			if fresh == 0 {
				until--
			}
		}
		require.ElementsMatch(t, abIDs(want), abIDs(seen), "every stored event, once")
		require.NotEmpty(t, qseen)
	})
}

func abHas(evs []event.Event, id string) bool {
	for i := range evs {
		if evs[i].ID == id {
			return true
		}
	}
	return false
}

// TestAbuseSendQueueBytes covers BUZZ_SEND_BUFFER_BYTES: a client that
// subscribes to an attacker's largest live events and never reads is
// closed as a slow client once its queue holds the byte budget, long
// before the message count (set out of reach here) would trip, while an
// honest subscriber on another connection receives every event and every
// acknowledged event is stored.
func TestAbuseSendQueueBytes(t *testing.T) {
	t.Parallel()
	const maxEvent = 131072
	r := relaytest.Start(t, map[string]string{
		"BUZZ_MAX_EVENT_BYTES":   strconv.Itoa(maxEvent),
		"BUZZ_READ_MAX_BYTES":    strconv.Itoa(maxEvent),
		"BUZZ_SEND_BUFFER_BYTES": strconv.Itoa(2 * maxEvent),
		"BUZZ_SEND_BUFFER":       "1000000",
	})
	attacker := eventtest.NewKey()
	filter := map[string]any{"authors": []string{attacker.PubKey}, "kinds": []int{event.KindNote}}

	slow := r.Dial(t, "")
	slow.Auth(eventtest.NewKey())
	_, closed, eose := slow.Req("flood", filter)
	require.True(t, eose, closed)

	honest := r.Dial(t, "")
	honest.Auth(eventtest.NewKey())
	_, closed, eose = honest.Req("flood", filter)
	require.True(t, eose, closed)
	var (
		mu       sync.Mutex
		received []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := honest.NextErr(30 * time.Second)
			if err != nil {
				return
			}
			if msg[0] == "EVENT" {
				mu.Lock()
				received = append(received, msg[2].(map[string]any)["id"].(string))
				mu.Unlock()
			}
		}
	}()

	aw := r.Dial(t, "")
	aw.Auth(attacker)
	now := time.Now().Unix()
	var acked []string
	for i := 0; i < 1000 && r.Metric(t, "buzz_ws_backpressure_disconnects_total") == 0; i++ {
		ev := abEventOfSize(t, attacker, maxEvent, now-int64(i%600))
		aw.MustPublish(ev)
		acked = append(acked, ev.ID)
	}
	require.Equal(t, 1.0, r.Metric(t, "buzz_ws_backpressure_disconnects_total"), "the non-reader is closed within %d events", len(acked))
	// Well below what a 1,000,000-message queue would hold: bytes tripped it.
	require.Less(t, len(acked), 1000)

	// The non-reader starts reading now. The relay's close frame waits
	// behind what the socket already holds, and a client that reads nothing
	// for longer than the relay's write timeout can be dropped without it;
	// one that reads again soon gets the queued events, then the reason.
	slowEnd := make(chan error, 1)
	go func() {
		for {
			if _, err := slow.NextErr(30 * time.Second); err != nil {
				slowEnd <- err
				return
			}
		}
	}()

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) == len(acked)
	}, 30*time.Second, 10*time.Millisecond, "the honest subscriber catches up")
	mu.Lock()
	require.Equal(t, acked, received, "the honest subscriber gets every event, in order")
	mu.Unlock()

	err := <-slowEnd
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%v", err)
	require.Contains(t, err.Error(), "slow client")
	var stored int
	require.NoError(t, r.App.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM events WHERE pubkey = decode($1, 'hex')`, attacker.PubKey).Scan(&stored))
	require.Equal(t, len(acked), stored, "nothing acknowledged is lost")
	honest.C.CloseNow()
	<-done
}

// TestAbuseWindowBudget covers BUZZ_READ_MAX_BYTES on a NIP-CW channel
// window over /query: an attacker posts the largest messages into an
// open channel; each page stays within the budget, ends early with
// relay-signed bounds that say there is more from exactly the last
// message included, and a reader paging with next_cursor gets every
// message once.
func TestAbuseWindowBudget(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, map[string]string{
		"BUZZ_MAX_EVENT_BYTES": strconv.Itoa(abMaxEvent),
		"BUZZ_READ_MAX_BYTES":  strconv.Itoa(abReadMax),
	})
	attacker := eventtest.NewKey()
	w := r.Dial(t, "")
	w.Auth(attacker)
	ch := uuid.NewString()
	w.MustPublish(attacker.Signed(t, event.KindCreateGroup, eventtest.Tag("h", ch), eventtest.Tag("name", "flood")))
	now := time.Now().Unix()
	var posted []string // newest first
	for i := range 10 {
		base := attacker.Signed(t, event.KindStreamMessage, eventtest.Content("m"), eventtest.At(now-int64(i)), eventtest.Tag("h", ch), eventtest.Tag("t", ""))
		ev := attacker.Signed(t, event.KindStreamMessage, eventtest.Content("m"), eventtest.At(now-int64(i)), eventtest.Tag("h", ch),
			eventtest.Tag("t", strings.Repeat("w", abMaxEvent-base.JSONSize())))
		require.Equal(t, abMaxEvent, ev.JSONSize())
		w.MustPublish(ev)
		posted = append(posted, ev.ID)
	}

	reader := eventtest.NewKey()
	var got []string
	window := map[string]any{"top_level": true, "#h": []string{ch}, "kinds": []int{event.KindStreamMessage}, "limit": 10}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "paging ends")
		evs, n := abQuery(t, r, reader, window)
		require.NotEmpty(t, evs)
		bounds := evs[len(evs)-1]
		require.Equal(t, 39006, bounds.Kind)
		rows := evs[:len(evs)-1]
		require.LessOrEqual(t, abBytes(rows), abReadMax)
		require.LessOrEqual(t, n, abReadMax+bounds.JSONSize()+len(evs)+1, "rows, bounds, commas and brackets")
		var b struct {
			HasMore    bool `json:"has_more"`
			NextCursor *struct {
				CreatedAt int64  `json:"created_at"`
				ID        string `json:"id"`
			} `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal([]byte(bounds.Content), &b))
		got = append(got, abIDs(rows)...)
		if !b.HasMore {
			require.Nil(t, b.NextCursor)
			break
		}
		require.Len(t, rows, 4, "four of the largest messages fill the budget")
		require.Equal(t, rows[len(rows)-1].ID, b.NextCursor.ID, "more from exactly the last message included")
		window["until"], window["before_id"] = b.NextCursor.CreatedAt, b.NextCursor.ID
	}
	require.Equal(t, posted, got, "every message once, in order")
}
