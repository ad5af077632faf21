package config

import (
	"bytes"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testKey    = "0000000000000000000000000000000000000000000000000000000000000001"
	testPubkey = "79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798" // G.x
)

// environment builds getenv and environ from NAME, VALUE pairs.
func environment(kv ...string) (func(string) string, []string) {
	m := map[string]string{}
	var environ []string
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
		environ = append(environ, kv[i]+"="+kv[i+1])
	}
	return func(k string) string { return m[k] }, environ
}

// requireRefused requires each value of the variable name to stop the
// start with an *Error naming that variable.
func requireRefused(t *testing.T, name string, values ...string) {
	t.Helper()
	for _, v := range values {
		_, _, err := load(t, name, v)
		var ce *Error
		require.ErrorAs(t, err, &ce, v)
		require.Equal(t, name, ce.Variable, v)
	}
}

// requireAccepted loads each value of want for the variable name and
// checks the setting get reads from the Config.
func requireAccepted[T comparable](t *testing.T, name string, get func(Config) T, want map[string]T) {
	t.Helper()
	for v, w := range want {
		c, _, err := load(t, name, v)
		require.NoError(t, err, v)
		require.Equal(t, w, get(c), v)
	}
}

func load(t *testing.T, kv ...string) (Config, []string, error) {
	t.Helper()
	getenv, environ := environment(kv...)
	return Load(getenv, environ)
}

