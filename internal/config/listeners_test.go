package config

import (
	"bytes"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/stretchr/testify/require"
)

// Valid x-only keys: the x coordinates of G, 2G and 3G on secp256k1.
const (
	listenerA = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
	listenerB = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
	listenerC = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9"
	// notOnCurve is 64 hex characters that are no x coordinate on the curve.
	notOnCurve = "0000000000000000000000000000000000000000000000000000000000000005"
	testOrigin = "https://relay.example"
)

// TestListenerTestKeys checks the fixtures with an independent BIP-340
// implementation, so the curve check is not tested against itself.
func TestListenerTestKeys(t *testing.T) {
	t.Parallel()
	for _, k := range []string{listenerA, listenerB, listenerC} {
		b, err := hex.DecodeString(k)
		require.NoError(t, err)
		_, err = schnorr.ParsePubKey(b)
		require.NoError(t, err, k)
		require.True(t, validPubkey(k), k)
		require.True(t, validPubkey(strings.ToUpper(k)), k)
	}
	for _, k := range []string{notOnCurve, strings.Repeat("f", 64)} {
		b, err := hex.DecodeString(k)
		require.NoError(t, err)
		_, err = schnorr.ParsePubKey(b)
		require.Error(t, err, k)
		require.False(t, validPubkey(k), k)
	}
}

