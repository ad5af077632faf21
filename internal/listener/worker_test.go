package listener_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/listener"
	"github.com/buzz-relay/buzz/internal/notify"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// goldenBody is the body of docs/PROTOCOL.md §15.6 for its fixture values.
func goldenBody() string {
	return `{"v":1,"pubkey":"` + strings.Repeat("ab", 32) + `","community_host":"a.example","event_id":"` +
		strings.Repeat("cd", 32) + `","event_kind":9,"event_created_at":1700000000}`
}

func TestWorkerAccepted(t *testing.T) {
	t.Parallel()

	t.Run("GoldenBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		h := newHook(t, b.relayPub, status(http.StatusNoContent))
		id := b.enqueue(t, row{listener: l, target: strings.Repeat("ab", 32), community: b.community(t, "a.example"),
			eventID: strings.Repeat("cd", 32), kind: 9, createdAt: 1_700_000_000})
		w := b.worker(t, b.pool, map[string]*hook{l: h})

		d := delivered(t, w)
		require.Equal(t, listener.Delivery{ID: id, Listener: l, Attempt: 1, Outcome: "accepted", Status: 204, Applied: true}, d)
		got := h.next(t)
		require.Equal(t, goldenBody(), string(got.body))
		require.Len(t, got.body, 235)
		sum := sha256.Sum256(got.body)
		require.Equal(t, "02cfe6e22e6794de810106745d1cf0c2d9ae53dab933f9e37f156c243fb7da90", hex.EncodeToString(sum[:]))
		require.False(t, b.row(t, id).exists, "delivered: deleted")
		require.Equal(t, 1.0, b.deliveries("accepted"))
		require.Zero(t, b.deliveries("retry")+b.deliveries("failed"))
		require.EqualValues(t, 1, b.postsTimed(t), "the POST was timed")

		idleTurns(t, w, 2)
		require.EqualValues(t, 1, h.count.Load(), "exactly one POST")
		started := b.logLines(t, "operator-listener mention delivery worker started")
		require.Len(t, started, 1)
		require.EqualValues(t, 1, started[0]["listeners"])
	})

	t.Run("StoredMentionEndToEnd", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l1, l2, target := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
		require.NoError(t, store.New(b.pool).ListenerRegister(context.Background(), l1, []string{target}))
		require.NoError(t, store.New(b.pool).ListenerRegister(context.Background(), l2, []string{target}))
		c := fixture.Community(t, b.pool)
		author := eventtest.NewKey()
		ch := fixture.Channel(t, b.pool, c.ID, author)
		ev := author.Signed(t, 9, eventtest.Channel(ch), eventtest.Tag("p", strings.ToUpper(target)), eventtest.Content("secret words"))
		inserted, err := store.New(b.pool).EventInsert(context.Background(), store.EventInsertParams{
			CommunityID: c.ID, Event: &ev, Channel: ch, ListenerTargets: store.MentionTargets(&ev)})
		require.NoError(t, err)
		require.True(t, inserted)
		require.Equal(t, 2, b.count(t, `SELECT count(*) FROM operator_listener_outbox`))

		h1 := newHook(t, b.relayPub, status(http.StatusOK))
		h2 := newHook(t, b.relayPub, status(http.StatusAccepted))
		w := b.worker(t, b.pool, map[string]*hook{l1: h1, l2: h2})
		seen := map[string]string{}
		for range 2 {
			d := delivered(t, w)
			require.Equal(t, "accepted", d.Outcome)
			require.True(t, d.Applied)
			seen[d.Listener] = d.ID
		}
		require.Len(t, seen, 2)
		want := `{"v":1,"pubkey":"` + target + `","community_host":"` + c.Host + `","event_id":"` + ev.ID +
			`","event_kind":9,"event_created_at":` + strconv.FormatInt(ev.CreatedAt, 10) + `}`
		require.Equal(t, want, string(h1.next(t).body))
		require.Equal(t, want, string(h2.next(t).body))
		require.Zero(t, b.count(t, `SELECT count(*) FROM operator_listener_outbox`))
		require.Equal(t, 2.0, b.deliveries("accepted"))
		logs := b.logs.String()
		require.NotContains(t, logs, "secret words")
		require.NotContains(t, logs, h1.srv.URL)
	})
}

