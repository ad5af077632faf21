package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/eventtest"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/relaytest"
)

// BenchmarkAuthFlood is an AUTH flood against the audit observer (docs/PROTOCOL.md §13.4), scaled to this machine: for
// BUZZ_FLOOD_SECONDS (default 60) as many connections as the relay accepts
// each send a failing AUTH, while one honest client keeps authenticating
// and its AUTH reply latency is recorded. Afterwards the chain must hold at
// most 11 auth_failure entries per minute (10 individual and 1 summary).
//
//	BUZZ_FLOOD_SECONDS=60 go test -run '^$' -bench AuthFlood -benchtime 1x ./internal/e2e
func BenchmarkAuthFlood(b *testing.B) {
	seconds := 60
	if v, err := strconv.Atoi(os.Getenv("BUZZ_FLOOD_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	for b.Loop() {
		r := relaytest.Start(b, nil)
		c, err := r.App.Store().CommunityByHost(context.Background(), r.Host)
		require.NoError(b, err)
		forger := eventtest.NewKey()
		bad := forger.Signed(b, event.KindAuth, eventtest.Content(""),
			eventtest.Tag("challenge", "not-the-challenge"), eventtest.Tag("relay", "ws://"+r.Host))
		frame := append(append([]byte(`["AUTH",`), bad.AppendJSON(nil)...), ']')

		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
		var failed atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					ws, _, err := r.DialRaw("")
					if err != nil {
						continue
					}
					rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
					if _, _, err = ws.Read(rctx); err == nil && ws.Write(rctx, websocket.MessageText, frame) == nil {
						if _, _, err = ws.Read(rctx); err == nil {
							failed.Add(1)
						}
					}
					rcancel()
					ws.CloseNow()
				}
			}()
		}
		honest := eventtest.NewKey()
		var lat []time.Duration
		for ctx.Err() == nil {
			start := time.Now()
			w := r.Dial(b, "")
			w.Auth(honest)
			lat = append(lat, time.Since(start))
			w.C.CloseNow()
			time.Sleep(200 * time.Millisecond) // pacing of the honest client, not a wait for work
		}
		wg.Wait()
		cancel()
		r.Stop()

		pool, err := pg.Open(context.Background(), r.DBURL, pg.PoolConfig{MaxConns: 2})
		require.NoError(b, err)
		// Sampling windows are UTC minutes; a window's summary is stamped
		// with its end, so it is grouped by the window_start it carries.
		rows, err := pool.Query(context.Background(), `SELECT count(*) FROM audit_log
			WHERE community_id = $1 AND action = 'auth_failure'
			GROUP BY COALESCE(to_timestamp((detail->>'window_start')::bigint), date_trunc('minute', created_at))
			ORDER BY 1`, c.ID)
		require.NoError(b, err)
		var perMinute []int64
		for rows.Next() {
			var n int64
			require.NoError(b, rows.Scan(&n))
			perMinute = append(perMinute, n)
		}
		require.NoError(b, rows.Err())
		pool.Close()
		slices.Sort(lat)
		worst := slices.Max(append(perMinute, 0))
		fmt.Fprintf(os.Stderr, "auth flood: %d failed AUTHs in %d s (%.0f/s); auth_failure entries per minute %v (max %d); honest AUTH p50 %s p99 %s over %d\n",
			failed.Load(), seconds, float64(failed.Load())/float64(seconds), perMinute, worst,
			lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), len(lat))
		require.LessOrEqual(b, worst, int64(11), "at most 10 individual entries and 1 summary per minute")
		b.ReportMetric(float64(failed.Load())/float64(seconds), "failed-auth/s")
		b.ReportMetric(float64(worst), "max-entries/min")
	}
}