func TestLoad(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c, warnings, err := load(t)
		require.NoError(t, err)
		require.Empty(t, warnings)
		require.Equal(t, Config{
			DataDir:                 "./buzz-data",
			RelayURL:                "ws://localhost:3000",
			RelayScheme:             "ws",
			RelayHost:               "localhost:3000",
			BindAddr:                "0.0.0.0:3000",
			HealthPort:              8080,
			MetricsPort:             9102,
			RequireAuthToken:        true,
			MaxConnections:          10000,
			MaxConcurrentHandlers:   1024,
			WSConnectBurst:          1,
			SendBuffer:              1000,
			MaxFrameBytes:           524288,
			SlowClientGraceLimit:    15,
			Bytes:                   ByteBudgets{MaxEventBytes: 393216, ReadMaxBytes: 8388608, SendBufferBytes: 16777216},
			DBPoolSize:              50,
			RedisPoolSize:           16,
			DBReadPoolSize:          50,
			AuditEnabled:            true,
			LogLevel:                slog.LevelInfo,
			LogFormat:               "auto",
			HeartbeatInterval:       30 * time.Second,
			AuthTimeout:             5 * time.Second,
			DrainTimeout:            30 * time.Second,
			MembershipRecheck:       60 * time.Second,
			AmbiguousCommitTimeout:  30 * time.Second,
			OperatorListenerTimeout: 5 * time.Second,
			Admission: Admission{HumanMessagesPerMin: 60, HumanAPICallsPerMin: 300, HumanWSEventsPerSec: 10,
				AgentMessagesPerMin: 120, AgentAPICallsPerMin: 600, ChannelCreatesPerHour: 20, MaxPTags: 100},
			Filters:              defaultFilterLimits,
			SearchRankWindow:     1000,
			SearchCacheBytes:     16 << 20,
			ExpiredPurgeInterval: 60 * time.Second,
			HotWindow:            HotWindow{Events: 50000, Bytes: 64 << 20, Communities: 4},
			GroupCommitDelay:     time.Millisecond,
			Reads: ReadLimits{
				StatementTimeout: 10 * time.Second, AcquireTimeout: 3 * time.Second,
				WriteReserved: 10, MaxConcurrentReads: 40, PerConnection: 4, PerPubkey: DefaultReadsPerPubkey(),
				TimePerSecond: 100 * time.Millisecond, TimeBurst: time.Second,
				HTTPReadTimeout: 30 * time.Second, HTTPWriteTimeout: 60 * time.Second,
				HTTPIdleTimeout: 120 * time.Second, HTTPMaxConcurrent: 256,
			},
			Neg: NegLimits{MaxRecords: 500_000, MaxSessions: 4, IdleTimeout: time.Minute, MaxMessageBytes: 128 << 10},
		}, c)
	})

	t.Run("NilGetenvMeansUnset", func(t *testing.T) {
		t.Parallel()
		c, warnings, err := Load(nil, nil)
		require.NoError(t, err)
		require.Empty(t, warnings)
		require.Equal(t, "localhost:3000", c.RelayHost)
		require.Equal(t, c, Defaults(), "Defaults is the empty environment's configuration")
		require.False(t, c.Secure())
	})

	t.Run("EveryVariable", func(t *testing.T) {
		t.Parallel()
		c, warnings, err := load(t,
			"DATABASE_URL", "postgres://buzz:pw@db.example:5432/buzz",
			"BUZZ_DATA_DIR", "/var/lib/buzz",
			"BUZZ_SEARCH_RANK_WINDOW", " 2500 ",
			"BUZZ_SEARCH_CACHE_MIB", "5",
			"BUZZ_EXPIRED_PURGE_INTERVAL_MS", "5000",
			"BUZZ_HOT_WINDOW_EVENTS", "1000", "BUZZ_HOT_WINDOW_MIB", "8", "BUZZ_HOT_WINDOW_COMMUNITIES", "2",
			"BUZZ_GROUP_COMMIT_DELAY_MS", "3",
			"RELAY_URL", "wss://Relay.Example.:443/",
			"BUZZ_BIND_ADDR", "127.0.0.1:4000",
			"BUZZ_HEALTH_PORT", "18080",
			"BUZZ_METRICS_PORT", "19102",
			"BUZZ_PPROF_ENABLED", "true",
			"BUZZ_AUTO_MIGRATE", "YES",
			"BUZZ_RELAY_PRIVATE_KEY", testKey,
			"BUZZ_REQUIRE_AUTH_TOKEN", "off",
			"BUZZ_REQUIRE_RELAY_MEMBERSHIP", "On",
			"RELAY_OWNER_PUBKEY", testPubkey,
			"BUZZ_MAX_CONNECTIONS", "2",
			"BUZZ_MAX_CONCURRENT_HANDLERS", "65536",
			"BUZZ_WS_CONNECT_RATE", "2.5",
			"BUZZ_WS_CONNECT_BURST", "40",
			"BUZZ_TRUSTED_PROXIES", " 10.1.2.3/8, 192.0.2.7,,::ffff:198.51.100.1, 2001:db8::/32 ",
			"BUZZ_SEND_BUFFER", "16",
			"BUZZ_MAX_FRAME_BYTES", "16777216",
			"BUZZ_SLOW_CLIENT_GRACE_LIMIT", "255",
			"BUZZ_CORS_ORIGINS", " https://App.Example , tauri://localhost,http://127.0.0.1:5173/,",
			"BUZZ_DB_POOL_SIZE", "7",
			"REDIS_URL", "rediss://:secret@redis.example:6380/0",
			"BUZZ_REDIS_POOL_SIZE", "1000",
			"READ_DATABASE_URL", "host=replica user=buzz password=pw",
			"BUZZ_DB_READ_POOL_SIZE", "3",
			"BUZZ_AUDIT_ENABLED", "0",
			"BUZZ_OPERATOR_LISTENERS", " "+strings.ToLower(testPubkey)+":https://bot.example/hook ",
			"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "250",
			"RELAY_OPERATOR_API_ORIGIN", "https://relay.example/",
			"BUZZ_LOG_LEVEL", "DEBUG",
			"BUZZ_LOG_FORMAT", "Json",
			"BUZZ_RATE_LIMIT_HUMAN_MESSAGES_PER_MIN", "1",
			"BUZZ_RATE_LIMIT_HUMAN_API_CALLS_PER_MIN", "2",
			"BUZZ_RATE_LIMIT_HUMAN_WS_EVENTS_PER_SEC", "3",
			"BUZZ_RATE_LIMIT_AGENT_STANDARD_MESSAGES_PER_MIN", "4",
			"BUZZ_RATE_LIMIT_AGENT_STANDARD_API_CALLS_PER_MIN", "5",
			"BUZZ_CHANNEL_CREATES_PER_HOUR", "0",
			"BUZZ_MAX_P_TAGS", "7",
		)
		require.NoError(t, err)
		require.Empty(t, warnings)
		wantKey, _ := hex.DecodeString(testKey)
		require.Equal(t, Config{
			DatabaseURL:            "postgres://buzz:pw@db.example:5432/buzz",
			DataDir:                "/var/lib/buzz",
			RelayURL:               "wss://Relay.Example.:443/",
			RelayScheme:            "wss",
			RelayHost:              "relay.example",
			BindAddr:               "127.0.0.1:4000",
			HealthPort:             18080,
			MetricsPort:            19102,
			PprofEnabled:           true,
			AutoMigrate:            true,
			AutoMigrateSet:         true,
			RelayPrivateKey:        wantKey,
			RequireAuthToken:       false,
			RequireRelayMembership: true,
			RelayOwnerPubkey:       strings.ToLower(testPubkey),
			MaxConnections:         2,
			MaxConcurrentHandlers:  65536,
			WSConnectRate:          2.5,
			WSConnectBurst:         40,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
				netip.MustParsePrefix("198.51.100.1/32"), netip.MustParsePrefix("2001:db8::/32")},
			SendBuffer:           16,
			MaxFrameBytes:        16777216,
			SlowClientGraceLimit: 255,
			Bytes:                ByteBudgets{MaxEventBytes: 393216, ReadMaxBytes: 8388608, SendBufferBytes: 16777216},
			CORSOrigins:          []string{"https://app.example", "tauri://localhost", "http://127.0.0.1:5173"},
			DBPoolSize:           7,
			RedisURL:             "rediss://:secret@redis.example:6380/0",
			RedisPoolSize:        1000,
			ReadDatabaseURL:      "host=replica user=buzz password=pw",
			DBReadPoolSize:       3,
			AuditEnabled:         false,
			OperatorListeners: []OperatorListener{
				{Pubkey: strings.ToLower(testPubkey), URL: "https://bot.example/hook"},
			},
			OperatorListenerTimeout: 250 * time.Millisecond,
			OperatorAPIOrigin:       "https://relay.example",
			LogLevel:                slog.LevelDebug,
			LogFormat:               "json",
			HeartbeatInterval:       30 * time.Second,
			AuthTimeout:             5 * time.Second,
			DrainTimeout:            30 * time.Second,
			MembershipRecheck:       60 * time.Second,
			AmbiguousCommitTimeout:  30 * time.Second,
			Admission: Admission{HumanMessagesPerMin: 1, HumanAPICallsPerMin: 2, HumanWSEventsPerSec: 3,
				AgentMessagesPerMin: 4, AgentAPICallsPerMin: 5, ChannelCreatesPerHour: 0, MaxPTags: 7},
			Filters:              defaultFilterLimits,
			SearchRankWindow:     2500,
			SearchCacheBytes:     5 << 20,
			ExpiredPurgeInterval: 5 * time.Second,
			HotWindow:            HotWindow{Events: 1000, Bytes: 8 << 20, Communities: 2},
			GroupCommitDelay:     3 * time.Millisecond,
			Reads: ReadLimits{
				StatementTimeout: 10 * time.Second, AcquireTimeout: 3 * time.Second,
				WriteReserved: 1, MaxConcurrentReads: 6, PerConnection: 4, PerPubkey: DefaultReadsPerPubkey(),
				TimePerSecond: 100 * time.Millisecond, TimeBurst: time.Second,
				HTTPReadTimeout: 30 * time.Second, HTTPWriteTimeout: 60 * time.Second,
				HTTPIdleTimeout: 120 * time.Second, HTTPMaxConcurrent: 256,
			},
			Neg: NegLimits{MaxRecords: 500_000, MaxSessions: 4, IdleTimeout: time.Minute, MaxMessageBytes: 128 << 10},
		}, c)
	})

	t.Run("ReadPoolFollowsWriterPool", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_DB_POOL_SIZE", "12")
		require.NoError(t, err)
		require.Equal(t, 12, c.DBReadPoolSize)
	})

	t.Run("AutoMigrateExplicitFalse", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_AUTO_MIGRATE", "false")
		require.NoError(t, err)
		require.False(t, c.AutoMigrate)
		require.True(t, c.AutoMigrateSet)
	})

	t.Run("EmptyMeansUnset", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t, "BUZZ_SEND_BUFFER", "", "RELAY_URL", "  ", "BUZZ_REQUIRE_AUTH_TOKEN", "")
		require.NoError(t, err)
		require.Equal(t, 1000, c.SendBuffer)
		require.Equal(t, "localhost:3000", c.RelayHost)
		require.True(t, c.RequireAuthToken)
	})

	t.Run("Booleans", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]bool{
			"true": true, "TRUE": true, "1": true, "yes": true, "Yes": true, "on": true, "ON": true,
			"false": false, "False": false, "0": false, "no": false, "NO": false, "off": false, "Off": false,
		} {
			c, _, err := load(t, "BUZZ_AUDIT_ENABLED", raw, "BUZZ_REQUIRE_AUTH_TOKEN", raw)
			require.NoError(t, err, raw)
			require.Equal(t, want, c.AuditEnabled, raw)
			require.Equal(t, want, c.RequireAuthToken, raw)
		}
	})

	t.Run("RelayURLHosts", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]string{
			"ws://localhost:3000":        "localhost:3000",
			"ws://127.0.0.1:3000":        "localhost:3000",
			"ws://[::1]:3000":            "localhost:3000",
			"wss://relay.example:443":    "relay.example",
			"WSS://Relay.Example:8443/":  "relay.example:8443",
			"ws://relay.example:80/path": "relay.example",
		} {
			c, _, err := load(t, "RELAY_URL", raw)
			require.NoError(t, err, raw)
			require.Equal(t, want, c.RelayHost, raw)
		}
	})
}

