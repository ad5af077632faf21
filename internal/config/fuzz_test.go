package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzLoad sets one variable to an arbitrary value: Load never panics, an
// error always names a variable in the "invalid <VARIABLE>: <reason>" form,
// and a success always has a mapped deployment host.
func FuzzLoad(f *testing.F) {
	names := []string{
		"DATABASE_URL", "BUZZ_DATA_DIR", "RELAY_URL", "BUZZ_BIND_ADDR", "BUZZ_HEALTH_PORT",
		"BUZZ_METRICS_PORT", "BUZZ_AUTO_MIGRATE", "BUZZ_RELAY_PRIVATE_KEY", "BUZZ_REQUIRE_AUTH_TOKEN",
		"BUZZ_REQUIRE_RELAY_MEMBERSHIP", "RELAY_OWNER_PUBKEY", "BUZZ_MAX_CONNECTIONS",
		"BUZZ_MAX_CONCURRENT_HANDLERS", "BUZZ_SEND_BUFFER", "BUZZ_MAX_FRAME_BYTES",
		"BUZZ_SLOW_CLIENT_GRACE_LIMIT", "BUZZ_CORS_ORIGINS", "BUZZ_DB_POOL_SIZE", "REDIS_URL",
		"BUZZ_REDIS_POOL_SIZE", "READ_DATABASE_URL", "BUZZ_DB_READ_POOL_SIZE", "BUZZ_AUDIT_ENABLED",
		"BUZZ_OPERATOR_LISTENERS", "BUZZ_LOG_LEVEL", "BUZZ_LOG_FORMAT", "BUZZ_SEND_BUFER",
		"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "RELAY_OPERATOR_API_ORIGIN",
		"BUZZ_WS_CONNECT_RATE", "BUZZ_WS_CONNECT_BURST", "BUZZ_TRUSTED_PROXIES",
	}
	f.Add(uint8(2), "wss://Relay.Example.:443/")
	f.Add(uint8(2), "ws://[::1]:3000")
	f.Add(uint8(13), "lots")
	f.Add(uint8(7), testKey)
	f.Add(uint8(16), "https://a.example, tauri://localhost")
	f.Add(uint8(0), "postgres://u:p@h/db")
	f.Add(uint8(18), "redis://:p@h")
	f.Add(uint8(26), "5")
	f.Add(uint8(27), "2500")
	f.Add(uint8(28), "https://relay.example/")
	f.Fuzz(func(t *testing.T, i uint8, value string) {
		name := names[int(i)%len(names)]
		c, _, err := Load(func(k string) string {
			if k == name {
				return value
			}
			return ""
		}, []string{name + "=" + value})
		if err != nil {
			var cerr *Error
			require.True(t, errors.As(err, &cerr))
			require.True(t, strings.HasPrefix(err.Error(), "invalid "+cerr.Variable+": "))
			return
		}
		require.NotEmpty(t, c.RelayHost)
		require.Equal(t, c.RelayHost, NormalizeHost(c.RelayHost))
		for _, o := range c.CORSOrigins {
			again, ok := parseOrigin(o)
			require.True(t, ok, o)
			require.Equal(t, o, again)
		}
	})
}

// FuzzOperatorListeners sets BUZZ_OPERATOR_LISTENERS (with an origin) to an
// arbitrary value: Load never panics, an error is always about that
// variable, and on success every pubkey is distinct lowercase hex of a valid
// key and every URL is already normalized.
func FuzzOperatorListeners(f *testing.F) {
	for _, s := range []string{
		" " + listenerA + ":https://A.example/hook ; " + listenerB + ":https://b.example:443 ;",
		listenerA + ":https://bot.example:8443/a:b",
		listenerA + ":https://[::1]:0443",
		listenerA + ":https://Bü.Example/x y",
		listenerA + ":https://a.example/p%2Fq",
		listenerA + ":http://a.example/",
		listenerA + ":https://]:0", // net/url takes "]" for a host name
		";;", "\xff", listenerA,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		env := map[string]string{"BUZZ_OPERATOR_LISTENERS": value, "RELAY_OPERATOR_API_ORIGIN": testOrigin}
		c, _, err := Load(func(k string) string { return env[k] }, nil)
		if err != nil {
			var cerr *Error
			require.True(t, errors.As(err, &cerr))
			require.Equal(t, "BUZZ_OPERATOR_LISTENERS", cerr.Variable)
			return
		}
		require.Equal(t, strings.TrimSpace(value) == "", c.OperatorListeners == nil)
		seen := map[string]bool{}
		for _, l := range c.OperatorListeners {
			require.Equal(t, strings.ToLower(l.Pubkey), l.Pubkey)
			require.True(t, validPubkey(l.Pubkey), l.Pubkey)
			require.False(t, seen[l.Pubkey], l.Pubkey)
			seen[l.Pubkey] = true
			again, err := parseDeliveryURL(l.URL)
			require.NoError(t, err, l.URL)
			require.Equal(t, l.URL, again)
			require.True(t, strings.HasPrefix(l.URL, "https://"), l.URL)
		}
	})
}

// FuzzNormalizeHost: never panics, and its result is a fixed point.
func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"  Relay.Example.:443 ", "relay.example:80", "relay.example:8443",
		"127.0.0.1:3000", "[::1]:3000", "", "relay.example..", "[2001:db8::1]", "a.:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		n := NormalizeHost(h)
		require.Equal(t, n, NormalizeHost(n), "input %q", h)
		require.Equal(t, n, strings.ToLower(n))
	})
}
