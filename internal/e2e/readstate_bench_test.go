package e2e

import (
	"context"
	"encoding/base64"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// BenchmarkReadStateRetention is read-state retention under load (docs/PROTOCOL.md §14.2): 10,000 read-state
// replacements (100 users × 10 coordinates × 10 rounds) paced at 200
// writes/s over one socket per user; afterwards the events table holds
// exactly 1,000 rows. The same run then writes the same shape as
// nonconforming kind-30078 application data (no t tag: NIP-33's
// soft-delete path), so the two p50/p99 write latencies (EVENT → OK) are
// measured side by side on one relay and one database. Figures are
// reported, never judged; the row counts are checked.
//
//	go test -run '^$' -bench ReadStateRetention -benchtime 1x ./internal/e2e
//
// BUZZ_RS_RATE changes the pace (writes/s).
func BenchmarkReadStateRetention(b *testing.B) {
	const users, coords, rounds = 100, 10, 10
	rate := 200.0
	if v, err := strconv.ParseFloat(os.Getenv("BUZZ_RS_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	for b.Loop() {
		r := relaytest.Start(b, nil)
		c, err := r.App.Store().CommunityByHost(context.Background(), r.Host)
		require.NoError(b, err)
		cid := c.ID
		keys := make([]eventtest.Key, users)
		conns := make([]*relaytest.WS, users)
		for u := range keys {
			keys[u] = eventtest.NewKey()
			conns[u] = r.Dial(b, "")
			conns[u].Auth(keys[u])
		}
		for _, mode := range []string{"read-state", "app-data"} {
			p50, p99, rows := runRetention(b, r, cid, keys, conns, mode, coords, rounds, rate)
			b.ReportMetric(p50, mode+"-p50-ms")
			b.ReportMetric(p99, mode+"-p99-ms")
			want := users * coords
			if mode == "app-data" {
				want = users * coords * rounds // every superseded version stays, soft-deleted
			}
			require.Equal(b, want, rows, "%s rows after %d writes", mode, users*coords*rounds)
		}
	}
}

// runRetention writes rounds versions of coords coordinates per user, in
// rounds (round k is one second newer than round k-1), job i due at
// i/rate seconds after the start, and returns the p50 and p99 EVENT → OK
// latency in milliseconds and the number of rows the mode left.
func runRetention(b *testing.B, r *relaytest.Relay, cid string, keys []eventtest.Key, conns []*relaytest.WS,
	mode string, coords, rounds int, rate float64) (p50, p99 float64, rows int) {
	b.Helper()
	users := len(keys)
	base := time.Now().Unix() - int64(rounds) - 5
	slots := make([][]string, users)
	for u := range slots {
		for range coords {
			d := newSlot()
			if mode == "app-data" {
				d = "app:" + d[len("read-state:"):]
			}
			slots[u] = append(slots[u], d)
		}
	}
	// Pre-sign: job index = (round·users + user)·coords + coord.
	jobs := make([][]event.Event, users)
	blob := make([]byte, 180) // a NIP-44-sized payload
	for round := range rounds {
		for u := range users {
			for c := range coords {
				for i := range blob {
					blob[i] = byte(rand.IntN(256))
				}
				opts := []eventtest.Option{eventtest.Tag("d", slots[u][c]), eventtest.At(base + int64(round)),
					eventtest.Content(base64.StdEncoding.EncodeToString(blob))}
				if mode == "read-state" {
					opts = append(opts, eventtest.Tag("t", "read-state"))
				}
				jobs[u] = append(jobs[u], keys[u].Signed(b, event.KindAppData, opts...))
			}
		}
	}
	start := time.Now()
	lat := make([][]time.Duration, users)
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			for k, ev := range jobs[u] {
				round, c := k/coords, k%coords
				due := start.Add(time.Duration(float64((round*users+u)*coords+c) / rate * float64(time.Second)))
				time.Sleep(time.Until(due))
				t0 := time.Now()
				ok, msg := conns[u].Publish(ev)
				lat[u] = append(lat[u], time.Since(t0))
				if !ok || msg != "" {
					b.Errorf("%s: user %d job %d: OK %v %q", mode, u, k, ok, msg)
					return
				}
			}
		})
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	ms := func(q float64) float64 {
		return float64(all[min(len(all)-1, int(q*float64(len(all))))]) / float64(time.Millisecond)
	}
	pattern := "read-state:%"
	if mode == "app-data" {
		pattern = "app:%"
	}
	require.NoError(b, r.App.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM events WHERE community_id = $1 AND kind = 30078 AND d_tag LIKE $2`, cid, pattern).Scan(&rows))
	b.Logf("%s: %d writes in %.1f s (%.0f/s), p50 %.2f ms, p99 %.2f ms, %d rows", mode, len(all),
		time.Since(start).Seconds(), float64(len(all))/time.Since(start).Seconds(), ms(0.5), ms(0.99), rows)
	return ms(0.5), ms(0.99), rows
}