func TestLoadOperatorListeners(t *testing.T) {
	t.Parallel()

	t.Run("UnsetIsOff", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t)
		require.NoError(t, err)
		require.Nil(t, c.OperatorListeners)
		require.Equal(t, 5*time.Second, c.OperatorListenerTimeout)
		require.Empty(t, c.OperatorAPIOrigin)
	})

	t.Run("BlankIsOff", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{"", " ", "\t\n "} {
			c, _, err := load(t, "BUZZ_OPERATOR_LISTENERS", raw)
			require.NoError(t, err, "%q", raw)
			require.Nil(t, c.OperatorListeners, "%q", raw)
		}
	})

	t.Run("AcceptanceExample", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t,
			"BUZZ_OPERATOR_LISTENERS", " "+listenerA+":https://A.example/hook ; "+listenerB+":https://b.example:443 ;",
			"RELAY_OPERATOR_API_ORIGIN", testOrigin)
		require.NoError(t, err)
		require.Equal(t, []OperatorListener{
			{Pubkey: listenerA, URL: "https://a.example/hook"},
			{Pubkey: listenerB, URL: "https://b.example/"},
		}, c.OperatorListeners)
		require.Equal(t, testOrigin, c.OperatorAPIOrigin)
	})

	t.Run("Normalization", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ entry, pubkey, url string }{
			{listenerA + ":HTTPS://Bot.EXAMPLE/Hook", listenerA, "https://bot.example/Hook"},
			{listenerA + ":https://bot.example:443/hook", listenerA, "https://bot.example/hook"},
			{listenerA + ":https://bot.example:0443/hook", listenerA, "https://bot.example/hook"},
			{listenerA + ":https://bot.example:8443/hook", listenerA, "https://bot.example:8443/hook"},
			{listenerA + ":https://bot.example:08443", listenerA, "https://bot.example:8443/"},
			{listenerA + ":https://bot.example:80/", listenerA, "https://bot.example:80/"},
			{listenerA + ":https://bot.example:/hook", listenerA, "https://bot.example/hook"},
			{listenerA + ":https://bot.example", listenerA, "https://bot.example/"},
			{listenerA + ":https://bot.example/", listenerA, "https://bot.example/"},
			{listenerA + ":https://bot.example/a/b/", listenerA, "https://bot.example/a/b/"},
			{listenerA + ":https://bot.example/p%2Fq", listenerA, "https://bot.example/p%2Fq"},
			{listenerA + ":https://[::1]:443/x", listenerA, "https://[::1]/x"},
			{listenerA + ":https://[::1]:8443", listenerA, "https://[::1]:8443/"},
			{listenerA + ":https://10.0.0.1:9000/hook", listenerA, "https://10.0.0.1:9000/hook"},
			{strings.ToUpper(listenerA) + ":https://bot.example/hook", listenerA, "https://bot.example/hook"},
			{" " + listenerA + " : https://bot.example/hook ", listenerA, "https://bot.example/hook"},
		} {
			c, _, err := load(t, "BUZZ_OPERATOR_LISTENERS", tt.entry, "RELAY_OPERATOR_API_ORIGIN", testOrigin)
			require.NoError(t, err, tt.entry)
			require.Equal(t, []OperatorListener{{Pubkey: tt.pubkey, URL: tt.url}}, c.OperatorListeners, tt.entry)
			// The normalized form is a fixed point.
			again, err := parseDeliveryURL(tt.url)
			require.NoError(t, err, tt.url)
			require.Equal(t, tt.url, again)
		}
	})

	t.Run("SplitsAtFirstColon", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t,
			"BUZZ_OPERATOR_LISTENERS", listenerA+":https://bot.example:8443/a:b;"+listenerB+":https://[2001:db8::1]:9443/",
			"RELAY_OPERATOR_API_ORIGIN", testOrigin)
		require.NoError(t, err)
		require.Equal(t, []OperatorListener{
			{Pubkey: listenerA, URL: "https://bot.example:8443/a:b"},
			{Pubkey: listenerB, URL: "https://[2001:db8::1]:9443/"},
		}, c.OperatorListeners)
	})

	t.Run("OrderAndEmptyEntries", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t,
			"BUZZ_OPERATOR_LISTENERS", ";; "+listenerC+":https://c.example ;;"+listenerA+":https://a.example; ;",
			"RELAY_OPERATOR_API_ORIGIN", testOrigin)
		require.NoError(t, err)
		require.Equal(t, []OperatorListener{
			{Pubkey: listenerC, URL: "https://c.example/"},
			{Pubkey: listenerA, URL: "https://a.example/"},
		}, c.OperatorListeners)
	})

	t.Run("SameURLTwiceIsAllowed", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t,
			"BUZZ_OPERATOR_LISTENERS", listenerA+":https://hub.example/;"+listenerB+":https://hub.example/",
			"RELAY_OPERATOR_API_ORIGIN", testOrigin)
		require.NoError(t, err)
		require.Len(t, c.OperatorListeners, 2)
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]time.Duration{
			"100": 100 * time.Millisecond, "10000": 10 * time.Second, " 2500 ": 2500 * time.Millisecond,
			"5000": 5 * time.Second, "": 5 * time.Second,
		} {
			c, _, err := load(t, "BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", raw)
			require.NoError(t, err, "%q", raw)
			require.Equal(t, want, c.OperatorListenerTimeout, "%q", raw)
		}
	})

	t.Run("Origin", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]string{
			"https://relay.example":       "https://relay.example",
			"https://relay.example/":      "https://relay.example",
			" http://localhost:3000/ ":    "http://localhost:3000",
			"https://relay.example:8443":  "https://relay.example:8443",
			"https://[::1]:3000/":         "https://[::1]:3000",
			"http://127.0.0.1:3000":       "http://127.0.0.1:3000",
			"https://Relay.Example:443/":  "https://Relay.Example:443",
			"https://relay.example:65535": "https://relay.example:65535",
		} {
			// With listeners (where it is required) and without (optional).
			c, _, err := load(t, "RELAY_OPERATOR_API_ORIGIN", raw,
				"BUZZ_OPERATOR_LISTENERS", listenerA+":https://a.example/")
			require.NoError(t, err, raw)
			require.Equal(t, want, c.OperatorAPIOrigin, raw)
			c, _, err = load(t, "RELAY_OPERATOR_API_ORIGIN", raw)
			require.NoError(t, err, raw)
			require.Equal(t, want, c.OperatorAPIOrigin, raw)
		}
	})
}

