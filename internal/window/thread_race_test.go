package window_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/window"
)

// thread stores a root in ch with replies and reactions enough for a
// closure of a few pages, and returns its request.
func (w *world) thread(t *testing.T, ch string, replies, reactions int) window.ThreadRequest {
	t.Helper()
	base := now()
	root := w.root(t, ch, base)
	var evs []event.Event
	for i := range replies {
		ev := w.owner.Signed(t, event.KindStreamMessage, replyOpts(ch, root, root, base+1+int64(i), "reply")...)
		w.storeReply(t, ch, root, root, 1, ev)
		evs = append(evs, ev)
	}
	var aux []event.Event
	for i := range reactions {
		target := evs[i%len(evs)]
		aux = append(aux, w.owner.Signed(t, event.KindReaction, eventtest.Channel(ch), eventtest.At(base+int64(i%500)),
			eventtest.Content(strings.Repeat("+", 1+i%7)), eventtest.Tag("e", target.ID)))
	}
	for chunk := range slicesChunk(aux, 500) {
		w.store(t, chunk...)
	}
	r := req(ch, root)
	r.IncludeAux = true
	return r
}

// Batches of two to four windows, over one or two private
// channels and an open one, race a second client that removes the reader
// from one channel and adds it back. Each answer is a clean 503 or a
// complete 200: one 39007 per served window, and the revoked channel's
// windows all served or none. A batch sent after the removal committed
// has nothing of that channel.
func TestRevocationRace(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	revoked, kept := w.private(t, reader), w.private(t, reader)
	open := w.channel(t)
	rv := w.thread(t, revoked, 20, 200)
	kp := w.thread(t, kept, 20, 100)
	op := w.thread(t, open, 20, 100)
	batches := [][]window.ThreadRequest{{rv, kp}, {rv, op, kp}, {rv, rv, kp, op}, {kp, rv}}

	admin := w.r.Dial(t, "")
	admin.Auth(w.owner)
	outcomes := map[string]int{}
	for i := range 32 {
		reqs := batches[i%len(batches)]
		filters := make([]string, len(reqs))
		for j, r := range reqs {
			filters[j] = filter(r)
		}
		answers := make(chan answer, 1)
		go func() { answers <- w.query(t, reader, filters...) }()
		// The removal lands somewhere in the batch, or after it.
		time.Sleep(time.Duration(i%8) * 40 * time.Millisecond)
		w.remove(t, admin, revoked, reader)
		a := <-answers
		switch a.status {
		case http.StatusServiceUnavailable:
			a.requireError(t, http.StatusServiceUnavailable, "thread authorization changed; retry query")
			outcomes["503"]++
		case http.StatusOK:
			var served []window.ThreadRequest
			for _, r := range reqs {
				if r.Channel != revoked || hasBounds(a, r.Channel) {
					served = append(served, r)
				}
			}
			w.windows(t, a, reader, served...)
			if len(served) == len(reqs) {
				outcomes["200 before the removal"]++
			} else {
				outcomes["200 after the removal"]++
			}
		default:
			require.Failf(t, "unexpected answer", "%d %s", a.status, a.body)
		}
		// Sent after the removal committed: nothing of that channel.
		after := w.query(t, reader, filters...)
		for _, ev := range after.events {
			require.NotEqual(t, revoked, channelOf(ev), "a row of the revoked channel")
		}
		w.put(t, admin, revoked, reader)
	}
	t.Logf("outcomes: %v", outcomes)
	require.Positive(t, outcomes["503"], "the race was run")
	require.Equal(t, float64(outcomes["503"]), w.r.Metric(t, "buzz_thread_window_authorization_changed_total"))
}

func hasBounds(a answer, channel string) bool {
	for _, ev := range a.events {
		if ev.Kind == 39007 && ev.Tags.HasValue("h", channel) {
			return true
		}
	}
	return false
}

func channelOf(ev event.Event) string {
	if hs := ev.Tags.Values("h"); len(hs) > 0 {
		return hs[0]
	}
	return ""
}

// The grant half: a channel granted to the reader while a
// window's closure runs fails the batch with 503, though the granted
// channel is not one of its windows. The grant is made by a second client
// through ingest when the test's pool sees the first aux scan.
func TestGrantDuringClosure(t *testing.T) {
	t.Parallel()
	w := setup(t)
	reader := eventtest.NewKey()
	open := w.channel(t)
	later := w.private(t)
	r := w.thread(t, open, 3, 10)
	admin := w.r.Dial(t, "")
	admin.Auth(w.owner)

	var once sync.Once
	ew := w.newEngine(t, 2, func(sql string) {
		if strings.Contains(sql, "jsonb_array_elements") {
			once.Do(func() { w.put(t, admin, later, reader) })
		}
	})
	_, err := ew.run(reader, r)
	requireFails(t, err, http.StatusServiceUnavailable, "thread authorization changed; retry query")
	require.Equal(t, 1.0, testutil.ToFloat64(ew.m.Window.AuthorizationChanged))
	require.Equal(t, 1.0, testutil.ToFloat64(ew.m.Window.Requests.WithLabelValues("thread", "unavailable")))
	items, err := ew.run(reader, r)
	require.NoError(t, err, "the next batch sees the new set throughout")
	require.Equal(t, 39007, items[len(items)-1].Event.Kind)
}