func TestWorkerTerminal(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 401, 403, 404, 410} {
		t.Run("Status"+strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			l := eventtest.NewKey().PubKey
			h := newHook(t, b.relayPub, status(code))
			id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
			w := b.worker(t, b.pool, map[string]*hook{l: h})

			d := delivered(t, w)
			require.Equal(t, listener.Delivery{ID: id, Listener: l, Attempt: 1, Outcome: "failed", Status: code,
				Reason: "HTTP " + strconv.Itoa(code), Applied: true}, d)
			require.False(t, b.row(t, id).exists)
			idleTurns(t, w, 2)
			require.EqualValues(t, 1, h.count.Load(), "a terminal answer is never retried")
			require.Equal(t, 1.0, b.deliveries("failed"))
			require.Zero(t, b.deliveries("retry")+b.deliveries("accepted"))
			lines := b.logLines(t, "operator-listener delivery failed permanently")
			require.Len(t, lines, 1)
			require.Equal(t, id, lines[0]["outbox_id"])
			require.Equal(t, l, lines[0]["listener"])
			require.EqualValues(t, 1, lines[0]["attempt"])
			require.EqualValues(t, code, lines[0]["status"])
			require.Equal(t, "HTTP "+strconv.Itoa(code), lines[0]["reason"])
			require.NotContains(t, b.logs.String(), h.srv.URL)
		})
	}

	t.Run("RedirectIsNotFollowed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		target := newHook(t, b.relayPub, status(http.StatusOK))
		h := newHook(t, b.relayPub, func(_ int, w http.ResponseWriter) int {
			w.Header().Set("Location", target.url())
			return http.StatusFound
		})
		id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
		urls := map[string]string{l: h.url()}
		w := listener.NewWorker(listener.Config{Pool: b.pool, Listeners: urls,
			Client: b.client(t, 2*time.Second, h, target), Logger: b.log, Metrics: b.m})
		w.TestSignals.Init()
		require.NoError(t, w.Start(context.Background()))
		t.Cleanup(w.Stop)

		d := delivered(t, w)
		require.Equal(t, "failed", d.Outcome)
		require.Equal(t, http.StatusFound, d.Status)
		require.Equal(t, "HTTP 302", d.Reason)
		require.False(t, b.row(t, id).exists, "terminal: deleted")
		idleTurns(t, w, 2)
		require.EqualValues(t, 1, h.count.Load())
		require.Zero(t, target.count.Load(), "the redirect target is never contacted")
		require.Equal(t, 1.0, b.deliveries("failed"))
		require.Zero(t, b.deliveries("accepted"), "not counted as delivered")
	})
}

