package main

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// answer is what a grouped-ingest publisher heard about one event.
type answer int

const (
	unanswered answer = iota
	okTrue
	okFalse
)

// pipelinedPublisher keeps up to inflight kind 9 events in ch on the wire
// on one authenticated connection, each p-tagging two fresh pubkeys, and
// records every event it sent and the answer it got. It returns when stop
// closes or the connection ends (the kill).
func pipelinedPublisher(t *testing.T, w *wsClient, key eventtest.Key, ch string, inflight int,
	stop <-chan struct{}, mu *sync.Mutex, sent map[string]answer) {
	slots := make(chan struct{}, inflight)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			_, b, err := w.c.Read(context.Background())
			if err != nil {
				return
			}
			var msg []any
			if json.Unmarshal(b, &msg) != nil || len(msg) < 3 || msg[0] != "OK" {
				continue
			}
			id, _ := msg[1].(string)
			a := okFalse
			if msg[2] == true {
				a = okTrue
			}
			mu.Lock()
			sent[id] = a
			mu.Unlock()
			<-slots
		}
	}()
	defer func() { <-readerDone }()
	for i := 0; ; i++ {
		select {
		case <-stop:
			_ = w.c.CloseNow()
			return
		case <-readerDone:
			return
		case slots <- struct{}{}:
		}
		ev := key.Signed(t, 9, eventtest.Channel(ch), eventtest.Content("grouped "+strconv.Itoa(i)),
			eventtest.Tag("p", eventtest.NewKey().PubKey), eventtest.Tag("p", eventtest.NewKey().PubKey))
		mu.Lock()
		sent[ev.ID] = unanswered
		mu.Unlock()
		b, _ := json.Marshal([]any{"EVENT", ev})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := w.c.Write(ctx, websocket.MessageText, b)
		cancel()
		if err != nil {
			_ = w.c.CloseNow()
			return
		}
	}
}

// Group commit crash test: kill -9 while 8 connections each keep 16 events
// in flight (so the group commit holds many events per batch), then check
// the database the dead process left: every event that got OK true is
// stored with its two event_mentions rows and its event_created intent (in
// the outbox or already chained); every other event sent (OK false, or no
// answer) is either all of that or nothing of it, never half. After the
// restart the outbox drains, each OK-true event has exactly one chain
// entry, and `audit verify` passes.
func TestGroupedIngestSurvivesKill(t *testing.T) {
	t.Parallel()
	b := setupAudit(t)
	env := relayEnv(t)
	for k, v := range b.env {
		env[k] = v
	}
	env["BUZZ_DB_POOL_SIZE"] = "10"
	p := startReady(t, env)
	owner := eventtest.NewKey()
	ch := createChannel(t, authedPeer(t, p, "owner", owner), owner)

	var mu sync.Mutex
	sent := map[string]answer{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		key := eventtest.NewKey()
		w := dialWS(t, p, deploymentHost)
		w.auth(key, relayTag)
		wg.Go(func() { pipelinedPublisher(t, w, key, ch, 16, stop, &mu, sent) })
	}
	okCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range sent {
			if a == okTrue {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(time.Minute)
	for okCount() < 1500 {
		select {
		case <-p.done:
			t.Fatal("relay exited")
		case <-time.After(10 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "1,500 OKs within a minute (%d)", okCount())
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	close(stop)
	wg.Wait()

	// What the dead process left, per event: its row, its mentions, its
	// intent or chain entry.
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `SELECT encode(e.id, 'hex'),
			(SELECT count(*) FROM event_mentions m WHERE m.community_id = e.community_id AND m.event_id = e.id),
			(SELECT count(*) FROM audit_outbox o WHERE o.community_id = e.community_id AND o.dedupe_key = 'event_created:' || encode(e.id, 'hex'))
			+ (SELECT count(*) FROM audit_intent_groups g, unnest(g.object_ids) AS o(id) WHERE g.community_id = e.community_id AND o.id = encode(e.id, 'hex'))
			+ (SELECT count(*) FROM audit_log l WHERE l.community_id = e.community_id AND l.action = 'event_created' AND l.object_id = encode(e.id, 'hex'))
		FROM events e WHERE e.kind = 9 AND e.channel_id = $1`, ch)
	require.NoError(t, err)
	stored := map[string][2]int{}
	for rows.Next() {
		var id string
		var side [2]int
		require.NoError(t, rows.Scan(&id, &side[0], &side[1]))
		stored[id] = side
	}
	require.NoError(t, rows.Err())
	var orphans int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM event_mentions m WHERE m.event_kind = 9 AND NOT EXISTS
			(SELECT 1 FROM events e WHERE e.community_id = m.community_id AND e.id = m.event_id))
		+ (SELECT count(*) FROM audit_outbox o WHERE o.action = 'event_created' AND NOT EXISTS
			(SELECT 1 FROM events e WHERE e.community_id = o.community_id AND encode(e.id, 'hex') = o.object_id))
		+ (SELECT count(*) FROM audit_intent_groups g, unnest(g.object_ids) AS o(id) WHERE NOT EXISTS
			(SELECT 1 FROM events e WHERE e.community_id = g.community_id AND encode(e.id, 'hex') = o.id))`).Scan(&orphans))
	require.Zero(t, orphans, "no mention or intent without its event")

	var accepted, refused, unanswer, storedUnanswered int
	for id, a := range sent {
		side, ok := stored[id]
		switch {
		case a == okTrue:
			accepted++
			require.True(t, ok, "OK-true event %s is stored", id)
			require.Equal(t, [2]int{2, 1}, side, "OK-true event %s has its two mentions and its intent", id)
		case ok:
			require.Equal(t, [2]int{2, 1}, side, "event %s (answer %d) is stored whole", id, a)
			storedUnanswered++
		case a == okFalse:
			refused++
		default:
			unanswer++
		}
	}
	for id := range stored {
		_, ok := sent[id]
		require.True(t, ok, "stored event %s was sent by the test", id)
	}
	require.GreaterOrEqual(t, accepted, 1500)
	t.Logf("%d sent, %d OK true, %d OK false, %d unanswered (%d of them stored whole)", len(sent), accepted, refused, unanswer+storedUnanswered, storedUnanswered)

	restarted := startReady(t, env)
	created := auditDrained(t, b.pool, 30*time.Second)
	for id, a := range sent {
		if _, ok := stored[id]; ok || a == okTrue {
			require.Equal(t, 1, created[id], "event %s has one chain entry", id)
		}
	}
	res := runBinary(t, restarted.Env, "audit", "verify", "--community", deploymentHost)
	require.Equal(t, 0, res.Code, res.Stdout)
}