func TestLoadInvalid(t *testing.T) {
	t.Parallel()

	intRange := func(lo, hi int, got string) string {
		return "must be an integer between " + strconv.Itoa(lo) + " and " + strconv.Itoa(hi) + ` (got "` + got + `")`
	}
	tests := []struct {
		name    string
		env     []string
		wantVar string
		wantErr string // full text; "" checks only the variable
	}{
		{"SendBufferExample", []string{"BUZZ_SEND_BUFFER", "lots"}, "BUZZ_SEND_BUFFER",
			`invalid BUZZ_SEND_BUFFER: must be an integer between 16 and 1000000 (got "lots")`},
		{"HealthPortAbc", []string{"BUZZ_HEALTH_PORT", "abc"}, "BUZZ_HEALTH_PORT", "invalid BUZZ_HEALTH_PORT: " + intRange(1, 65535, "abc")},
		{"HealthPort70000", []string{"BUZZ_HEALTH_PORT", "70000"}, "BUZZ_HEALTH_PORT", "invalid BUZZ_HEALTH_PORT: " + intRange(1, 65535, "70000")},
		{"HealthPortZero", []string{"BUZZ_HEALTH_PORT", "0"}, "BUZZ_HEALTH_PORT", ""},
		{"MetricsPortAbc", []string{"BUZZ_METRICS_PORT", "abc"}, "BUZZ_METRICS_PORT", ""},
		{"MetricsPort70000", []string{"BUZZ_METRICS_PORT", "70000"}, "BUZZ_METRICS_PORT", "invalid BUZZ_METRICS_PORT: " + intRange(1, 65535, "70000")},
		{"MaxConnectionsAbc", []string{"BUZZ_MAX_CONNECTIONS", "abc"}, "BUZZ_MAX_CONNECTIONS", "invalid BUZZ_MAX_CONNECTIONS: " + intRange(1, 1000000, "abc")},
		{"MaxConnectionsZero", []string{"BUZZ_MAX_CONNECTIONS", "0"}, "BUZZ_MAX_CONNECTIONS", ""},
		{"MaxConcurrentHandlersAbc", []string{"BUZZ_MAX_CONCURRENT_HANDLERS", "abc"}, "BUZZ_MAX_CONCURRENT_HANDLERS", "invalid BUZZ_MAX_CONCURRENT_HANDLERS: " + intRange(1, 65536, "abc")},
		{"MaxConcurrentHandlersTooMany", []string{"BUZZ_MAX_CONCURRENT_HANDLERS", "65537"}, "BUZZ_MAX_CONCURRENT_HANDLERS", ""},
		{"WSConnectRateAbc", []string{"BUZZ_WS_CONNECT_RATE", "fast"}, "BUZZ_WS_CONNECT_RATE",
			`invalid BUZZ_WS_CONNECT_RATE: must be a number between 0 and 100000 (got "fast")`},
		{"WSConnectRateNegative", []string{"BUZZ_WS_CONNECT_RATE", "-1"}, "BUZZ_WS_CONNECT_RATE", ""},
		{"WSConnectRateNaN", []string{"BUZZ_WS_CONNECT_RATE", "NaN"}, "BUZZ_WS_CONNECT_RATE", ""},
		{"WSConnectBurstZero", []string{"BUZZ_WS_CONNECT_BURST", "0"}, "BUZZ_WS_CONNECT_BURST", ""},
		{"TrustedProxiesHostname", []string{"BUZZ_TRUSTED_PROXIES", "10.0.0.1,proxy.internal"}, "BUZZ_TRUSTED_PROXIES",
			`invalid BUZZ_TRUSTED_PROXIES: entry "proxy.internal" is not an IP address or CIDR prefix`},
		{"TrustedProxiesBadBits", []string{"BUZZ_TRUSTED_PROXIES", "10.0.0.0/33"}, "BUZZ_TRUSTED_PROXIES", ""},
		{"SendBufferTooSmall", []string{"BUZZ_SEND_BUFFER", "15"}, "BUZZ_SEND_BUFFER", ""},
		{"MaxFrameBytesAbc", []string{"BUZZ_MAX_FRAME_BYTES", "abc"}, "BUZZ_MAX_FRAME_BYTES", "invalid BUZZ_MAX_FRAME_BYTES: " + intRange(65536, 16777216, "abc")},
		{"MaxFrameBytesTooSmall", []string{"BUZZ_MAX_FRAME_BYTES", "65535"}, "BUZZ_MAX_FRAME_BYTES", ""},
		{"SlowClientGraceLimitAbc", []string{"BUZZ_SLOW_CLIENT_GRACE_LIMIT", "abc"}, "BUZZ_SLOW_CLIENT_GRACE_LIMIT", "invalid BUZZ_SLOW_CLIENT_GRACE_LIMIT: " + intRange(1, 255, "abc")},
		{"SlowClientGraceLimit256", []string{"BUZZ_SLOW_CLIENT_GRACE_LIMIT", "256"}, "BUZZ_SLOW_CLIENT_GRACE_LIMIT", ""},
		{"DBPoolSizeAbc", []string{"BUZZ_DB_POOL_SIZE", "abc"}, "BUZZ_DB_POOL_SIZE", "invalid BUZZ_DB_POOL_SIZE: " + intRange(1, 1000, "abc")},
		{"DBPoolSizeNegative", []string{"BUZZ_DB_POOL_SIZE", "-1"}, "BUZZ_DB_POOL_SIZE", ""},
		{"RedisPoolSizeAbc", []string{"BUZZ_REDIS_POOL_SIZE", "abc"}, "BUZZ_REDIS_POOL_SIZE", "invalid BUZZ_REDIS_POOL_SIZE: " + intRange(1, 1000, "abc")},
		{"RedisPoolSize1001", []string{"BUZZ_REDIS_POOL_SIZE", "1001"}, "BUZZ_REDIS_POOL_SIZE", ""},
		{"DBReadPoolSizeAbc", []string{"BUZZ_DB_READ_POOL_SIZE", "abc"}, "BUZZ_DB_READ_POOL_SIZE", "invalid BUZZ_DB_READ_POOL_SIZE: " + intRange(1, 1000, "abc")},
		{"DBReadPoolSizeFloat", []string{"BUZZ_DB_READ_POOL_SIZE", "1.5"}, "BUZZ_DB_READ_POOL_SIZE", ""},
		{"AutoMigrateMaybe", []string{"BUZZ_AUTO_MIGRATE", "maybe"}, "BUZZ_AUTO_MIGRATE",
			`invalid BUZZ_AUTO_MIGRATE: must be one of true, false, 1, 0, yes, no, on, off (got "maybe")`},
		{"PprofEnabledMaybe", []string{"BUZZ_PPROF_ENABLED", "debug"}, "BUZZ_PPROF_ENABLED", ""},
		{"RequireAuthTokenMaybe", []string{"BUZZ_REQUIRE_AUTH_TOKEN", "y"}, "BUZZ_REQUIRE_AUTH_TOKEN", ""},
		{"RequireRelayMembershipMaybe", []string{"BUZZ_REQUIRE_RELAY_MEMBERSHIP", "2"}, "BUZZ_REQUIRE_RELAY_MEMBERSHIP", ""},
		{"AuditEnabledMaybe", []string{"BUZZ_AUDIT_ENABLED", "enabled"}, "BUZZ_AUDIT_ENABLED", ""},
		{"AuditEnabledSometimes", []string{"BUZZ_AUDIT_ENABLED", "sometimes"}, "BUZZ_AUDIT_ENABLED",
			`invalid BUZZ_AUDIT_ENABLED: "sometimes" is not a boolean (use true or false)`},
		{"PrivateKeyXyz", []string{"BUZZ_RELAY_PRIVATE_KEY", "xyz"}, "BUZZ_RELAY_PRIVATE_KEY",
			"invalid BUZZ_RELAY_PRIVATE_KEY: must be 64 hex characters (got 3 characters)"},
		{"PrivateKeyNsec", []string{"BUZZ_RELAY_PRIVATE_KEY", "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"}, "BUZZ_RELAY_PRIVATE_KEY",
			"invalid BUZZ_RELAY_PRIVATE_KEY: must be 64 hex characters (nsec keys are not accepted)"},
		{"PrivateKeyZero", []string{"BUZZ_RELAY_PRIVATE_KEY", strings.Repeat("0", 64)}, "BUZZ_RELAY_PRIVATE_KEY",
			"invalid BUZZ_RELAY_PRIVATE_KEY: is not a valid secp256k1 private key"},
		{"PrivateKeyAboveOrder", []string{"BUZZ_RELAY_PRIVATE_KEY", strings.Repeat("f", 64)}, "BUZZ_RELAY_PRIVATE_KEY", ""},
		{"OwnerPubkeyShort", []string{"RELAY_OWNER_PUBKEY", "abc"}, "RELAY_OWNER_PUBKEY",
			`invalid RELAY_OWNER_PUBKEY: must be 64 hex characters (got "abc")`},
		{"OwnerPubkeyNpub", []string{"RELAY_OWNER_PUBKEY", "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"}, "RELAY_OWNER_PUBKEY", ""},
		{"OwnerPubkeyNotOnCurve", []string{"RELAY_OWNER_PUBKEY", strings.Repeat("0", 63) + "5"}, "RELAY_OWNER_PUBKEY",
			`invalid RELAY_OWNER_PUBKEY: is not a valid x-only public key (got "` + strings.Repeat("0", 63) + `5")`},
		{"RelayURLHTTP", []string{"RELAY_URL", "http://x"}, "RELAY_URL",
			`invalid RELAY_URL: must be a ws:// or wss:// URL with a host (got "http://x")`},
		{"RelayURLNoHost", []string{"RELAY_URL", "ws://"}, "RELAY_URL", ""},
		{"RelayURLBare", []string{"RELAY_URL", "relay.example"}, "RELAY_URL", ""},
		{"RelayURLCredentials", []string{"RELAY_URL", "wss://u:p@relay.example"}, "RELAY_URL",
			"invalid RELAY_URL: must not contain credentials"},
		{"RelayURLQuery", []string{"RELAY_URL", "wss://relay.example/?x=1"}, "RELAY_URL", ""},
		{"RelayURLBadHost", []string{"RELAY_URL", "wss://relay..example../"}, "RELAY_URL", ""},
		{"BindAddrNoPort", []string{"BUZZ_BIND_ADDR", "0.0.0.0"}, "BUZZ_BIND_ADDR",
			`invalid BUZZ_BIND_ADDR: must be host:port with a port between 0 and 65535 (got "0.0.0.0")`},
		{"BindAddrBadPort", []string{"BUZZ_BIND_ADDR", ":http"}, "BUZZ_BIND_ADDR", ""},
		{"DatabaseURLMySQL", []string{"DATABASE_URL", "mysql://u:secret@h/db"}, "DATABASE_URL",
			"invalid DATABASE_URL: must be a postgres:// or postgresql:// URL or a key=value connection string"},
		{"DatabaseURLWord", []string{"DATABASE_URL", "buzz"}, "DATABASE_URL", ""},
		{"ReadDatabaseURLHTTP", []string{"DATABASE_URL", "postgres://h/db", "READ_DATABASE_URL", "http://h"}, "READ_DATABASE_URL", ""},
		{"RedisURLHTTP", []string{"DATABASE_URL", "postgres://h/db", "BUZZ_RELAY_PRIVATE_KEY", testKey, "REDIS_URL", "http://:secret@h"}, "REDIS_URL",
			"invalid REDIS_URL: must be a redis:// or rediss:// URL"},
		{"CORSPath", []string{"BUZZ_CORS_ORIGINS", "https://a.example,https://b.example/app"}, "BUZZ_CORS_ORIGINS",
			`invalid BUZZ_CORS_ORIGINS: entry "https://b.example/app" is not an origin (want scheme://host[:port])`},
		{"CORSStar", []string{"BUZZ_CORS_ORIGINS", "*"}, "BUZZ_CORS_ORIGINS", ""},
		{"CORSBareHost", []string{"BUZZ_CORS_ORIGINS", "app.example"}, "BUZZ_CORS_ORIGINS", ""},
		{"CORSQuery", []string{"BUZZ_CORS_ORIGINS", "https://app.example?x"}, "BUZZ_CORS_ORIGINS", ""},
		{"CORSStrayBracket", []string{"BUZZ_CORS_ORIGINS", "https://app]"}, "BUZZ_CORS_ORIGINS", ""},
		{"LogLevelTrace", []string{"BUZZ_LOG_LEVEL", "trace"}, "BUZZ_LOG_LEVEL",
			`invalid BUZZ_LOG_LEVEL: must be one of debug, info, warn, error (got "trace")`},
		{"LogFormatYAML", []string{"BUZZ_LOG_FORMAT", "yaml"}, "BUZZ_LOG_FORMAT",
			`invalid BUZZ_LOG_FORMAT: must be one of auto, json, text (got "yaml")`},

		{"MembershipWithoutOwner", []string{"BUZZ_REQUIRE_RELAY_MEMBERSHIP", "true"}, "RELAY_OWNER_PUBKEY",
			"invalid RELAY_OWNER_PUBKEY: required when BUZZ_REQUIRE_RELAY_MEMBERSHIP=true"},
		{"RedisWithoutDatabase", []string{"REDIS_URL", "redis://h:6379", "BUZZ_RELAY_PRIVATE_KEY", testKey}, "REDIS_URL",
			"invalid REDIS_URL: requires DATABASE_URL"},
		{"RedisWithoutKey", []string{"REDIS_URL", "redis://h:6379", "DATABASE_URL", "postgres://h/db"}, "BUZZ_RELAY_PRIVATE_KEY",
			"invalid BUZZ_RELAY_PRIVATE_KEY: required when REDIS_URL is set"},
		{"ReplicaWithoutDatabase", []string{"READ_DATABASE_URL", "postgres://replica/db"}, "READ_DATABASE_URL",
			"invalid READ_DATABASE_URL: requires DATABASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := load(t, tt.env...)
			require.Error(t, err)
			require.Zero(t, c)
			var cerr *Error
			require.True(t, errors.As(err, &cerr))
			require.Equal(t, tt.wantVar, cerr.Variable)
			require.True(t, strings.HasPrefix(err.Error(), "invalid "+tt.wantVar+": "), err.Error())
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
			}
			require.NotContains(t, err.Error(), "secret", "errors must not echo secrets")
		})
	}
}