func TestWorkerRetry(t *testing.T) {
	t.Parallel()

	t.Run("429Then503", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		h := newHook(t, b.relayPub, func(n int, _ http.ResponseWriter) int {
			if n <= 2 {
				return http.StatusTooManyRequests
			}
			return http.StatusServiceUnavailable
		})
		id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
		w := b.worker(t, b.pool, map[string]*hook{l: h})

		for attempt, code := range []int{429, 429, 503} {
			attempt++
			d := delivered(t, w)
			require.Equal(t, listener.Delivery{ID: id, Listener: l, Attempt: attempt, Outcome: "retry", Status: code,
				Reason: "HTTP " + strconv.Itoa(code), Applied: true}, d)
			r := b.row(t, id)
			require.Equal(t, "pending", r.state)
			require.Equal(t, attempt, r.attempts)
			require.True(t, r.claimNull)
			require.True(t, r.leaseNull)
			want := notify.RetryDelay(attempt)
			require.InDelta(t, want.Seconds(), r.nextIn.Seconds(), 0.75, "attempt %d", attempt)
			require.Equal(t, float64(attempt), b.deliveries("retry"))
			if attempt < 3 {
				b.exec(t, `UPDATE operator_listener_outbox SET next_attempt_at = now() WHERE id = $1`, id)
			}
		}
		require.InDelta(t, 4, b.row(t, id).nextIn.Seconds(), 0.75)
		lines := b.logLines(t, "operator-listener delivery failed; retrying")
		require.Len(t, lines, 3)
		require.Equal(t, "HTTP 503", lines[2]["reason"])
		require.EqualValues(t, 3, lines[2]["attempt"])
		require.Equal(t, id, lines[2]["outbox_id"])
		require.Zero(t, b.deliveries("failed")+b.deliveries("accepted"))
		require.EqualValues(t, 3, h.count.Load())
	})

	t.Run("NineAttemptsThenExhausted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		h := newHook(t, b.relayPub, status(http.StatusServiceUnavailable))
		id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
		w := b.worker(t, b.pool, map[string]*hook{l: h})

		for attempt := 1; attempt < notify.MaxAttempts; attempt++ {
			d := delivered(t, w)
			require.Equal(t, "retry", d.Outcome, "attempt %d", attempt)
			require.Equal(t, attempt, d.Attempt)
			r := b.row(t, id)
			require.Equal(t, attempt, r.attempts)
			require.InDelta(t, float64(int(1)<<(attempt-1)), r.nextIn.Seconds(), 0.75, "attempt %d", attempt)
			b.exec(t, `UPDATE operator_listener_outbox SET next_attempt_at = now() WHERE id = $1`, id)
		}
		d := delivered(t, w)
		require.Equal(t, listener.Delivery{ID: id, Listener: l, Attempt: 9, Outcome: "failed", Status: 503,
			Reason: "retries exhausted: HTTP 503", Applied: true}, d)
		require.False(t, b.row(t, id).exists)
		idleTurns(t, w, 2)
		require.EqualValues(t, 9, h.count.Load(), "at most 9 POSTs")
		require.EqualValues(t, 9, b.postsTimed(t))
		require.Equal(t, 8.0, b.deliveries("retry"))
		require.Equal(t, 1.0, b.deliveries("failed"))
		lines := b.logLines(t, "operator-listener delivery failed permanently")
		require.Len(t, lines, 1)
		require.Equal(t, "retries exhausted: HTTP 503", lines[0]["reason"])
		require.EqualValues(t, 9, lines[0]["attempt"])
	})

	t.Run("TransportTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A listener that accepts TCP connections and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		conns := make(chan net.Conn, 10)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns <- c
			}
		}()
		t.Cleanup(func() {
			_ = ln.Close()
			close(conns)
			for c := range conns {
				_ = c.Close()
			}
		})
		l := eventtest.NewKey().PubKey
		id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
		c := notify.NewClient(300*time.Millisecond, b.relayKey)
		t.Cleanup(c.CloseIdleConnections)
		w := listener.NewWorker(listener.Config{Pool: b.pool, Listeners: map[string]string{l: "https://" + ln.Addr().String() + "/hook"},
			Client: c, Logger: b.log, Metrics: b.m})
		w.TestSignals.Init()
		require.NoError(t, w.Start(context.Background()))
		t.Cleanup(w.Stop)

		d := delivered(t, w)
		require.Equal(t, "retry", d.Outcome)
		require.Zero(t, d.Status)
		require.Contains(t, d.Reason, "Client.Timeout")
		require.Equal(t, 1.0, b.deliveries("retry"))
		r := b.row(t, id)
		require.Equal(t, "pending", r.state)
		require.Equal(t, 1, r.attempts)
		require.NotContains(t, b.logs.String(), ln.Addr().String(), "the reason never carries the URL")
	})
}

func TestWorkerConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := eventtest.NewKey().PubKey
	h := newHook(t, b.relayPub, nil)
	h.answer = func(int, http.ResponseWriter) int {
		// Hold each answer until two requests have been in flight at once
		// (or 1.5 s, inside the client timeout).
		deadline := time.After(1500 * time.Millisecond)
		for h.maxIn.Load() < 2 {
			select {
			case <-deadline:
				return http.StatusOK
			case <-time.After(10 * time.Millisecond):
			}
		}
		return http.StatusOK
	}
	community := b.community(t, fixture.Host())
	for range 10 {
		b.enqueue(t, row{listener: l, community: community})
	}
	w := b.worker(t, b.pool, map[string]*hook{l: h})
	for range 10 {
		require.Equal(t, "accepted", delivered(t, w).Outcome)
	}
	require.GreaterOrEqual(t, h.maxIn.Load(), int64(2), "the ten rows of one claim are delivered concurrently")
	require.Zero(t, b.count(t, `SELECT count(*) FROM operator_listener_outbox`))
}

func TestWorkerStaleClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := eventtest.NewKey().PubKey
	h := newHook(t, b.relayPub, func(int, http.ResponseWriter) int { return http.StatusOK })
	g := newGate(t)
	h.answer = func(int, http.ResponseWriter) int {
		g.hold()
		return http.StatusOK
	}
	id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
	w := b.worker(t, b.pool, map[string]*hook{l: h})
	g.wait(t)
	first := b.row(t, id)
	require.Equal(t, "sending", first.state)

	// The worker's lease runs out while its request is in flight, and
	// another claim takes the row.
	b.exec(t, `UPDATE operator_listener_outbox SET lease_until = now() - interval '1 second' WHERE id = $1`, id)
	now := time.Now()
	taken, err := store.New(b.pool).ListenerClaim(context.Background(), []string{l}, 10, now.Add(-listener.Eligibility), now.Add(listener.Lease))
	require.NoError(t, err)
	require.Len(t, taken, 1)
	require.Equal(t, 2, taken[0].Attempts)
	require.NotEqual(t, first.claimID, taken[0].ClaimID)

	g.release()
	d := delivered(t, w)
	require.Equal(t, "accepted", d.Outcome)
	require.False(t, d.Applied, "the stale completion matched no row")
	r := b.row(t, id)
	require.True(t, r.exists, "the late completion deleted nothing")
	require.Equal(t, "sending", r.state)
	require.Equal(t, taken[0].ClaimID, r.claimID)
	require.Equal(t, 2, r.attempts)
	lines := b.logLines(t, "operator-listener delivery completion lost its claim")
	require.Len(t, lines, 1)
	require.Equal(t, id, lines[0]["outbox_id"])
	require.Equal(t, l, lines[0]["listener"])
	require.EqualValues(t, 1, lines[0]["attempt"])
}

func TestWorkerRouting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, bb, c := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
	community := b.community(t, fixture.Host())
	rowsA := []string{b.enqueue(t, row{listener: a, community: community}), b.enqueue(t, row{listener: a, community: community})}
	rowB := b.enqueue(t, row{listener: bb, community: community})
	rowC := b.enqueue(t, row{listener: c, community: community})
	ha := newHook(t, b.relayPub, status(http.StatusOK))
	hb := newHook(t, b.relayPub, status(http.StatusOK))

	// Two processes: P1 routes A only, P2 routes B only; C is configured
	// nowhere (a retired listener).
	p1 := b.worker(t, b.pool, map[string]*hook{a: ha})
	p2 := b.worker(t, b.pool, map[string]*hook{bb: hb})
	got := map[string]bool{}
	for range 2 {
		d := delivered(t, p1)
		require.Equal(t, a, d.Listener)
		got[d.ID] = true
	}
	require.Equal(t, map[string]bool{rowsA[0]: true, rowsA[1]: true}, got)
	d := delivered(t, p2)
	require.Equal(t, rowB, d.ID)
	idleTurns(t, p1, 3)
	idleTurns(t, p2, 3)
	require.EqualValues(t, 2, ha.count.Load())
	require.EqualValues(t, 1, hb.count.Load())
	r := b.row(t, rowC)
	require.Equal(t, "pending", r.state, "never claimed")
	require.Zero(t, r.attempts)
	require.NotContains(t, b.logs.String(), c, "never logged")

	// Once older than 15 minutes the reaper deletes it.
	b.exec(t, `UPDATE operator_listener_outbox SET created_at = now() - interval '16 minutes' WHERE id = $1`, rowC)
	reaper := listener.NewReaper(listener.ReaperConfig{Pool: b.pool, Logger: b.log, Metrics: b.m})
	reaper.TestSignals.Init()
	require.NoError(t, reaper.Start(context.Background()))
	t.Cleanup(reaper.Stop)
	require.EqualValues(t, 1, reaper.TestSignals.OutboxReaped.WaitOrTimeout(t))
	require.False(t, b.row(t, rowC).exists)
}

