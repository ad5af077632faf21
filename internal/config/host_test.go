package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeHost(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		// The normalisation steps of docs/PROTOCOL.md §2.1.
		{"  Relay.Example.:443 ", "relay.example"},
		{"relay.example:80", "relay.example"},
		{"relay.example:8443", "relay.example:8443"},
		{"127.0.0.1:3000", "localhost:3000"},
		{"[::1]:3000", "localhost:3000"},
		{"", ""},

		{"relay.example", "relay.example"},
		{"RELAY.EXAMPLE.", "relay.example"},
		{"\trelay.example\r\n", "relay.example"},
		{"127.0.0.1", "localhost"},
		{"127.0.0.1:443", "localhost"},
		{"[::1]", "localhost"},
		{"[::1]:80", "localhost"},
		{"localhost.:3000", "localhost:3000"},
		{"[2001:DB8::1]:8443", "[2001:db8::1]:8443"},
		{"relay.example:", "relay.example"},
		{"relay_1.example", "relay_1.example"},
		{"relay.example:0443", "relay.example:0443"},

		// Unmapped.
		{"   ", ""},
		{".", ""},
		{":3000", ""},
		{"relay.example..", ""},
		{"relay.example:http", ""},
		{"relay.example:70000", ""},
		{"relay.example:0", ""},
		{"::1", ""},
		{"[::1", ""},
		{"[::1]x", ""},
		{"[relay.example]:80", ""},
		{"relay example", ""},
		{"relay.example/path", ""},
		{"user@relay.example", ""},
		{"rélay.example", ""},
		{"a:1:2", ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, NormalizeHost(tt.in), "NormalizeHost(%q)", tt.in)
		require.Equal(t, tt.want, NormalizeHost(tt.want), "NormalizeHost is not idempotent for %q", tt.in)
	}
}