func TestLoadFirstErrorWins(t *testing.T) {
	t.Parallel()
	_, _, err := load(t, "BUZZ_LOG_LEVEL", "loud", "BUZZ_HEALTH_PORT", "abc")
	require.EqualError(t, err, `invalid BUZZ_HEALTH_PORT: must be an integer between 1 and 65535 (got "abc")`)
}

func TestLoadWarnings(t *testing.T) {
	t.Parallel()

	t.Run("Typo", func(t *testing.T) {
		t.Parallel()
		_, warnings, err := load(t, "BUZZ_SEND_BUFER", "5")
		require.NoError(t, err)
		require.Equal(t, []string{"unknown variable BUZZ_SEND_BUFER is ignored (did you mean BUZZ_SEND_BUFFER?)"}, warnings)
	})

	t.Run("UnknownWithoutSuggestion", func(t *testing.T) {
		t.Parallel()
		_, warnings, err := load(t, "BUZZ_TOTALLY_NEW", "1", "BUZZ_LOGLEVEL", "x")
		require.NoError(t, err)
		require.Equal(t, []string{
			"unknown variable BUZZ_LOGLEVEL is ignored (did you mean BUZZ_LOG_LEVEL?)",
			"unknown variable BUZZ_TOTALLY_NEW is ignored",
		}, warnings)
	})

	t.Run("KnownAndReservedAreQuiet", func(t *testing.T) {
		t.Parallel()
		_, warnings, err := load(t,
			"BUZZ_SEND_BUFFER", "100",
			"BUZZ_PRIVATE_KEY", testKey,
			"BUZZ_AUDIT_CHECKPOINT_EVERY", "1000",
			"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "5000",
			"BUZZ_SEARCH_LANGUAGE", "simple",
			"BUZZ_READ_STATE_RETENTION", "30d",
			"BUZZ_WINDOW_SIZE", "50",
			"PATH", "/usr/bin",
			"BUZZ_EMPTY_TYPO", "",
		)
		require.NoError(t, err)
		require.Empty(t, warnings)
	})

	t.Run("ReturnedWithError", func(t *testing.T) {
		t.Parallel()
		_, warnings, err := load(t, "BUZZ_SEND_BUFFER", "lots", "BUZZ_SEND_BUFER", "5")
		require.Error(t, err)
		require.Len(t, warnings, 1)
	})
}

