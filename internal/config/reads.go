package config

import (
	"log/slog"
	"runtime"
	"time"
)

// DefaultReadsPerPubkey is BUZZ_READS_PER_PUBKEY's default: half the CPUs
// the process may use (GOMAXPROCS), at least 1. One pubkey's reads may
// then keep at most half the machine busy, whatever it sends: with more,
// a reader flooding heavy reads holds every core and honest writers and
// readers wait for CPU (docs/PERFORMANCE.md "Abuse benchmark").
func DefaultReadsPerPubkey() int { return readsPerPubkeyFor(runtime.GOMAXPROCS(0)) }

func readsPerPubkeyFor(procs int) int { return max(1, procs/2) }

// Defaults of the read deadlines and shares and of the HTTP server's
// timeouts and concurrency (docs/OPERATIONS.md "Running a public relay").
const (
	DefaultReadStatementTimeout = 10 * time.Second
	DefaultDBAcquireTimeout     = 3 * time.Second
	DefaultReadsPerConnection   = 4
	DefaultReadTimePerSecond    = 100 * time.Millisecond
	DefaultReadTimeBurst        = time.Second
	DefaultHTTPReadTimeout      = 30 * time.Second
	DefaultHTTPWriteTimeout     = 60 * time.Second
	DefaultHTTPIdleTimeout      = 120 * time.Second
	DefaultHTTPMaxConcurrent    = 256
)

// ReadLimits bound what one read, one connection and one pubkey may cost
// the database, and what one HTTP client may cost the app server.
type ReadLimits struct {
	// StatementTimeout is every read's deadline
	// (BUZZ_READ_STATEMENT_TIMEOUT_MS, 100–600000 ms): a statement still
	// running then is cancelled on the server and the read answers
	// "error: read timed out". Default 10 s. Ingest is not subject to it.
	StatementTimeout time.Duration
	// AcquireTimeout is how long a read waits for its share and its pooled
	// connection (BUZZ_DB_ACQUIRE_TIMEOUT_MS, 10–60000 ms). Default 3 s.
	AcquireTimeout time.Duration
	// WriteReserved is the writer pool's connections reads never take, kept
	// for ingest (BUZZ_DB_WRITE_RESERVED), 0 to BUZZ_DB_POOL_SIZE − 1.
	// Default max(1, BUZZ_DB_POOL_SIZE/5), at most BUZZ_DB_POOL_SIZE − 1.
	WriteReserved int
	// MaxConcurrentReads bounds the database connections reads hold at once
	// in this process (BUZZ_MAX_CONCURRENT_READS), 1 to BUZZ_DB_POOL_SIZE −
	// WriteReserved. Default BUZZ_DB_POOL_SIZE − WriteReserved.
	MaxConcurrentReads int
	// PerConnection is one connection's share of MaxConcurrentReads: a
	// WebSocket, or one HTTP client address (BUZZ_READS_PER_CONNECTION),
	// 1–1000. Default 4.
	PerConnection int
	// PerPubkey is one reader pubkey's share across all its connections
	// (BUZZ_READS_PER_PUBKEY), 1–10000. Default DefaultReadsPerPubkey():
	// half the CPUs, at least 1.
	PerPubkey int
	// TimePerSecond is the read time one reader (a pubkey, or a
	// connection without one) earns each second
	// (BUZZ_READ_TIME_PER_SECOND_MS, 0–60000 ms), and TimeBurst what it may
	// save up (BUZZ_READ_TIME_BURST_MS, 1–3600000 ms). Every read pays the
	// time it holds its database connections; a reader whose budget is
	// spent is refused "rate-limited: quota exceeded; retry in <n>s" until
	// it has earned it back. Defaults 100 ms a second and 1 s: a tenth of
	// one connection's time. 0 turns it off.
	TimePerSecond, TimeBurst time.Duration
	// HTTPReadTimeout bounds reading one HTTP request, headers and body
	// (BUZZ_HTTP_READ_TIMEOUT_MS, 100–3600000 ms). Default 30 s. The
	// request headers alone get at most 10 s. WebSocket upgrades are not
	// subject to it once upgraded.
	HTTPReadTimeout time.Duration
	// HTTPWriteTimeout bounds writing one HTTP response
	// (BUZZ_HTTP_WRITE_TIMEOUT_MS, 100–3600000 ms). Default 60 s. WebSocket
	// upgrades are not subject to it once upgraded.
	HTTPWriteTimeout time.Duration
	// HTTPIdleTimeout closes a keep-alive HTTP connection idle that long
	// (BUZZ_HTTP_IDLE_TIMEOUT_MS, 100–3600000 ms). Default 120 s.
	HTTPIdleTimeout time.Duration
	// HTTPMaxConcurrent bounds the HTTP bridge requests served at once
	// (BUZZ_HTTP_MAX_CONCURRENT), 1–65536; over it a request is answered
	// 503 at once. Default 256. WebSocket upgrades, NIP-11 and health are
	// not counted.
	HTTPMaxConcurrent int
	// MaxConnectionsPerAddress bounds the open WebSockets of one client
	// address (BUZZ_MAX_CONNECTIONS_PER_ADDRESS), 0–1000000, with the
	// client-address rules of BUZZ_WS_CONNECT_RATE (BUZZ_TRUSTED_PROXIES,
	// IPv6 /64). Default 0: no cap, since behind a proxy every client
	// shares its address.
	MaxConnectionsPerAddress int
}

