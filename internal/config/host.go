package config

import "github.com/buzz-relay/buzz/internal/tenant"

// NormalizeHost is tenant.Normalize (docs/PROTOCOL.md §2.1): the one normalisation the
// relay applies to RELAY_URL, request hosts, the CLI and NIP-42/NIP-98 URLs.
func NormalizeHost(h string) string { return tenant.Normalize(h) }
