package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/benchload"
	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
	"github.com/buzz-relay/buzz/internal/store"
)

// BenchmarkNegentropy is the NIP-77 figure of docs/PERFORMANCE.md: a
// client holding a community's 100,000 events, less 1 % it lacks and plus
// 1 % the relay lacks, reconciles them over a real socket with go-nostr's
// negentropy (round trips, hex bytes each way, time), then the same
// client re-reads the same set with plain REQs (since the oldest event,
// paged by until, 1,000 a page): round trips, bytes down, time. The
// reconciliation must find exactly the 2 × 1 %, and the re-read every
// event.
//
//	go test -run '^$' -bench Negentropy -benchtime 1x ./internal/e2e
//
// BUZZ_NEG_BENCH_EVENTS changes the relay's set size.
func BenchmarkNegentropy(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("BUZZ_NEG_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		r := relaytest.Start(b, nil)
		cid := communityIDTB(b, r, r.Host)
		author := eventtest.NewKey()
		base := time.Now().Unix() - int64(n) - 3600
		evs := make([]event.Event, n)
		in := make(chan []benchload.Event)
		go func() {
			defer close(in)
			batch := make([]benchload.Event, 0, 1000)
			for i := range evs {
				ev := &evs[i]
				*ev = event.Event{PubKey: author.PubKey, CreatedAt: base + int64(i), Kind: 1, Tags: event.Tags{},
					Content: fmt.Sprintf("negentropy benchmark event %d of %d, about a hundred bytes of text like a chat line", i, n)}
				ev.ID = ev.ComputeID()
				batch = append(batch, benchload.Event{EventInsertParams: store.EventInsertParams{CommunityID: cid, Event: ev}})
				if len(batch) == cap(batch) || i == n-1 {
					in <- batch
					batch = make([]benchload.Event, 0, 1000)
				}
			}
		}()
		loadStart := time.Now()
		res, err := benchload.Load(context.Background(), benchload.Config{Pool: r.App.Pool(), Store: store.New(r.App.Pool()),
			SignFunc: func(ev *event.Event) error { return ev.Sign(author.SK) }}, in)
		require.NoError(b, err)
		require.EqualValues(b, n, res.Events)
		_, err = r.App.Pool().Exec(context.Background(), "ANALYZE events")
		require.NoError(b, err)
		b.Logf("loaded %d events in %s", n, time.Since(loadStart).Round(time.Millisecond))

		// The client lacks every 100th event and holds 1 % the relay never saw.
		var local []negRecord
		var lacks []string
		for i := range evs {
			if i%100 == 0 {
				lacks = append(lacks, evs[i].ID)
				continue
			}
			local = append(local, negRecord{evs[i].ID, evs[i].CreatedAt})
		}
		var only []string
		for i := range n / 100 {
			id := randomID()
			only = append(only, id)
			local = append(local, negRecord{id, base + int64(i*100) + 50})
		}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		c := scConnectTB(b, ctx, "ws://"+r.Host, author)
		start := time.Now()
		o := c.negSyncBench(nostr.Filter{Kinds: []int{1}}, local)
		negTime := time.Since(start)
		require.Equal(b, sortedIDs(lacks), sortedIDs(o.need))
		require.Equal(b, sortedIDs(only), sortedIDs(o.have))
		b.ReportMetric(float64(o.rounds), "neg-round-trips")
		b.ReportMetric(float64(o.up), "neg-bytes-up")
		b.ReportMetric(float64(o.down), "neg-bytes-down")
		b.ReportMetric(float64(negTime.Milliseconds()), "neg-ms")

		start = time.Now()
		pages, down, got := c.sinceReread(base, n)
		reTime := time.Since(start)
		require.Equal(b, n, got)
		b.ReportMetric(float64(pages), "since-round-trips")
		b.ReportMetric(float64(down), "since-bytes-down")
		b.ReportMetric(float64(reTime.Milliseconds()), "since-ms")
		cancel()
		r.Stop()
	}
}

func communityIDTB(tb testing.TB, r *relaytest.Relay, host string) string {
	tb.Helper()
	c, err := r.App.Store().CommunityByHost(context.Background(), host)
	require.NoError(tb, err)
	return c.ID
}

