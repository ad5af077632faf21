package auth

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/buzz-relay/buzz/internal/tenant"
)

// FuzzNIP42RelayTag is the relay tag of a client's AUTH event, the one
// string VerifyNIP42 parses beyond the event itself (the event's decoding
// is FuzzClientMessage's): checkRelayTag never panics, every refusal is a
// "verify nip-42: " error, and an accepted tag is a URL of the wanted
// scheme only, without query, fragment, user info or path, naming the
// tenant host, and is still accepted with a trailing slash.
func FuzzNIP42RelayTag(f *testing.F) {
	for _, s := range []string{"ws://a.test", "ws://a.test/", "WS://A.TEST", "ws://a.test:80", "ws://a.test.",
		"ws://a.test:443/", "wss://a.test", "ws://b.test", "http://a.test", "ws://a.test/x", "ws://a.test?",
		"ws://a.test#f", "ws://u@a.test", "ws://a.test:3000", "a.test", "", "ws:a.test", "ws://[::1]:80", "ws://%zz"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	const host = "a.test"
	f.Fuzz(func(t *testing.T, raw string, secure bool) {
		err := checkRelayTag(raw, host, secure)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "verify nip-42: "), err.Error())
			return
		}
		want := "ws://"
		if secure {
			want = "wss://"
		}
		require.True(t, strings.EqualFold(raw[:len(want)], want), raw)
		require.Error(t, checkRelayTag(raw, host, !secure), "accepted for both schemes: %q", raw)
		require.NotContains(t, raw, "?")
		require.NotContains(t, raw, "#")
		u, err := url.Parse(raw)
		require.NoError(t, err)
		require.Nil(t, u.User)
		require.Contains(t, []string{"", "/"}, u.Path)
		require.Equal(t, host, tenant.Normalize(u.Host))
		if !strings.HasSuffix(raw, "/") {
			require.NoError(t, checkRelayTag(raw+"/", host, secure), raw)
		}
	})
}