func TestLogValue(t *testing.T) {
	t.Parallel()
	c, _, err := load(t,
		"DATABASE_URL", "postgres://buzz:db-secret@db.example/buzz?sslmode=require",
		"READ_DATABASE_URL", "host=replica password='replica secret' user=buzz",
		"REDIS_URL", "redis://:redis-secret@redis.example:6379/0",
		"BUZZ_RELAY_PRIVATE_KEY", testKey,
	)
	require.NoError(t, err)

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config loaded", slog.Any("config", c))
	out := buf.String()
	for _, secret := range []string{"db-secret", "replica secret", "redis-secret", testKey, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE"} {
		require.NotContains(t, out, secret)
	}
	require.Contains(t, out, `"database_url":"postgres://buzz:REDACTED@db.example/buzz?sslmode=require"`)
	require.Contains(t, out, `"relay_private_key":"REDACTED"`)
	require.Contains(t, out, `"send_buffer":1000`)
	require.Contains(t, out, `"relay_host":"localhost:3000"`)
	require.Contains(t, out, `"pprof_enabled":false`)
	require.Contains(t, out, `"ws_connect_rate":0`)
	require.Contains(t, out, `"max_event_bytes":393216,"read_max_bytes":8388608,"send_buffer_bytes":16777216`)
}