func TestWorkerNeverClaims(t *testing.T) {
	t.Parallel()

	t.Run("PastEligibility", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		h := newHook(t, b.relayPub, status(http.StatusOK))
		community := b.community(t, fixture.Host())
		old := b.enqueue(t, row{listener: l, community: community, age: 15*time.Minute + 10*time.Second})
		w := b.worker(t, b.pool, map[string]*hook{l: h})
		idleTurns(t, w, 3)
		require.Zero(t, h.count.Load())
		r := b.row(t, old)
		require.Equal(t, "pending", r.state)
		require.Zero(t, r.attempts)

		fresh := b.enqueue(t, row{listener: l, community: community, age: 14 * time.Minute})
		require.Equal(t, fresh, delivered(t, w).ID, "inside the 15 minutes it is delivered")
		require.True(t, b.row(t, old).exists)
	})

	t.Run("CommunityGone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l, target := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
		require.NoError(t, store.New(b.pool).ListenerRegister(context.Background(), l, []string{target}))
		h := newHook(t, b.relayPub, status(http.StatusOK))
		scratch := b.community(t, fixture.Host())
		orphan := b.enqueue(t, row{listener: l, target: target, community: scratch})
		b.exec(t, `DELETE FROM communities WHERE id = $1`, scratch)
		w := b.worker(t, b.pool, map[string]*hook{l: h})
		idleTurns(t, w, 3)
		require.Zero(t, h.count.Load())
		r := b.row(t, orphan)
		require.Equal(t, "pending", r.state)
		require.Zero(t, r.attempts)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM operator_listener_pubkeys`), "registrations untouched")

		b.exec(t, `UPDATE operator_listener_outbox SET created_at = now() - interval '16 minutes' WHERE id = $1`, orphan)
		reaper := listener.NewReaper(listener.ReaperConfig{Pool: b.pool, Logger: b.log, Metrics: b.m})
		reaper.TestSignals.Init()
		require.NoError(t, reaper.Start(context.Background()))
		t.Cleanup(reaper.Stop)
		require.EqualValues(t, 1, reaper.TestSignals.OutboxReaped.WaitOrTimeout(t))
		require.False(t, b.row(t, orphan).exists)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM operator_listener_pubkeys`))
	})

	t.Run("NoListenerNoStatement", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.enqueue(t, row{listener: eventtest.NewKey().PubKey, community: b.community(t, fixture.Host())})
		w := b.worker(t, b.pool, nil)
		idleTurns(t, w, 2)
		require.Zero(t, b.row(t, id).attempts)
	})
}

func TestWorkerIdleBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := eventtest.NewKey().PubKey
	h := newHook(t, b.relayPub, status(http.StatusOK))
	w := b.worker(t, b.pool, map[string]*hook{l: h})

	// Empty turns: claims at 0, 0.25, 0.75, 1.75 s, then every 2 s.
	start := time.Now()
	claims := 0
	window := time.After(2600 * time.Millisecond)
loop:
	for {
		select {
		case n := <-w.TestSignals.Claimed.WaitC():
			require.Zero(t, n)
			claims++
		case <-window:
			break loop
		}
	}
	require.GreaterOrEqual(t, claims, 3, "%d claims in %s", claims, time.Since(start))
	require.LessOrEqual(t, claims, 5, "%d claims in %s: the pause must double", claims, time.Since(start))

	// Work resets the pause: after the turn with work the next claim runs
	// at once, and the one after it 250 ms later, not 2 s.
	b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
	for n := w.TestSignals.Claimed.WaitOrTimeout(t); n == 0; n = w.TestSignals.Claimed.WaitOrTimeout(t) {
	}
	afterWork := time.Now()
	require.Zero(t, w.TestSignals.Claimed.WaitOrTimeout(t))
	require.Less(t, time.Since(afterWork), 200*time.Millisecond, "a turn with work is followed at once")
	first := time.Now()
	require.Zero(t, w.TestSignals.Claimed.WaitOrTimeout(t))
	require.Less(t, time.Since(first), time.Second, "the pause restarts at 250 ms")
}

func TestWorkerClaimFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := eventtest.NewKey().PubKey
	h := newHook(t, b.relayPub, status(http.StatusOK))
	b.exec(t, `ALTER TABLE operator_listener_outbox RENAME TO operator_listener_outbox_moved`)
	w := b.worker(t, b.pool, map[string]*hook{l: h})
	err := w.TestSignals.ClaimFailed.WaitOrTimeout(t)
	first := time.Now()
	require.ErrorContains(t, err, "claim listener outbox")
	w.TestSignals.ClaimFailed.WaitOrTimeout(t)
	require.GreaterOrEqual(t, time.Since(first), 1500*time.Millisecond, "a failed claim pauses 2 s")
	require.GreaterOrEqual(t, testutil.ToFloat64(b.m.Listener.ClaimErrors), 2.0)
	require.NotEmpty(t, b.logLines(t, "operator-listener delivery claim failed"))

	b.exec(t, `ALTER TABLE operator_listener_outbox_moved RENAME TO operator_listener_outbox`)
	id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
	require.Equal(t, id, delivered(t, w).ID, "the loop goes on once the database answers")
}

func TestWorkerShutdown(t *testing.T) {
	t.Parallel()

	t.Run("InFlightFinishes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		h := newHook(t, b.relayPub, nil)
		g := newGate(t)
		h.answer = func(int, http.ResponseWriter) int {
			g.hold()
			return http.StatusOK
		}
		id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
		w := b.worker(t, b.pool, map[string]*hook{l: h})
		g.wait(t)
		stopped := make(chan struct{})
		go func() {
			w.Stop()
			close(stopped)
		}()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a request was in flight")
		case <-time.After(200 * time.Millisecond):
		}
		g.release()
		<-stopped
		require.False(t, b.row(t, id).exists, "the answer that arrived during shutdown was recorded")
		require.Equal(t, 1.0, b.deliveries("accepted"))
		d := delivered(t, w)
		require.True(t, d.Applied)
	})

	t.Run("CrashLeavesSendingThenRedelivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := eventtest.NewKey().PubKey
		h := newHook(t, b.relayPub, nil)
		g := newGate(t)
		h.answer = func(n int, _ http.ResponseWriter) int {
			if n == 1 {
				g.hold()
			}
			return http.StatusOK
		}
		id := b.enqueue(t, row{listener: l, community: b.community(t, fixture.Host())})
		// The first process has its own pool: closing it is the crash
		// (the answer arrives, nothing can be recorded).
		crashPool, err := pg.Open(context.Background(), b.url, pg.PoolConfig{MaxConns: 4})
		require.NoError(t, err)
		w1 := b.worker(t, crashPool, map[string]*hook{l: h})
		g.wait(t)
		crashPool.Close()
		g.release()
		d := delivered(t, w1)
		require.False(t, d.Applied)
		w1.Stop()
		first := h.next(t)
		r := b.row(t, id)
		require.Equal(t, "sending", r.state, "the row stays sending")
		require.Equal(t, 1, r.attempts)
		require.NotEmpty(t, b.logLines(t, "operator-listener delivery outcome not recorded"))

		// Until the lease passes no claim takes it; then a new process does.
		w2 := b.worker(t, b.pool, map[string]*hook{l: h})
		idleTurns(t, w2, 2)
		require.EqualValues(t, 1, h.count.Load(), "not reclaimed while the lease is active")
		b.exec(t, `UPDATE operator_listener_outbox SET lease_until = now() - interval '1 second' WHERE id = $1`, id)
		d = delivered(t, w2)
		require.Equal(t, listener.Delivery{ID: id, Listener: l, Attempt: 2, Outcome: "accepted", Status: 200, Applied: true}, d)
		require.Equal(t, first.body, h.next(t).body, "the same body a second time: at least once")
		require.False(t, b.row(t, id).exists)
	})
}
