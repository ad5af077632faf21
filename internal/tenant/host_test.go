package tenant_test

import (
	"github.com/buzz-relay/buzz/internal/tenant"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"  Relay.Example.:443 ": "relay.example",
		"relay.example:80":      "relay.example",
		"relay.example:8443":    "relay.example:8443",
		"127.0.0.1:3000":        "localhost:3000",
		"[::1]:3000":            "localhost:3000",
		"[::1]":                 "localhost",
		"":                      "",
		"   ":                   "",
		"a.test:x":              "",
		"[::2]:5":               "[::2]:5",
	}
	for in, want := range cases {
		require.Equal(t, want, tenant.Normalize(in), "normalize(%q)", in)
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add("Relay.Example.:443")
	f.Add("[::1]:3000")
	f.Fuzz(func(t *testing.T, s string) {
		n := tenant.Normalize(s)
		require.Equal(t, n, tenant.Normalize(n), "idempotent")
	})
}