// readLimits loads ReadLimits; poolSize is BUZZ_DB_POOL_SIZE, already loaded.
func (l *loader) readLimits(poolSize int) ReadLimits {
	var r ReadLimits
	r.StatementTimeout = l.millis("BUZZ_READ_STATEMENT_TIMEOUT_MS", DefaultReadStatementTimeout, 100, 600000)
	r.AcquireTimeout = l.millis("BUZZ_DB_ACQUIRE_TIMEOUT_MS", DefaultDBAcquireTimeout, 10, 60000)
	r.WriteReserved = l.integer("BUZZ_DB_WRITE_RESERVED", min(max(1, poolSize/5), poolSize-1), 0, poolSize-1)
	r.MaxConcurrentReads = l.integer("BUZZ_MAX_CONCURRENT_READS", poolSize-r.WriteReserved, 1, max(1, poolSize-r.WriteReserved))
	r.PerConnection = l.integer("BUZZ_READS_PER_CONNECTION", DefaultReadsPerConnection, 1, 1000)
	r.PerPubkey = l.integer("BUZZ_READS_PER_PUBKEY", DefaultReadsPerPubkey(), 1, 10000)
	r.TimePerSecond = l.millis("BUZZ_READ_TIME_PER_SECOND_MS", DefaultReadTimePerSecond, 0, 60000)
	r.TimeBurst = l.millis("BUZZ_READ_TIME_BURST_MS", DefaultReadTimeBurst, 1, 3600000)
	r.HTTPReadTimeout = l.millis("BUZZ_HTTP_READ_TIMEOUT_MS", DefaultHTTPReadTimeout, 100, 3600000)
	r.HTTPWriteTimeout = l.millis("BUZZ_HTTP_WRITE_TIMEOUT_MS", DefaultHTTPWriteTimeout, 100, 3600000)
	r.HTTPIdleTimeout = l.millis("BUZZ_HTTP_IDLE_TIMEOUT_MS", DefaultHTTPIdleTimeout, 100, 3600000)
	r.HTTPMaxConcurrent = l.integer("BUZZ_HTTP_MAX_CONCURRENT", DefaultHTTPMaxConcurrent, 1, 65536)
	r.MaxConnectionsPerAddress = l.integer("BUZZ_MAX_CONNECTIONS_PER_ADDRESS", 0, 0, 1000000)
	return r
}

// millis parses a whole number of milliseconds in [lo, hi].
func (l *loader) millis(name string, def time.Duration, lo, hi int) time.Duration {
	return time.Duration(l.integer(name, int(def/time.Millisecond), lo, hi)) * time.Millisecond
}

// LogValue is the read limits as logged at start.
func (r ReadLimits) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("read_statement_timeout_ms", r.StatementTimeout.Milliseconds()),
		slog.Int64("db_acquire_timeout_ms", r.AcquireTimeout.Milliseconds()),
		slog.Int("db_write_reserved", r.WriteReserved),
		slog.Int("max_concurrent_reads", r.MaxConcurrentReads),
		slog.Int("reads_per_connection", r.PerConnection),
		slog.Int("reads_per_pubkey", r.PerPubkey),
		slog.Int64("read_time_per_second_ms", r.TimePerSecond.Milliseconds()),
		slog.Int64("read_time_burst_ms", r.TimeBurst.Milliseconds()),
		slog.Int64("http_read_timeout_ms", r.HTTPReadTimeout.Milliseconds()),
		slog.Int64("http_write_timeout_ms", r.HTTPWriteTimeout.Milliseconds()),
		slog.Int64("http_idle_timeout_ms", r.HTTPIdleTimeout.Milliseconds()),
		slog.Int("http_max_concurrent", r.HTTPMaxConcurrent),
		slog.Int("max_connections_per_address", r.MaxConnectionsPerAddress),
	)
}
