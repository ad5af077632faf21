package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/standbytest"
)

// replicaReads is buzz_db_replica_reads_total on p.
func (p *relayProc) replicaReads() float64 { return p.metric("buzz_db_replica_reads_total") }

// countOf sends a COUNT and returns its count.
func (w *peer) countOf(sub string, filter any) float64 {
	w.t.Helper()
	w.send("COUNT", sub, filter)
	f := w.take(frameWait, "COUNT of "+sub, func(f []any) bool { return len(f) == 3 && f[0] == "COUNT" && f[1] == sub })
	return f[2].(map[string]any)["count"].(float64)
}

// The read replica (docs/PROTOCOL.md §16.6) with two processes in front of one writer and one
// real streaming standby: on either process an old #h history page is
// served by the replica; head pages, channel-less filters, COUNT and every
// ingest lookup use the writer; an event published on one process is found
// at once by a REQ on the same or the other process.
func TestScaleOutReplicaRouting(t *testing.T) {
	t.Parallel()
	pair := standbytest.Start(t)
	// The hot window is off: these REQs test the replica route, which a
	// window that holds the page would skip.
	s := startScaleOut(t, map[string]string{"DATABASE_URL": pair.WriterURL, "READ_DATABASE_URL": pair.ReplicaURL,
		"BUZZ_HOT_WINDOW_EVENTS": "0"})
	owner, reader := eventtest.NewKey(), eventtest.NewKey()
	pubA := authedPeer(t, s.a, "owner on A", owner)
	ch := createChannel(t, pubA, owner)

	// History two hours old, written as an import would be (outside ingest,
	// which refuses timestamps that far from now).
	ctx := context.Background()
	plain, err := pg.Open(ctx, pair.WriterURL, pg.PoolConfig{MaxConns: 1})
	require.NoError(t, err)
	old := fixture.Event(t, plain, s.community, owner, event.KindStreamMessage, eventtest.Channel(ch),
		eventtest.At(time.Now().Unix()-7200))
	plain.Close()
	pair.WaitReplayed(t)

	hist := channelFilter(ch)
	hist["until"] = time.Now().Unix() - 3600
	readers := map[string]*peer{"A": authedPeer(t, s.a, "reader on A", reader), "B": authedPeer(t, s.b, "reader on B", reader)}
	procs := map[string]*relayProc{"A": s.a, "B": s.b}
	for name, w := range readers {
		p := procs[name]
		// Until this process's probe has written a heartbeat the replica
		// has replayed, the page is (correctly) doubted and read on the
		// writer; the probe runs every 5 s.
		deadline := time.Now().Add(20 * time.Second)
		for round := 0; ; round++ {
			before := p.replicaReads()
			got, closed := w.req("warm"+strconv.Itoa(round), hist)
			require.Empty(t, closed)
			require.Equal(t, []string{old.ID}, idsOf(got), "%s: the old page, from whichever side", name)
			if p.replicaReads() > before {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s never served the old page from the replica", name)
			time.Sleep(250 * time.Millisecond) // probe interval is 5 s
		}
		before := p.replicaReads()
		got, closed := w.req("h-"+name, hist)
		require.Empty(t, closed)
		require.Equal(t, []string{old.ID}, idsOf(got))
		require.Equal(t, before+1, p.replicaReads(), "%s: an old #h page is a replica read", name)
	}

	t.Run("WriterPaths", func(t *testing.T) {
		before := map[string]float64{"A": s.a.replicaReads(), "B": s.b.replicaReads()}
		for name, w := range readers {
			w.subscribe("head-"+name, channelFilter(ch))
			w.subscribe("nochan-"+name, map[string]any{"kinds": []int{9}, "authors": []string{owner.PubKey}, "until": time.Now().Unix() - 3600})
			require.Equal(t, 1.0, w.countOf("count-"+name, hist), "%s: COUNT of the old page", name)
		}
		// Ingest: a message, a membership change and a reaction, each of
		// which reads channel and membership state.
		msg := message(t, owner, ch, "fresh")
		pubA.mustPublish(msg)
		pubA.mustPublish(addMember(t, owner, ch, reader.PubKey))
		pubB := authedPeer(t, s.b, "owner on B", owner)
		pubB.mustPublish(owner.Signed(t, 7, eventtest.Channel(ch), eventtest.Tag("e", msg.ID), eventtest.Content("+")))
		for name, p := range procs {
			require.Equal(t, before[name], p.replicaReads(), "%s: head pages, channel-less filters, COUNT and ingest use the writer", name)
		}
	})

	t.Run("PublishThenRead", func(t *testing.T) {
		pubs := map[string]*peer{"A": pubA, "B": authedPeer(t, s.b, "publisher on B", owner)}
		for i := range 10 {
			for from, pw := range pubs {
				ev := message(t, owner, ch, "p"+strconv.Itoa(i)+from)
				pw.mustPublish(ev)
				for on, w := range readers {
					sub := "r" + strconv.Itoa(i) + from + on
					got, closed := w.req(sub, map[string]any{"ids": []string{ev.ID}})
					require.Empty(t, closed)
					require.Equal(t, []string{ev.ID}, idsOf(got), "published on %s, read at once on %s", from, on)
					got, _ = w.req(sub+"h", channelFilter(ch))
					require.Contains(t, idsOf(got), ev.ID, "published on %s, in the head page on %s", from, on)
				}
			}
		}
	})
}
