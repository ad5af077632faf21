package window_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/fixture"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/standbytest"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
)

// TestReplicaCursorPage covers docs/NIP-CW.md §7 on a real streaming standby: a
// channel cursor page below the proved bound is read from the replica's
// snapshot, aux and summaries included; a head page and a cursor page
// above the bound read from the writer; each decision is counted with its
// reason.
func TestReplicaCursorPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := standbytest.Start(t)
	writer, err := pg.Open(ctx, pair.WriterURL, pg.PoolConfig{MaxConns: 6, CreatedAtFloor: replica.Floor})
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	// Unarmed, as an import: rows older than the floor.
	plain, err := pg.Open(ctx, pair.WriterURL, pg.PoolConfig{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(plain.Close)
	rp, err := replica.OpenPool(ctx, pair.ReplicaURL, 4, nil)
	require.NoError(t, err)
	t.Cleanup(rp.Close)

	author, reader := eventtest.NewKey(), eventtest.NewKey()
	cid := fixture.Community(t, plain).ID
	ch := fixture.Channel(t, plain, cid, author)
	old := time.Now().Unix() - 7200
	post := func(at int64, opts ...eventtest.Option) event.Event {
		return fixture.Event(t, plain, cid, author, event.KindStreamMessage,
			append([]eventtest.Option{eventtest.Channel(ch), eventtest.At(at)}, opts...)...)
	}
	r2 := post(old + 1)
	r1 := post(old + 2)
	reply := post(old+3, eventtest.Tag("e", r2.ID, "", "root"), eventtest.Tag("e", r2.ID, "", "reply"))
	require.NoError(t, store.New(plain).ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: cid, Channel: ch,
		EventID: reply.ID, CreatedAt: reply.CreatedAt, ParentID: r2.ID, ParentCreatedAt: r2.CreatedAt,
		RootID: r2.ID, RootCreatedAt: r2.CreatedAt, Depth: 1}))
	react := fixture.Event(t, plain, cid, author, event.KindReaction, eventtest.Channel(ch), eventtest.Content("+"),
		eventtest.Tag("e", r1.ID), eventtest.At(old+4))

	m := metrics.New(prometheus.NewRegistry())
	rep := replica.New(replica.Config{Writer: writer, Pool: rp, Metrics: m, Interval: 20 * time.Millisecond})
	require.NoError(t, rep.Verify(ctx))
	rep.TestSignals.Init()
	require.NoError(t, rep.Start(ctx))
	t.Cleanup(rep.Stop)
	rep.TestSignals.Probed.WaitOrTimeout(t)
	pair.WaitReplayed(t)

	key := event.GenerateKey()
	engine := window.New(window.Config{Pool: writer, Replica: rep, Key: key, Metrics: m})
	sc := window.Scope{CommunityID: cid, Reader: reader.PubKey, Accessible: func(c string) bool { return c == ch }}
	serve := func(r window.ChannelRequest) []string {
		t.Helper()
		items, err := engine.Channel(ctx, sc, r)
		require.NoError(t, err)
		var out []string
		for _, it := range items {
			if it.Event.Kind == 39005 || it.Event.Kind == 39006 {
				require.Equal(t, event.PubKey(key), it.Event.PubKey)
				out = append(out, it.Event.Tags[0][1]+"@"+itoa64(int64(it.Event.Kind)))
				continue
			}
			out = append(out, it.Event.ID)
		}
		return out
	}
	decided := func(path, route, reason string) float64 {
		return testutil.ToFloat64(m.Window.RouteDecision.WithLabelValues(path, route, reason))
	}

	// An import the paused standby never sees: a page that holds it was
	// read on the writer, one that lacks it on the replica.
	pair.PauseReplay(t)
	t.Cleanup(func() { pair.ResumeReplay(t) })
	imported := post(old + 5)
	// An aux event and a reply the standby lacks too: the replica's page
	// has neither the reaction nor a summary of r1.
	fixture.Event(t, plain, cid, author, event.KindReaction, eventtest.Channel(ch), eventtest.Content("+"),
		eventtest.Tag("e", r1.ID), eventtest.At(old+6))
	late := post(old+7, eventtest.Tag("e", r1.ID, "", "root"), eventtest.Tag("e", r1.ID, "", "reply"))
	require.NoError(t, store.New(plain).ThreadReplyAdd(ctx, store.ThreadReplyParams{CommunityID: cid, Channel: ch,
		EventID: late.ID, CreatedAt: late.CreatedAt, ParentID: r1.ID, ParentCreatedAt: r1.CreatedAt,
		RootID: r1.ID, RootCreatedAt: r1.CreatedAt, Depth: 1}))
	zero := "0000000000000000000000000000000000000000000000000000000000000000"
	cursor := &window.Cursor{CreatedAt: old + 10, ID: zero}
	wantReplica := []string{r1.ID, r2.ID, react.ID, r2.ID + "@39005", ch + ":" + itoa64(old+10) + ":" + zero + "@39006"}

	t.Run("CursorPageOnTheReplica", func(t *testing.T) {
		reads := testutil.ToFloat64(m.Replica.Reads)
		got := serve(window.ChannelRequest{Channel: ch, Limit: 10, Kinds: []int{9}, Cursor: cursor, IncludeAux: true, IncludeSummaries: true})
		require.Equal(t, wantReplica, got, "rows, aux and summaries from the replica's snapshot, without the import")
		require.Equal(t, reads+1, testutil.ToFloat64(m.Replica.Reads))
		require.Equal(t, 1.0, decided("channel_cursor", "replica", "proved"))
	})

	t.Run("HeadPageOnTheWriter", func(t *testing.T) {
		got := serve(window.ChannelRequest{Channel: ch, Limit: 10, Kinds: []int{9}})
		require.Equal(t, []string{imported.ID, r1.ID, r2.ID, ch + ":head@39006"}, got)
		require.Equal(t, 1.0, decided("channel_head", "writer", "head_page"))
	})

	t.Run("RecentCursorOnTheWriter", func(t *testing.T) {
		got := serve(window.ChannelRequest{Channel: ch, Limit: 10, Kinds: []int{9}, Cursor: &window.Cursor{CreatedAt: time.Now().Unix(), ID: zero}})
		require.Equal(t, []string{imported.ID, r1.ID, r2.ID}, got[:3])
		require.Equal(t, 1.0, decided("channel_cursor", "writer", "bound"))
		got = serve(window.ChannelRequest{Channel: ch, Limit: 10, Kinds: []int{9}, IncludeAux: true, IncludeSummaries: true,
			Cursor: &window.Cursor{CreatedAt: time.Now().Unix(), ID: zero}})
		require.Len(t, got, 3+2+2+1, "the writer has both reactions and both summaries")
	})

	t.Run("NoReplica", func(t *testing.T) {
		m := metrics.New(prometheus.NewRegistry())
		e := window.New(window.Config{Pool: writer, Key: key, Metrics: m, NoReplicaReason: "floor_unverified"})
		items, err := e.Channel(ctx, sc, window.ChannelRequest{Channel: ch, Limit: 10, Kinds: []int{9}, Cursor: cursor})
		require.NoError(t, err)
		require.Equal(t, imported.ID, items[0].Event.ID, "the writer has the import")
		require.Equal(t, 1.0, testutil.ToFloat64(m.Window.RouteDecision.WithLabelValues("channel_cursor", "writer", "floor_unverified")))
		require.Equal(t, 1.0, testutil.ToFloat64(m.Window.Requests.WithLabelValues("channel", "ok")))
	})
	require.Zero(t, testutil.ToFloat64(m.Replica.Degraded))
}