func TestLoadOperatorListenersInvalid(t *testing.T) {
	t.Parallel()
	const (
		utf8Err    = "invalid BUZZ_OPERATOR_LISTENERS: must be valid UTF-8"
		noPairs    = "invalid BUZZ_OPERATOR_LISTENERS: must contain pubkey:delivery_url pairs"
		notPair    = "invalid BUZZ_OPERATOR_LISTENERS: entries must be pubkey:delivery_url pairs"
		badPubkey  = "invalid BUZZ_OPERATOR_LISTENERS: entry has an invalid pubkey: "
		badURL     = "invalid BUZZ_OPERATOR_LISTENERS: endpoint is not a valid URL: "
		notHTTPS   = "invalid BUZZ_OPERATOR_LISTENERS: endpoints must be HTTPS URLs without credentials, query, or fragment"
		duplicate  = "invalid BUZZ_OPERATOR_LISTENERS: contains duplicate pubkey: "
		timeoutErr = "invalid BUZZ_OPERATOR_LISTENER_TIMEOUT_MS: must be an integer in 100..=10000"
		required   = "invalid RELAY_OPERATOR_API_ORIGIN: required when BUZZ_OPERATOR_LISTENERS is set"
		badOrigin  = "invalid RELAY_OPERATOR_API_ORIGIN: must be an http(s) origin without path, query, fragment, or credentials"
	)
	a := listenerA + ":"
	tests := []struct {
		name      string
		listeners string
		env       []string // more variables; RELAY_OPERATOR_API_ORIGIN is set unless overridden
		wantErr   string
	}{
		{"NotUTF8", a + "https://a.example/\xff", nil, utf8Err},
		{"NotUTF8Alone", "\xc3\x28", nil, utf8Err},
		{"NotUTF8BeforeEmpty", "\xff;;", nil, utf8Err},
		{"OnlySemicolon", ";", nil, noPairs},
		{"OnlySemicolons", ";;", nil, noPairs},
		{"SemicolonsAndSpaces", " ; \t;  ; ", nil, noPairs},
		{"NoColon", listenerA, nil, notPair},
		{"NoColonInSecondEntry", a + "https://a.example/;" + listenerB, nil, notPair},
		{"EmptyPubkey", ":https://a.example/", nil, notPair},
		{"EmptyURL", a, nil, notPair},
		{"BlankURL", a + "   ", nil, notPair},
		{"Pubkey63", listenerA[:63] + ":https://a.example/", nil, badPubkey + listenerA[:63]},
		{"Pubkey65", listenerA + "0:https://a.example/", nil, badPubkey + listenerA + "0"},
		{"PubkeyNotHex", "g" + listenerA[1:] + ":https://a.example/", nil, badPubkey + "g" + listenerA[1:]},
		{"PubkeyNpub", "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6:https://a.example/", nil,
			badPubkey + "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"},
		{"PubkeyNotOnCurve", notOnCurve + ":https://a.example/", nil, badPubkey + notOnCurve},
		{"PubkeyAboveFieldPrime", strings.Repeat("F", 64) + ":https://a.example/", nil, badPubkey + strings.Repeat("F", 64)},
		{"PubkeyAsGiven", " ABC : https://a.example/", nil, badPubkey + "ABC"},
		{"URLSpaceInHost", a + "https://a b.example/", nil, badURL + `invalid character " " in host name`},
		{"URLBadPort", a + "https://a.example:x/", nil, badURL + `invalid port ":x" after host`},
		{"URLPortTooLarge", a + "https://a.example:70000/", nil, badURL + `invalid port ":70000" after host`},
		{"URLBadEscape", a + "https://a.example/%zz", nil, badURL + `invalid URL escape "%zz"`},
		{"URLNoScheme", a + "://a.example/", nil, badURL + "missing protocol scheme"},
		{"URLControlChar", a + "https://a.example/\x7f", nil, badURL + "net/url: invalid control character in URL"},
		{"URLOpenBracket", a + "https://[::1/", nil, badURL + "missing ']' in host"},
		{"URLStrayCloseBracket", a + "https://]:0", nil, badURL + `invalid character "]" in host name`},
		{"URLBracketInName", a + "https://a]b.example/", nil, badURL + `invalid character "]" in host name`},
		{"HTTP", a + "http://a.example/hook", nil, notHTTPS},
		{"WSS", a + "wss://a.example/hook", nil, notHTTPS},
		{"NoScheme", a + "a.example/hook", nil, notHTTPS},
		{"Opaque", a + "https:a.example", nil, notHTTPS},
		{"EmptyHost", a + "https:///hook", nil, notHTTPS},
		{"PortOnly", a + "https://:443/hook", nil, notHTTPS},
		{"UserInfo", a + "https://u:p@a.example/", nil, notHTTPS},
		{"UserOnly", a + "https://u@a.example/", nil, notHTTPS},
		{"EmptyUserInfo", a + "https://@a.example/", nil, notHTTPS},
		{"Query", a + "https://a.example/?q=1", nil, notHTTPS},
		{"EmptyQuery", a + "https://a.example/?", nil, notHTTPS},
		{"EmptyQueryNoPath", a + "https://a.example?", nil, notHTTPS},
		{"Fragment", a + "https://a.example/#f", nil, notHTTPS},
		{"EmptyFragment", a + "https://a.example/#", nil, notHTTPS},
		{"EmptyQueryAndFragment", a + "https://a.example?#", nil, notHTTPS},
		{"Duplicate", a + "https://a.example/;" + listenerA + ":https://b.example/", nil, duplicate + listenerA},
		{"DuplicateMixedCase", a + "https://a.example/;" + strings.ToUpper(listenerA) + ":https://a.example/", nil, duplicate + listenerA},
		{"DuplicateUpperFirst", strings.ToUpper(listenerA) + ":https://a.example/;" + a + "https://b.example/", nil, duplicate + listenerA},
		{"DuplicateNotAdjacent", a + "https://a.example/;" + listenerB + ":https://b.example/;" + a + "https://c.example/", nil, duplicate + listenerA},

		// The first failure wins: entries are checked in order, each one in
		// the order of the table, and the listeners before the other variables.
		{"FirstEntryFirst", a + "http://a.example/;" + notOnCurve + ":https://b.example/", nil, notHTTPS},
		{"PubkeyBeforeURL", notOnCurve + ":http://a.example/?q", nil, badPubkey + notOnCurve},
		{"ParseBeforeScheme", a + "http://a b/", nil, badURL + `invalid character " " in host name`},
		{"URLBeforeDuplicate", a + "https://a.example/;" + a + "https://b.example/#", nil, notHTTPS},
		{"ListenersBeforeTimeout", listenerA, []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "50"}, notPair},
		{"ListenersBeforeOrigin", listenerA, []string{"RELAY_OPERATOR_API_ORIGIN", "ftp://x"}, notPair},
		{"ListenersBeforeRequired", ";", []string{"RELAY_OPERATOR_API_ORIGIN", ""}, noPairs},

		{"Timeout50", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "50"}, timeoutErr},
		{"Timeout99", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "99"}, timeoutErr},
		{"Timeout10001", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "10001"}, timeoutErr},
		{"TimeoutZero", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "0"}, timeoutErr},
		{"TimeoutNegative", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "-5000"}, timeoutErr},
		{"TimeoutWord", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "fast"}, timeoutErr},
		{"TimeoutFloat", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "1500.5"}, timeoutErr},
		{"TimeoutUnit", "", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "5s"}, timeoutErr},
		{"TimeoutBeforeOrigin", a + "https://a.example/", []string{"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "50", "RELAY_OPERATOR_API_ORIGIN", ""}, timeoutErr},

		{"OriginMissing", a + "https://a.example/", []string{"RELAY_OPERATOR_API_ORIGIN", ""}, required},
		{"OriginBlank", a + "https://a.example/", []string{"RELAY_OPERATOR_API_ORIGIN", "  "}, required},
		{"OriginMalformedWithListeners", a + "https://a.example/", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example/api"}, badOrigin},
		{"OriginPath", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example/api"}, badOrigin},
		{"OriginStrayBracket", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay]"}, badOrigin},
		{"OriginDoubleSlash", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example//"}, badOrigin},
		{"OriginQuery", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example?x=1"}, badOrigin},
		{"OriginEmptyQuery", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example/?"}, badOrigin},
		{"OriginFragment", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example#top"}, badOrigin},
		{"OriginEmptyFragment", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example/#"}, badOrigin},
		{"OriginCredentials", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://u:p@relay.example"}, badOrigin},
		{"OriginUserOnly", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://u@relay.example"}, badOrigin},
		{"OriginWebSocket", "", []string{"RELAY_OPERATOR_API_ORIGIN", "wss://relay.example"}, badOrigin},
		{"OriginBareHost", "", []string{"RELAY_OPERATOR_API_ORIGIN", "relay.example"}, badOrigin},
		{"OriginNoHost", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://"}, badOrigin},
		{"OriginPortOnly", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://:443"}, badOrigin},
		{"OriginOpaque", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https:relay.example"}, badOrigin},
		{"OriginEmptyPort", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example:"}, badOrigin},
		{"OriginBadPort", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example:x"}, badOrigin},
		{"OriginPortTooLarge", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay.example:70000"}, badOrigin},
		{"OriginSpace", "", []string{"RELAY_OPERATOR_API_ORIGIN", "https://relay example"}, badOrigin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := []string{"RELAY_OPERATOR_API_ORIGIN", testOrigin, "BUZZ_OPERATOR_LISTENERS", tt.listeners}
			env = append(env, tt.env...) // later pairs override earlier ones
			c, _, err := load(t, env...)
			require.EqualError(t, err, tt.wantErr)
			require.Zero(t, c)
			var cerr *Error
			require.True(t, errors.As(err, &cerr))
			require.Equal(t, err.Error(), "invalid "+cerr.Variable+": "+cerr.Reason)
		})
	}
}

// TestLoadOperatorListenersURLNotEchoed: a parse failure keeps the parser's
// reason and drops the URL, which may carry a token in its path.
func TestLoadOperatorListenersURLNotEchoed(t *testing.T) {
	t.Parallel()
	_, _, err := load(t,
		"BUZZ_OPERATOR_LISTENERS", listenerA+":https://hooks.example/secret-token/%zz",
		"RELAY_OPERATOR_API_ORIGIN", testOrigin)
	require.EqualError(t, err, `invalid BUZZ_OPERATOR_LISTENERS: endpoint is not a valid URL: invalid URL escape "%zz"`)
	require.NotContains(t, err.Error(), "secret-token")
	require.NotContains(t, err.Error(), "hooks.example")
}

func TestLogValueOperatorListeners(t *testing.T) {
	t.Parallel()

	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t,
			"BUZZ_OPERATOR_LISTENERS", strings.ToUpper(listenerA)+":https://A.example:443/hook;"+listenerB+":https://b.example:8443",
			"BUZZ_OPERATOR_LISTENER_TIMEOUT_MS", "1500",
			"RELAY_OPERATOR_API_ORIGIN", "https://relay.example/")
		require.NoError(t, err)
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config loaded", slog.Any("config", c))
		out := buf.String()
		require.Contains(t, out, `"operator_listeners":"`+listenerA+`@a.example;`+listenerB+`@b.example:8443"`)
		require.NotContains(t, out, "/hook", "no URL path in the log: webhook paths carry tokens")
		require.Contains(t, out, `"operator_api_origin":"https://relay.example"`)
		require.Contains(t, out, `"operator_listener_timeout_ms":1500`)
	})

	t.Run("Unset", func(t *testing.T) {
		t.Parallel()
		c, _, err := load(t)
		require.NoError(t, err)
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config loaded", slog.Any("config", c))
		out := buf.String()
		require.Contains(t, out, `"operator_listeners":""`)
		require.Contains(t, out, `"operator_api_origin":""`)
		require.Contains(t, out, `"operator_listener_timeout_ms":5000`)
	})
}
