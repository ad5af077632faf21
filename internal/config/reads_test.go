package config

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReadLimits(t *testing.T) {
	t.Parallel()

	t.Run("PerPubkeyDefaultIsHalfTheCPUs", func(t *testing.T) {
		t.Parallel()
		for procs, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 7: 3, 16: 8, 64: 32} {
			require.Equal(t, want, readsPerPubkeyFor(procs), "GOMAXPROCS %d", procs)
		}
		c, _, err := load(t)
		require.NoError(t, err)
		require.Equal(t, readsPerPubkeyFor(runtime.GOMAXPROCS(0)), c.Reads.PerPubkey)
	})

	t.Run("EveryVariable", func(t *testing.T) {
		t.Parallel()
		c, warnings, err := load(t,
			"BUZZ_DB_POOL_SIZE", "20",
			"BUZZ_READ_STATEMENT_TIMEOUT_MS", "250",
			"BUZZ_DB_ACQUIRE_TIMEOUT_MS", "40",
			"BUZZ_DB_WRITE_RESERVED", "5",
			"BUZZ_MAX_CONCURRENT_READS", "15",
			"BUZZ_READS_PER_CONNECTION", "1000",
			"BUZZ_READS_PER_PUBKEY", "10000",
			"BUZZ_READ_TIME_PER_SECOND_MS", "60000",
			"BUZZ_READ_TIME_BURST_MS", "1",
			"BUZZ_HTTP_READ_TIMEOUT_MS", "100",
			"BUZZ_HTTP_WRITE_TIMEOUT_MS", "3600000",
			"BUZZ_HTTP_IDLE_TIMEOUT_MS", "5000",
			"BUZZ_HTTP_MAX_CONCURRENT", "65536",
			"BUZZ_MAX_CONNECTIONS_PER_ADDRESS", "1000000",
		)
		require.NoError(t, err)
		require.Empty(t, warnings)
		require.Equal(t, ReadLimits{
			StatementTimeout: 250 * time.Millisecond, AcquireTimeout: 40 * time.Millisecond,
			WriteReserved: 5, MaxConcurrentReads: 15, PerConnection: 1000, PerPubkey: 10000,
			TimePerSecond: time.Minute, TimeBurst: time.Millisecond,
			HTTPReadTimeout: 100 * time.Millisecond, HTTPWriteTimeout: time.Hour,
			HTTPIdleTimeout: 5 * time.Second, HTTPMaxConcurrent: 65536, MaxConnectionsPerAddress: 1000000,
		}, c.Reads)
	})

	t.Run("ReservationFollowsPoolSize", func(t *testing.T) {
		t.Parallel()
		for pool, want := range map[string][2]int{"1": {0, 1}, "2": {1, 1}, "9": {1, 8}, "10": {2, 8}, "1000": {200, 800}} {
			c, _, err := load(t, "BUZZ_DB_POOL_SIZE", pool)
			require.NoError(t, err)
			require.Equal(t, want[0], c.Reads.WriteReserved, pool)
			require.Equal(t, want[1], c.Reads.MaxConcurrentReads, pool)
		}
	})

	t.Run("AtTheBound", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_DB_POOL_SIZE", "10", "BUZZ_DB_WRITE_RESERVED", "9", "BUZZ_MAX_CONCURRENT_READS", "1")
		require.NoError(t, err)
		require.Equal(t, 9, c.Reads.WriteReserved)
		require.Equal(t, 1, c.Reads.MaxConcurrentReads)
		c, _, err = load(t, "BUZZ_DB_POOL_SIZE", "10", "BUZZ_DB_WRITE_RESERVED", "0", "BUZZ_MAX_CONCURRENT_READS", "10")
		require.NoError(t, err)
		require.Equal(t, 10, c.Reads.MaxConcurrentReads)
		c, _, err = load(t, "BUZZ_READ_TIME_PER_SECOND_MS", "0", "BUZZ_READ_TIME_BURST_MS", "3600000")
		require.NoError(t, err)
		require.Zero(t, c.Reads.TimePerSecond, "0 turns the read-time budget off")
		require.Equal(t, time.Hour, c.Reads.TimeBurst)
	})

	t.Run("OneOver", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ kv []string }{
			{[]string{"BUZZ_READ_STATEMENT_TIMEOUT_MS", "99"}},
			{[]string{"BUZZ_READ_STATEMENT_TIMEOUT_MS", "600001"}},
			{[]string{"BUZZ_DB_ACQUIRE_TIMEOUT_MS", "9"}},
			{[]string{"BUZZ_DB_ACQUIRE_TIMEOUT_MS", "60001"}},
			{[]string{"BUZZ_DB_POOL_SIZE", "10", "BUZZ_DB_WRITE_RESERVED", "10"}},
			{[]string{"BUZZ_DB_POOL_SIZE", "10", "BUZZ_DB_WRITE_RESERVED", "2", "BUZZ_MAX_CONCURRENT_READS", "9"}},
			{[]string{"BUZZ_MAX_CONCURRENT_READS", "0"}},
			{[]string{"BUZZ_READS_PER_CONNECTION", "0"}},
			{[]string{"BUZZ_READS_PER_CONNECTION", "1001"}},
			{[]string{"BUZZ_READS_PER_PUBKEY", "10001"}},
			{[]string{"BUZZ_READ_TIME_PER_SECOND_MS", "-1"}},
			{[]string{"BUZZ_READ_TIME_PER_SECOND_MS", "60001"}},
			{[]string{"BUZZ_READ_TIME_BURST_MS", "0"}},
			{[]string{"BUZZ_READ_TIME_BURST_MS", "3600001"}},
			{[]string{"BUZZ_HTTP_READ_TIMEOUT_MS", "99"}},
			{[]string{"BUZZ_HTTP_WRITE_TIMEOUT_MS", "3600001"}},
			{[]string{"BUZZ_HTTP_IDLE_TIMEOUT_MS", "lots"}},
			{[]string{"BUZZ_HTTP_MAX_CONCURRENT", "65537"}},
			{[]string{"BUZZ_MAX_CONNECTIONS_PER_ADDRESS", "-1"}},
		} {
			_, _, err := load(t, tc.kv...)
			var ce *Error
			require.ErrorAs(t, err, &ce, tc.kv)
			require.Equal(t, tc.kv[len(tc.kv)-2], ce.Variable, tc.kv)
		}
	})
}