// The burst defaults to four seconds of the rate, at least 1.
func TestConnectBurstDefault(t *testing.T) {
	t.Parallel()
	for rate, burst := range map[string]int{"0": 1, "0.1": 1, "0.5": 2, "20": 80} {
		c, _, err := load(t, "BUZZ_WS_CONNECT_RATE", rate)
		require.NoError(t, err)
		require.Equal(t, burst, c.WSConnectBurst, rate)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"":                               "",
		"postgres://buzz@h/db":           "postgres://buzz@h/db",
		"postgres://buzz:pw@h/db":        "postgres://buzz:REDACTED@h/db",
		"postgres://buzz:p@ss@h:5432/db": "postgres://buzz:REDACTED@h:5432/db",
		"postgresql://h/db?user=u&password=pw&x=1": "postgresql://h/db?user=u&password=REDACTED&x=1",
		"postgres://h/db?sslpassword=pw":           "postgres://h/db?sslpassword=REDACTED",
		"redis://:pw@h:6379/0":                     "redis://:REDACTED@h:6379/0",
		"rediss://default:pw@h":                    "rediss://default:REDACTED@h",
		"host=h password=pw user=u":                "host=h password=REDACTED user=u",
		"host=h password = 'a b\\' c' user=u":      "host=h password = REDACTED user=u",
		"postgres://u:pw@h1:5432,h2:5432/db?x=1#f": "postgres://u:REDACTED@h1:5432,h2:5432/db?x=1#f",
	} {
		require.Equal(t, want, redactURL(raw), raw)
	}
}

