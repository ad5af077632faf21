package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// A malformed operator-listener variable stops
// startup with status 2 and its exact text, before any port opens.
func TestOperatorListenerConfigInvalid(t *testing.T) {
	t.Parallel()
	a, b := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
	const (
		prefix   = "invalid BUZZ_OPERATOR_LISTENERS: "
		notHTTPS = prefix + "endpoints must be HTTPS URLs without credentials, query, or fragment"
		origin   = "https://relay.example"
	)
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"HTTPURL", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":http://a.example/hook"}, notHTTPS},
		{"Query", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example/hook?q=1"}, notHTTPS},
		{"EmptyQuery", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example/hook?"}, notHTTPS},
		{"Fragment", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example/hook#f"}, notHTTPS},
		{"Credentials", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://u:p@a.example/"}, notHTTPS},
		{"Pubkey63", map[string]string{"BUZZ_OPERATOR_LISTENERS": a[:63] + ":https://a.example/"},
			prefix + "entry has an invalid pubkey: " + a[:63]},
		{"PubkeyNotOnCurve", map[string]string{"BUZZ_OPERATOR_LISTENERS": strings.Repeat("0", 63) + "5:https://a.example/"},
			prefix + "entry has an invalid pubkey: " + strings.Repeat("0", 63) + "5"},
		{"DuplicateMixedCase", map[string]string{"BUZZ_OPERATOR_LISTENERS": strings.ToUpper(a) + ":https://a.example/;" + b + ":https://b.example/;" + a + ":https://c.example/"},
			prefix + "contains duplicate pubkey: " + a},
		{"OnlySemicolons", map[string]string{"BUZZ_OPERATOR_LISTENERS": ";;"}, prefix + "must contain pubkey:delivery_url pairs"},
		{"NoColon", map[string]string{"BUZZ_OPERATOR_LISTENERS": a}, prefix + "entries must be pubkey:delivery_url pairs"},
		{"NotUTF8", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example/\xff"}, prefix + "must be valid UTF-8"},
		{"URLParse", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example:x/"},
			prefix + `endpoint is not a valid URL: invalid port ":x" after host`},
		{"OriginMissing", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example/", "RELAY_OPERATOR_API_ORIGIN": ""},
			"invalid RELAY_OPERATOR_API_ORIGIN: required when BUZZ_OPERATOR_LISTENERS is set"},
		{"OriginWithPath", map[string]string{"RELAY_OPERATOR_API_ORIGIN": "https://relay.example/api"},
			"invalid RELAY_OPERATOR_API_ORIGIN: must be an http(s) origin without path, query, fragment, or credentials"},
		{"Timeout50", map[string]string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS": "50"},
			"invalid BUZZ_OPERATOR_LISTENER_TIMEOUT_MS: must be an integer in 100..=10000"},
		{"TimeoutWord", map[string]string{"BUZZ_OPERATOR_LISTENERS": a + ":https://a.example/", "BUZZ_OPERATOR_LISTENER_TIMEOUT_MS": "soon"},
			"invalid BUZZ_OPERATOR_LISTENER_TIMEOUT_MS: must be an integer in 100..=10000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := relayEnv(t)
			env["DATABASE_URL"] = unreachableDB
			env["BUZZ_DATA_DIR"] = t.TempDir()
			env["RELAY_OPERATOR_API_ORIGIN"] = origin
			for k, v := range tt.env {
				if v == "" {
					delete(env, k)
					continue
				}
				env[k] = v
			}
			res := runBinary(t, env, "serve")
			require.Equal(t, 2, res.Code, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
			require.Equal(t, tt.want+"\n", res.Stderr)
			require.NotContains(t, res.Stdout, "listening")
			requireNotListening(t, env["BUZZ_BIND_ADDR"])
			requireNotListening(t, "127.0.0.1:"+env["BUZZ_HEALTH_PORT"])
			requireNotListening(t, "127.0.0.1:"+env["BUZZ_METRICS_PORT"])
			require.NoDirExists(t, filepath.Join(env["BUZZ_DATA_DIR"], "pg"))
		})
	}
}

// Operator listeners on the configuration side (docs/PROTOCOL.md §15.2): valid listeners start the
// relay, and the startup log shows them normalized with the origin and the
// timeout.
func TestOperatorListenerConfigLogged(t *testing.T) {
	t.Parallel()
	a, b := eventtest.NewKey().PubKey, eventtest.NewKey().PubKey
	env := externalEnv(t)
	env["BUZZ_OPERATOR_LISTENERS"] = " " + strings.ToUpper(a) + ":https://A.example/hook ; " + b + ":https://b.example:443 ;"
	env["RELAY_OPERATOR_API_ORIGIN"] = "https://relay.example/"
	env["BUZZ_OPERATOR_LISTENER_TIMEOUT_MS"] = "1500"
	p := startReady(t, env)

	var cfg map[string]any
	for _, rec := range p.logRecords() {
		if rec["msg"] == "config loaded" {
			cfg, _ = rec["config"].(map[string]any)
		}
	}
	require.NotNil(t, cfg, "no config loaded record:\n%s", p.Stdout)
	require.Equal(t, a+"@a.example;"+b+"@b.example", cfg["operator_listeners"], "pubkey and host only: webhook paths carry tokens")
	require.Equal(t, "https://relay.example", cfg["operator_api_origin"])
	require.EqualValues(t, 1500, cfg["operator_listener_timeout_ms"])
}