// benchClient is a go-nostr connection authenticated as one key.
type benchClient struct {
	tb   testing.TB
	ctx  context.Context
	conn *nostr.Connection
}

func scConnectTB(tb testing.TB, ctx context.Context, url string, key eventtest.Key) *benchClient {
	tb.Helper()
	conn, err := nostr.NewConnection(ctx, url, nil, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { conn.Close() })
	c := &benchClient{tb: tb, ctx: ctx, conn: conn}
	var challenge []string
	require.NoError(tb, json.Unmarshal(c.read(), &challenge))
	auth := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(),
		Tags: nostr.Tags{{"relay", url}, {"challenge", challenge[1]}}}
	require.NoError(tb, auth.Sign(fmt.Sprintf("%x", key.SK)))
	c.write(&nostr.AuthEnvelope{Event: auth})
	require.Contains(tb, string(c.read()), `true`)
	return c
}

func (c *benchClient) write(env interface{ MarshalJSON() ([]byte, error) }) int {
	b, err := env.MarshalJSON()
	require.NoError(c.tb, err)
	require.NoError(c.tb, c.conn.WriteMessage(c.ctx, b))
	return len(b)
}

func (c *benchClient) read() []byte {
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(c.tb, c.conn.ReadMessage(ctx, &buf))
	return buf.Bytes()
}

// negBench is one measured reconciliation: frames' bytes each way.
type negBench struct {
	have, need []string
	rounds     int
	up, down   int
}

func (c *benchClient) negSyncBench(filter nostr.Filter, local []negRecord) negBench {
	var o negBench
	neg, collected := negClient(local, 120<<10, &o.have, &o.need)
	o.up += c.write(nip77.OpenEnvelope{SubscriptionID: "bench", Filter: filter, Message: neg.Start()})
	for {
		o.rounds++
		frame := c.read()
		o.down += len(frame)
		env := nip77.ParseNegMessage(string(frame))
		msg, ok := env.(*nip77.MessageEnvelope)
		require.True(c.tb, ok, "%.200s", frame)
		next, err := neg.Reconcile(msg.Message)
		require.NoError(c.tb, err)
		if next == "" {
			collected()
			c.write(nip77.CloseEnvelope{SubscriptionID: "bench"})
			return o
		}
		o.up += c.write(nip77.MessageEnvelope{SubscriptionID: "bench", Message: next})
	}
}

// sinceReread reads every kind-1 event since base with REQs of 1,000,
// each page until the oldest of the last, and returns the REQs sent, the
// bytes read and the distinct events received.
func (c *benchClient) sinceReread(base int64, n int) (pages, down, got int) {
	seen := make(map[string]struct{}, n)
	until := time.Now().Unix()
	for {
		pages++
		since := nostr.Timestamp(base)
		u := nostr.Timestamp(until)
		c.write(&nostr.ReqEnvelope{SubscriptionID: "since", Filters: nostr.Filters{{Kinds: []int{1}, Since: &since, Until: &u, Limit: 1000}}})
		oldest, page := until, 0
		for {
			frame := c.read()
			down += len(frame)
			var msg []json.RawMessage
			require.NoError(c.tb, json.Unmarshal(frame, &msg))
			var typ string
			require.NoError(c.tb, json.Unmarshal(msg[0], &typ))
			if typ == "EOSE" {
				break
			}
			if typ == "CLOSED" {
				continue // the previous page's CLOSE
			}
			require.Equal(c.tb, "EVENT", typ, "%.200s", frame)
			var ev struct {
				ID        string `json:"id"`
				CreatedAt int64  `json:"created_at"`
			}
			require.NoError(c.tb, json.Unmarshal(msg[2], &ev))
			seen[ev.ID] = struct{}{}
			oldest = min(oldest, ev.CreatedAt)
			page++
		}
		closeEnv := nostr.CloseEnvelope("since")
		c.write(&closeEnv)
		if page == 0 || oldest <= base {
			return pages, down, len(seen)
		}
		until = oldest - 1
	}
}