// The rank window a search ranks (docs/PROTOCOL.md §12.4): 100–10000, and
// any other value stops the start, never falls back to the default.
func TestSearchRankWindow(t *testing.T) {
	t.Parallel()
	requireAccepted(t, "BUZZ_SEARCH_RANK_WINDOW", func(c Config) int { return c.SearchRankWindow },
		map[string]int{"": 1000, "  ": 1000, "100": 100, "10000": 10_000, " 2500 ": 2500})
	requireRefused(t, "BUZZ_SEARCH_RANK_WINDOW", "99", "10001", "0", "-5", "1e3", "lots", "1000.5")
}

// The search page cache's size (docs/OPERATIONS.md "Search cache"):
// 0–4096 MiB, 0 off, default 16 MiB; any other value stops the start.
func TestSearchCacheMiB(t *testing.T) {
	t.Parallel()
	requireAccepted(t, "BUZZ_SEARCH_CACHE_MIB", func(c Config) int64 { return c.SearchCacheBytes },
		map[string]int64{"": 16 << 20, "0": 0, "1": 1 << 20, "4096": 4096 << 20, " 3 ": 3 << 20})
	requireRefused(t, "BUZZ_SEARCH_CACHE_MIB", "-1", "4097", "1e3", "much", "1.5")
}

