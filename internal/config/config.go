package config

import (
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Default values of the variables of docs/PROTOCOL.md §10, and of the tuning knobs that
// are not read from the environment.
const (
	DefaultDataDir               = "./buzz-data"
	DefaultRelayURL              = "ws://localhost:3000"
	DefaultBindAddr              = "0.0.0.0:3000"
	DefaultHealthPort            = 8080
	DefaultMetricsPort           = 9102
	DefaultMaxConnections        = 10000
	DefaultMaxConcurrentHandlers = 1024
	DefaultSendBuffer            = 1000
	DefaultMaxFrameBytes         = 524288
	DefaultSlowClientGraceLimit  = 15
	DefaultDBPoolSize            = 50
	DefaultRedisPoolSize         = 16
	DefaultLogFormat             = "auto"
	DefaultSearchRankWindow      = 1000
	DefaultSearchCacheMiB        = 16
	// DefaultExpiredPurgeInterval is how often expired events are deleted
	// (BUZZ_EXPIRED_PURGE_INTERVAL_MS, docs/OPERATIONS.md "Expired events").
	DefaultExpiredPurgeInterval = 60 * time.Second
	// DefaultGroupCommitDelay is how long, under load, an event waits for
	// others to share its group commit (BUZZ_GROUP_COMMIT_DELAY_MS).
	DefaultGroupCommitDelay = time.Millisecond

	DefaultHeartbeatInterval      = 30 * time.Second
	DefaultAuthTimeout            = 5 * time.Second
	DefaultDrainTimeout           = 30 * time.Second
	DefaultMembershipRecheck      = 60 * time.Second
	DefaultAmbiguousCommitTimeout = 30 * time.Second
)

// Config is the relay's resolved configuration. Load fills every field; a
// zero Config is not usable. Fields are read-only after Load: share the value,
// do not mutate it from several goroutines.
type Config struct {
	// DatabaseURL is the PostgreSQL 15+ connection string (DATABASE_URL), a
	// postgres:// or postgresql:// URL or a key=value string. Default "":
	// the relay runs its own private cluster under DataDir.
	DatabaseURL string
	// DataDir holds the private cluster and other local state (BUZZ_DATA_DIR).
	// Default "./buzz-data".
	DataDir string
	// RelayURL is the public WebSocket URL, as given (RELAY_URL). Default
	// "ws://localhost:3000". It must be ws:// or wss:// with a host.
	RelayURL string
	// RelayScheme is RelayURL's scheme, "ws" or "wss". It selects http or https
	// for NIP-42 relay tags and NIP-98 u tags.
	RelayScheme string
	// RelayHost is RelayURL's authority after NormalizeHost: the host of the
	// deployment community. Default "localhost:3000". Never empty after Load.
	RelayHost string
	// BindAddr is the app listener's host:port (BUZZ_BIND_ADDR). Default
	// "0.0.0.0:3000". Port 0 asks the kernel for a free port (tests).
	BindAddr string
	// HealthPort is the port of /_liveness, /_readiness and /_status
	// (BUZZ_HEALTH_PORT), 1–65535. Default 8080.
	HealthPort int
	// MetricsPort is the port of /metrics (BUZZ_METRICS_PORT), 1–65535.
	// Default 9102.
	MetricsPort int
	// PprofEnabled mounts net/http/pprof under /debug/pprof/ on the metrics
	// port (BUZZ_PPROF_ENABLED). Default false: profiles expose internals
	// and cost CPU, so they are served only when asked for.
	PprofEnabled bool
	// AutoMigrate applies pending migrations at start (BUZZ_AUTO_MIGRATE).
	// Default false. Load does not know whether the private cluster will run:
	// the caller forces it on for the private cluster.
	AutoMigrate bool
	// AutoMigrateSet reports whether BUZZ_AUTO_MIGRATE was set (non-empty), so
	// the caller can tell an explicit false from the default.
	AutoMigrateSet bool
	// RelayPrivateKey is the relay signing key (BUZZ_RELAY_PRIVATE_KEY), 32
	// bytes decoded from 64 hex characters (nsec is not accepted). Default nil:
	// the caller generates a key at boot and does not advertise it. Required
	// when RedisURL is set. Redacted by LogValue.
	RelayPrivateKey []byte
	// RequireAuthToken requires NIP-98 on the HTTP bridge
	// (BUZZ_REQUIRE_AUTH_TOKEN). Default true; only an explicit false enables
	// the X-Pubkey development shortcut. WebSocket auth is unaffected.
	RequireAuthToken bool
	// RequireRelayMembership enforces relay_members at AUTH and on the bridge
	// (BUZZ_REQUIRE_RELAY_MEMBERSHIP). Default false. Needs RelayOwnerPubkey.
	RequireRelayMembership bool
	// RelayOwnerPubkey is bootstrapped as owner of the deployment community
	// (RELAY_OWNER_PUBKEY): 64 hex characters of a valid x-only key, stored
	// lowercase. Default "".
	RelayOwnerPubkey string
	// MaxConnections bounds open WebSockets per process
	// (BUZZ_MAX_CONNECTIONS), 1–1000000. Default 10000.
	MaxConnections int
	// MaxConcurrentHandlers bounds concurrent EVENT/REQ/COUNT per process
	// (BUZZ_MAX_CONCURRENT_HANDLERS), 1–65536. Default 1024.
	MaxConcurrentHandlers int
	// WSConnectRate is the WebSocket upgrades admitted a second from one
	// client address (BUZZ_WS_CONNECT_RATE), a decimal number 0–100000.
	// Default 0: no limit.
	WSConnectRate float64
	// WSConnectBurst is how many upgrades one address may make at once
	// before WSConnectRate applies (BUZZ_WS_CONNECT_BURST), 1–1000000.
	// Default 4 × WSConnectRate, at least 1.
	WSConnectBurst int
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// address (BUZZ_TRUSTED_PROXIES): comma-separated addresses or CIDR
	// prefixes. Default none.
	TrustedProxies []netip.Prefix
	// SendBuffer is the outbound queue per connection, in messages
	// (BUZZ_SEND_BUFFER), 16–1000000. Default 1000.
	SendBuffer int
	// MaxFrameBytes is the largest WebSocket frame and NIP-11
	// max_message_length (BUZZ_MAX_FRAME_BYTES), 65536–16777216. Default 524288.
	MaxFrameBytes int
	// SlowClientGraceLimit is the number of consecutive dropped ephemeral
	// events before a slow client is closed (BUZZ_SLOW_CLIENT_GRACE_LIMIT),
	// 1–255. Default 15.
	SlowClientGraceLimit int
	// Bytes are the byte budgets: event size, read answers, send queue
	// (bytes.go).
	Bytes ByteBudgets
	// CORSOrigins lists the allowed origins of the HTTP bridge
	// (BUZZ_CORS_ORIGINS, comma-separated), each normalised to a lowercase
	// scheme://host[:port]. Default nil: any origin.
	CORSOrigins []string
	// DBPoolSize is the writer pool's connection count (BUZZ_DB_POOL_SIZE),
	// 1–1000. Default 50.
	DBPoolSize int
	// RedisURL enables cross-process fan-out (REDIS_URL), a redis:// or
	// rediss:// URL. Default "": single process. Needs DatabaseURL and
	// RelayPrivateKey. Its password is redacted by LogValue.
	RedisURL string
	// RedisPoolSize is the pooled Redis connections for PUBLISH and keys
	// (BUZZ_REDIS_POOL_SIZE), 1–1000. Default 16.
	RedisPoolSize int
	// ReadDatabaseURL is an optional read replica (READ_DATABASE_URL), same
	// forms as DatabaseURL. Default "". Needs DatabaseURL.
	ReadDatabaseURL string
	// DBReadPoolSize is the replica pool's connection count
	// (BUZZ_DB_READ_POOL_SIZE), 1–1000. Default DBPoolSize.
	DBReadPoolSize int
	// AuditEnabled turns on the tamper-evident audit log (BUZZ_AUDIT_ENABLED).
	// Default true.
	AuditEnabled bool
	// OperatorListeners are the companion services that receive mention
	// notifications (BUZZ_OPERATOR_LISTENERS, docs/PROTOCOL.md §15.2), in the order given,
	// with distinct lowercase pubkeys and normalized HTTPS URLs. Default nil:
	// mention delivery is off and no registration can be made. Neither
	// pubkeys nor URLs are secret; LogValue shows them.
	OperatorListeners []OperatorListener
	// OperatorListenerTimeout bounds one whole delivery request: connect,
	// TLS, response headers and body (BUZZ_OPERATOR_LISTENER_TIMEOUT_MS,
	// 100–10000 ms). Default 5 s.
	OperatorListenerTimeout time.Duration
	// OperatorAPIOrigin is the canonical origin of the operator routes for
	// NIP-98 u checks (RELAY_OPERATOR_API_ORIGIN): http(s)://host[:port] as
	// given, without a trailing "/", so the expected u is OperatorAPIOrigin +
	// "/operator/listener/pubkeys". Required when OperatorListeners is set.
	// Default "": the operator routes answer 500.
	OperatorAPIOrigin string
	// LogLevel is the minimum log level (BUZZ_LOG_LEVEL): debug, info, warn or
	// error. Default info.
	LogLevel slog.Level
	// LogFormat is "auto" (JSON unless stdout is a terminal), "json" or "text"
	// (BUZZ_LOG_FORMAT). Default "auto".
	LogFormat string
	// Admission is the per-user quotas and the p-tag cap (admission.go).
	Admission Admission
	// Filters are the filter, subscription and connection caps
	// (BUZZ_FILTER_MAX_*, BUZZ_SUB_MAX_INDEX_KEYS, BUZZ_CONN_MAX_*; filters.go).
	Filters FilterLimits
	// SearchRankWindow is how many of the newest matches of its filter a
	// NIP-50 search statement ranks (BUZZ_SEARCH_RANK_WINDOW,
	// docs/PROTOCOL.md §12.4), 100–10000. Default 1000.
	SearchRankWindow int
	// SearchCacheBytes bounds the search page cache (BUZZ_SEARCH_CACHE_MIB,
	// 0–4096 MiB; 0 turns it off): recent search pages, served again
	// while the community's hot window vouches that nothing changed
	// (docs/ARCHITECTURE.md "Search cache"). Default 16 MiB.
	SearchCacheBytes int64
	// ExpiredPurgeInterval is how often the maintenance job deletes events
	// whose NIP-40 expiration has passed (BUZZ_EXPIRED_PURGE_INTERVAL_MS,
	// 1,000–86,400,000 ms). Default 60 s. Reads never return an expired
	// event whatever it is (docs/PROTOCOL.md §6.6); it only bounds how long
	// the rows stay on disk.
	ExpiredPurgeInterval time.Duration
	// HotWindow sizes the hot window (BUZZ_HOT_WINDOW_*; hot.go).
	HotWindow HotWindow
	// GroupCommitDelay is how long, under load, an event waits for others
	// to share its group commit (BUZZ_GROUP_COMMIT_DELAY_MS, 1–100 ms;
	// docs/OPERATIONS.md "Group commit"). Default 1 ms.
	GroupCommitDelay time.Duration

	// HeartbeatInterval is the WebSocket ping period. Not read from the
	// environment; tests shorten it. Default 30s.
	HeartbeatInterval time.Duration
	// AuthTimeout is how long a connection may stay unauthenticated when
	// authentication is required. Not read from the environment. Default 5s.
	AuthTimeout time.Duration
	// DrainTimeout bounds the graceful shutdown. Not read from the
	// environment. Default 30s.
	DrainTimeout time.Duration
	// MembershipRecheck is how often authenticated connections' relay
	// membership is re-checked when the gate is on. Not read from the
	// environment (tests shorten it). Default 60 s.
	MembershipRecheck time.Duration
	// AmbiguousCommitTimeout bounds how long a write whose answer was lost
	// after it reached the database is looked into before the community's
	// live subscriptions are interrupted. Not read from the environment
	// (tests shorten it). Default 30 s.
	AmbiguousCommitTimeout time.Duration

	// Reads are the read deadlines and shares and the HTTP server's
	// timeouts and concurrency (reads.go).
	Reads ReadLimits
	// Neg bounds the NIP-77 negentropy sessions (neg.go).
	Neg NegLimits
}

// Error is an invalid configuration value. Its text is exactly
// "invalid <Variable>: <Reason>"; the caller prints it and exits with status 2.
// Reasons never contain secrets (passwords, keys).
type Error struct {
	// Variable is the environment variable at fault, e.g. "BUZZ_SEND_BUFFER".
	Variable string
	// Reason says what is wrong and what is valid.
	Reason string
}

func (e *Error) Error() string { return "invalid " + e.Variable + ": " + e.Reason }

// Load resolves the configuration from getenv and reports unknown BUZZ_
// variables found in environ as warnings (one string per variable, sorted).
// Call it once at start as Load(os.Getenv, os.Environ()). A nil getenv reads
// nothing (every variable unset) and a nil environ skips the typo guard.
//
// Empty or blank values mean unset. The first invalid value, checked in the
// order of docs/PROTOCOL.md §10 and then the cross-variable rules, is returned as an
// *Error; nothing falls back to a default. The warnings are returned even
// when err is not nil.
func Load(getenv func(string) string, environ []string) (Config, []string, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	warnings := unknownVariables(environ)
	l := &loader{getenv: getenv}
	c := Config{
		DatabaseURL:             l.postgresURL("DATABASE_URL"),
		DataDir:                 l.str("BUZZ_DATA_DIR", DefaultDataDir),
		RelayURL:                l.str("RELAY_URL", DefaultRelayURL),
		BindAddr:                l.bindAddr("BUZZ_BIND_ADDR", DefaultBindAddr),
		HealthPort:              l.integer("BUZZ_HEALTH_PORT", DefaultHealthPort, 1, 65535),
		MetricsPort:             l.integer("BUZZ_METRICS_PORT", DefaultMetricsPort, 1, 65535),
		RequireAuthToken:        true,
		HeartbeatInterval:       DefaultHeartbeatInterval,
		OperatorListenerTimeout: DefaultOperatorListenerTimeout,
		MembershipRecheck:       DefaultMembershipRecheck,
		AmbiguousCommitTimeout:  DefaultAmbiguousCommitTimeout,
		AuthTimeout:             DefaultAuthTimeout,
		DrainTimeout:            DefaultDrainTimeout,
	}
	c.RelayScheme, c.RelayHost = l.relayURL("RELAY_URL", c.RelayURL)
	c.AutoMigrate, c.AutoMigrateSet = l.boolean("BUZZ_AUTO_MIGRATE", false)
	c.PprofEnabled, _ = l.boolean("BUZZ_PPROF_ENABLED", false)
	c.RelayPrivateKey = l.privateKey("BUZZ_RELAY_PRIVATE_KEY")
	c.RequireAuthToken, _ = l.boolean("BUZZ_REQUIRE_AUTH_TOKEN", true)
	c.RequireRelayMembership, _ = l.boolean("BUZZ_REQUIRE_RELAY_MEMBERSHIP", false)
	c.RelayOwnerPubkey = l.pubkey("RELAY_OWNER_PUBKEY")
	c.MaxConnections = l.integer("BUZZ_MAX_CONNECTIONS", DefaultMaxConnections, 1, 1000000)
	c.MaxConcurrentHandlers = l.integer("BUZZ_MAX_CONCURRENT_HANDLERS", DefaultMaxConcurrentHandlers, 1, 65536)
	c.WSConnectRate = l.decimal("BUZZ_WS_CONNECT_RATE", 0, 0, 100000)
	c.WSConnectBurst = l.integer("BUZZ_WS_CONNECT_BURST", max(int(math.Ceil(4*c.WSConnectRate)), 1), 1, 1000000)
	c.TrustedProxies = l.prefixes("BUZZ_TRUSTED_PROXIES")
	c.SendBuffer = l.integer("BUZZ_SEND_BUFFER", DefaultSendBuffer, 16, 1000000)
	c.MaxFrameBytes = l.integer("BUZZ_MAX_FRAME_BYTES", DefaultMaxFrameBytes, 65536, 16777216)
	c.SlowClientGraceLimit = l.integer("BUZZ_SLOW_CLIENT_GRACE_LIMIT", DefaultSlowClientGraceLimit, 1, 255)
	c.Bytes = l.byteBudgets(c.MaxFrameBytes)
	c.CORSOrigins = l.origins("BUZZ_CORS_ORIGINS")
	c.DBPoolSize = l.integer("BUZZ_DB_POOL_SIZE", DefaultDBPoolSize, 1, 1000)
	c.Reads = l.readLimits(c.DBPoolSize)
	c.Neg = l.negLimits(c.MaxFrameBytes)
	c.RedisURL = l.redisURL("REDIS_URL")
	c.RedisPoolSize = l.integer("BUZZ_REDIS_POOL_SIZE", DefaultRedisPoolSize, 1, 1000)
	c.ReadDatabaseURL = l.postgresURL("READ_DATABASE_URL")
	c.DBReadPoolSize = l.integer("BUZZ_DB_READ_POOL_SIZE", c.DBPoolSize, 1, 1000)
	c.AuditEnabled = l.auditEnabled("BUZZ_AUDIT_ENABLED")
	c.OperatorListeners = l.listeners("BUZZ_OPERATOR_LISTENERS")
	c.OperatorListenerTimeout = l.listenerTimeout("BUZZ_OPERATOR_LISTENER_TIMEOUT_MS")
	c.OperatorAPIOrigin = l.operatorOrigin("RELAY_OPERATOR_API_ORIGIN")
	c.LogLevel = l.logLevel("BUZZ_LOG_LEVEL")
	c.LogFormat = l.oneOf("BUZZ_LOG_FORMAT", DefaultLogFormat, "auto", "json", "text")
	c.Admission = l.admission()
	c.Filters = l.filterLimits()
	c.SearchRankWindow = l.integer("BUZZ_SEARCH_RANK_WINDOW", DefaultSearchRankWindow, 100, 10000)
	c.SearchCacheBytes = int64(l.integer("BUZZ_SEARCH_CACHE_MIB", DefaultSearchCacheMiB, 0, 4096)) << 20
	c.ExpiredPurgeInterval = time.Duration(l.integer("BUZZ_EXPIRED_PURGE_INTERVAL_MS",
		int(DefaultExpiredPurgeInterval/time.Millisecond), 1000, 86400000)) * time.Millisecond
	c.HotWindow = l.hotWindow()
	c.GroupCommitDelay = l.millis("BUZZ_GROUP_COMMIT_DELAY_MS", DefaultGroupCommitDelay, 1, 100)
	if l.err != nil {
		return Config{}, warnings, l.err
	}
	if err := c.crossCheck(); err != nil {
		return Config{}, warnings, err
	}
	return c, warnings, nil
}

// Defaults is the configuration of an empty environment: every variable at
// its default. It is where code that builds a part directly (tests,
// benchmarks) takes its settings, so each default is declared once, here.
func Defaults() Config {
	c, _, err := Load(nil, nil)
	if err != nil {
		panic("config: the defaults do not load: " + err.Error())
	}
	return c
}

// Secure reports whether RELAY_URL is wss://: NIP-42 relay tags and NIP-98
// u tags are then expected with wss and https.
func (c Config) Secure() bool { return c.RelayScheme == "wss" }

// crossCheck applies the rules that involve several variables.
func (c Config) crossCheck() error {
	switch {
	case c.RequireRelayMembership && c.RelayOwnerPubkey == "":
		return &Error{"RELAY_OWNER_PUBKEY", "required when BUZZ_REQUIRE_RELAY_MEMBERSHIP=true"}
	case c.RedisURL != "" && c.DatabaseURL == "":
		return &Error{"REDIS_URL", "requires DATABASE_URL"}
	case c.RedisURL != "" && c.RelayPrivateKey == nil:
		return &Error{"BUZZ_RELAY_PRIVATE_KEY", "required when REDIS_URL is set"}
	case c.ReadDatabaseURL != "" && c.DatabaseURL == "":
		return &Error{"READ_DATABASE_URL", "requires DATABASE_URL"}
	case len(c.OperatorListeners) > 0 && c.OperatorAPIOrigin == "":
		return &Error{"RELAY_OPERATOR_API_ORIGIN", "required when BUZZ_OPERATOR_LISTENERS is set"}
	}
	return nil
}

// LogValue is the configuration as logged at start ("config loaded"): every
// field, with the private key replaced by "REDACTED" and passwords removed
// from the database and Redis URLs.
func (c Config) LogValue() slog.Value {
	key := "unset"
	if c.RelayPrivateKey != nil {
		key = redacted
	}
	return slog.GroupValue(
		slog.String("database_url", redactURL(c.DatabaseURL)),
		slog.String("data_dir", c.DataDir),
		slog.String("relay_url", c.RelayURL),
		slog.String("relay_host", c.RelayHost),
		slog.String("bind_addr", c.BindAddr),
		slog.Int("health_port", c.HealthPort),
		slog.Int("metrics_port", c.MetricsPort),
		slog.Bool("pprof_enabled", c.PprofEnabled),
		slog.Bool("auto_migrate", c.AutoMigrate),
		slog.String("relay_private_key", key),
		slog.Bool("require_auth_token", c.RequireAuthToken),
		slog.Bool("require_relay_membership", c.RequireRelayMembership),
		slog.String("relay_owner_pubkey", c.RelayOwnerPubkey),
		slog.Int("max_connections", c.MaxConnections),
		slog.Int("max_concurrent_handlers", c.MaxConcurrentHandlers),
		slog.Float64("ws_connect_rate", c.WSConnectRate),
		slog.Int("ws_connect_burst", c.WSConnectBurst),
		slog.String("trusted_proxies", formatPrefixes(c.TrustedProxies)),
		slog.Int("send_buffer", c.SendBuffer),
		slog.Int("max_frame_bytes", c.MaxFrameBytes),
		slog.Int("slow_client_grace_limit", c.SlowClientGraceLimit),
		slog.Int("max_event_bytes", c.Bytes.MaxEventBytes),
		slog.Int("read_max_bytes", c.Bytes.ReadMaxBytes),
		slog.Int("send_buffer_bytes", c.Bytes.SendBufferBytes),
		slog.String("cors_origins", strings.Join(c.CORSOrigins, ",")),
		slog.Int("db_pool_size", c.DBPoolSize),
		slog.String("redis_url", redactURL(c.RedisURL)),
		slog.Int("redis_pool_size", c.RedisPoolSize),
		slog.String("read_database_url", redactURL(c.ReadDatabaseURL)),
		slog.Int("db_read_pool_size", c.DBReadPoolSize),
		slog.Bool("audit_enabled", c.AuditEnabled),
		slog.String("operator_listeners", formatListeners(c.OperatorListeners)),
		slog.String("operator_api_origin", c.OperatorAPIOrigin),
		slog.Int64("operator_listener_timeout_ms", c.OperatorListenerTimeout.Milliseconds()),
		slog.String("log_level", c.LogLevel.String()),
		slog.String("log_format", c.LogFormat),
		slog.Any("admission", c.Admission),
		slog.Any("filters", c.Filters),
		slog.Int("search_rank_window", c.SearchRankWindow),
		slog.Int64("search_cache_mib", c.SearchCacheBytes>>20),
		slog.Int64("expired_purge_interval_ms", c.ExpiredPurgeInterval.Milliseconds()),
		slog.Any("hot_window", c.HotWindow),
		slog.Int64("group_commit_delay_ms", c.GroupCommitDelay.Milliseconds()),
		slog.Any("reads", c.Reads),
		slog.Any("neg", c.Neg),
	)
}

func formatPrefixes(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// formatListeners writes listeners as "<pubkey>@<host>;…" for the log:
// the URL's path and anything else after the host stay out, since webhook
// paths often carry a secret token. "" when there is none.
func formatListeners(ls []OperatorListener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		host := l.URL
		if u, err := url.Parse(l.URL); err == nil {
			host = u.Host
		}
		parts[i] = l.Pubkey + "@" + host
	}
	return strings.Join(parts, ";")
}

// knownVariables are the BUZZ_ variables read by this package or by the
// client CLI (BUZZ_PRIVATE_KEY, which often shares the operator's shell).
var knownVariables = []string{
	"BUZZ_DATA_DIR", "BUZZ_BIND_ADDR", "BUZZ_HEALTH_PORT", "BUZZ_METRICS_PORT", "BUZZ_PPROF_ENABLED",
	"BUZZ_AUTO_MIGRATE", "BUZZ_RELAY_PRIVATE_KEY", "BUZZ_REQUIRE_AUTH_TOKEN",
	"BUZZ_REQUIRE_RELAY_MEMBERSHIP", "BUZZ_MAX_CONNECTIONS", "BUZZ_MAX_CONCURRENT_HANDLERS",
	"BUZZ_WS_CONNECT_RATE", "BUZZ_WS_CONNECT_BURST", "BUZZ_TRUSTED_PROXIES",
	"BUZZ_SEND_BUFFER", "BUZZ_MAX_FRAME_BYTES", "BUZZ_SLOW_CLIENT_GRACE_LIMIT",
	"BUZZ_MAX_EVENT_BYTES", "BUZZ_READ_MAX_BYTES", "BUZZ_SEND_BUFFER_BYTES",
	"BUZZ_CORS_ORIGINS", "BUZZ_DB_POOL_SIZE", "BUZZ_REDIS_POOL_SIZE",
	"BUZZ_DB_READ_POOL_SIZE", "BUZZ_AUDIT_ENABLED", "BUZZ_OPERATOR_LISTENERS",
	"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS",
	"BUZZ_LOG_LEVEL", "BUZZ_LOG_FORMAT", "BUZZ_PRIVATE_KEY",
	// per-user admission (admission.go)
	"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN", "BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN",
	"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC", "BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN",
	"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN", "BUZZ_CHANNEL_CREATES_PER_HOUR", "BUZZ_MAX_P_TAGS",
	"BUZZ_FILTER_MAX_IDS", "BUZZ_FILTER_MAX_AUTHORS", "BUZZ_FILTER_MAX_KINDS",
	"BUZZ_FILTER_MAX_TAG_VALUES", "BUZZ_FILTER_MAX_TAG_KEYS",
	"BUZZ_SUB_MAX_INDEX_KEYS", "BUZZ_CONN_MAX_INDEX_KEYS", "BUZZ_CONN_MAX_FILTER_BYTES",
	// reads.go
	"BUZZ_READ_STATEMENT_TIMEOUT_MS", "BUZZ_DB_ACQUIRE_TIMEOUT_MS", "BUZZ_DB_WRITE_RESERVED",
	"BUZZ_MAX_CONCURRENT_READS", "BUZZ_READS_PER_CONNECTION", "BUZZ_READS_PER_PUBKEY",
	"BUZZ_READ_TIME_PER_SECOND_MS", "BUZZ_READ_TIME_BURST_MS",
	"BUZZ_HTTP_READ_TIMEOUT_MS", "BUZZ_HTTP_WRITE_TIMEOUT_MS", "BUZZ_HTTP_IDLE_TIMEOUT_MS",
	"BUZZ_HTTP_MAX_CONCURRENT", "BUZZ_MAX_CONNECTIONS_PER_ADDRESS",
	"BUZZ_SEARCH_RANK_WINDOW", "BUZZ_SEARCH_CACHE_MIB", "BUZZ_EXPIRED_PURGE_INTERVAL_MS",
	"BUZZ_HOT_WINDOW_EVENTS", "BUZZ_HOT_WINDOW_MIB", "BUZZ_HOT_WINDOW_COMMUNITIES",
	"BUZZ_GROUP_COMMIT_DELAY_MS",
	// neg.go
	"BUZZ_NEG_MAX_RECORDS", "BUZZ_NEG_MAX_SESSIONS", "BUZZ_NEG_IDLE_TIMEOUT_MS", "BUZZ_NEG_MAX_MESSAGE_BYTES",
}

// reservedPrefixes are kept for variables of other parts of the relay
// (search, audit, read state, windows, operator listeners); the ones this
// package reads are in knownVariables too. A typo after one of these
// prefixes is not caught here.
var reservedPrefixes = []string{
	"BUZZ_AUDIT_", "BUZZ_OPERATOR_", "BUZZ_SEARCH_", "BUZZ_READ_STATE_", "BUZZ_WINDOW_",
}

// unknownVariables returns one warning per set BUZZ_ variable that is neither
// known nor under a reserved prefix, suggesting the nearest known name.
func unknownVariables(environ []string) []string {
	var warnings []string
	seen := map[string]bool{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "BUZZ_") || strings.TrimSpace(value) == "" || seen[name] {
			continue
		}
		seen[name] = true
		if slices.Contains(knownVariables, name) || slices.ContainsFunc(reservedPrefixes, func(p string) bool {
			return strings.HasPrefix(name, p)
		}) {
			continue
		}
		w := fmt.Sprintf("unknown variable %s is ignored", name)
		if near := nearest(name); near != "" {
			w += fmt.Sprintf(" (did you mean %s?)", near)
		}
		warnings = append(warnings, w)
	}
	slices.Sort(warnings)
	return warnings
}

// nearest returns the known variable within edit distance 2 of name, or "".
func nearest(name string) string {
	best, bestDist := "", 3
	for _, k := range knownVariables {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
