package audit_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/dbtest"
)

// BenchmarkChainAndVerify measures the audit chain (target P8 in docs/PERFORMANCE.md): the chainer's
// append rate for one community (batches of 500) and the time `audit
// verify` takes over the resulting chain. BUZZ_AUDIT_BENCH_ENTRIES sets the
// chain length (default 200,000). Run with
//
//	go test -run '^$' -bench ChainAndVerify -benchtime 1x ./internal/audit
func BenchmarkChainAndVerify(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("BUZZ_AUDIT_BENCH_ENTRIES")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		pool, _ := dbtest.NewDB(b)
		ctx := context.Background()
		var cid string
		require.NoError(b, pool.QueryRow(ctx, `INSERT INTO communities (host) VALUES ('bench.test') RETURNING id::text`).Scan(&cid))
		// Intents shaped like the ingest hot path's event_created, written in bulk.
		_, err := pool.Exec(ctx, `INSERT INTO audit_outbox (community_id, dedupe_key, action, actor_pubkey, object_id, detail)
			SELECT $1, 'event_created:' || lpad(to_hex(g), 64, '0'), 'event_created', decode(repeat('ab', 32), 'hex'),
			       lpad(to_hex(g), 64, '0'), '{"event_kind":9,"channel_id":null}'::jsonb
			FROM generate_series(1, $2::int) g`, cid, n)
		require.NoError(b, err)
		c := audit.NewChainer(audit.ChainerConfig{Pool: pool})
		start := time.Now()
		fctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		require.NoError(b, c.Flush(fctx))
		cancel()
		chain := time.Since(start)
		start = time.Now()
		ok, err := audit.Verify(ctx, pool, audit.VerifyParams{CommunityID: cid, From: 1, To: 1 << 40})
		require.NoError(b, err)
		require.True(b, ok)
		verify := time.Since(start)
		b.ReportMetric(float64(n)/chain.Seconds(), "chained-entries/s")
		b.ReportMetric(verify.Seconds(), "verify-s")
		b.ReportMetric(float64(n)/verify.Seconds(), "verified-entries/s")
		fmt.Fprintf(os.Stderr, "audit bench: %d entries chained in %s (%.0f/s), verified in %s (%.0f/s)\n",
			n, chain.Round(time.Millisecond), float64(n)/chain.Seconds(), verify.Round(time.Millisecond), float64(n)/verify.Seconds())
	}
}