// The expired-event purge interval (docs/OPERATIONS.md "Expired events"):
// 1,000–86,400,000 ms, default 60 s; any other value stops the start.
func TestExpiredPurgeInterval(t *testing.T) {
	t.Parallel()
	requireAccepted(t, "BUZZ_EXPIRED_PURGE_INTERVAL_MS", func(c Config) time.Duration { return c.ExpiredPurgeInterval },
		map[string]time.Duration{"": time.Minute, "1000": time.Second, "86400000": 24 * time.Hour, " 2500 ": 2500 * time.Millisecond})
	requireRefused(t, "BUZZ_EXPIRED_PURGE_INTERVAL_MS", "999", "86400001", "0", "-5", "1e3", "often", "1000.5")
}

// The group commit delay (docs/OPERATIONS.md "Group commit"): 1–100 ms,
// default 1 ms; any other value stops the start.
func TestGroupCommitDelay(t *testing.T) {
	t.Parallel()
	requireAccepted(t, "BUZZ_GROUP_COMMIT_DELAY_MS", func(c Config) time.Duration { return c.GroupCommitDelay },
		map[string]time.Duration{"": time.Millisecond, "1": time.Millisecond, "100": 100 * time.Millisecond, " 7 ": 7 * time.Millisecond})
	requireRefused(t, "BUZZ_GROUP_COMMIT_DELAY_MS", "0", "101", "-1", "1.5", "soon")
}

// The hot window's sizes: 0 events turns it off; each variable at its
// bounds and one past them.
func TestHotWindow(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"BUZZ_HOT_WINDOW_EVENTS", "0", true}, {"BUZZ_HOT_WINDOW_EVENTS", "10000000", true},
		{"BUZZ_HOT_WINDOW_EVENTS", "-1", false}, {"BUZZ_HOT_WINDOW_EVENTS", "10000001", false},
		{"BUZZ_HOT_WINDOW_MIB", "1", true}, {"BUZZ_HOT_WINDOW_MIB", "65536", true},
		{"BUZZ_HOT_WINDOW_MIB", "0", false}, {"BUZZ_HOT_WINDOW_MIB", "65537", false},
		{"BUZZ_HOT_WINDOW_COMMUNITIES", "1", true}, {"BUZZ_HOT_WINDOW_COMMUNITIES", "10000", true},
		{"BUZZ_HOT_WINDOW_COMMUNITIES", "0", false}, {"BUZZ_HOT_WINDOW_COMMUNITIES", "10001", false},
	} {
		_, _, err := load(t, tc.name, tc.value)
		if tc.ok {
			require.NoError(t, err, tc.name+"="+tc.value)
			continue
		}
		var ce *Error
		require.ErrorAs(t, err, &ce, tc.name+"="+tc.value)
		require.Equal(t, tc.name, ce.Variable)
	}
	c, _, err := load(t, "BUZZ_HOT_WINDOW_MIB", "3")
	require.NoError(t, err)
	require.Equal(t, int64(3<<20), c.HotWindow.Bytes)
}
