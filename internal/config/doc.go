// Package config turns the process environment into a validated Config.
//
// It owns the list of environment variables of the relay (docs/PROTOCOL.md §10), their
// defaults and valid ranges, the cross-variable rules, the typo guard for
// unknown BUZZ_ variables, the redacted startup view of the configuration
// (Config.LogValue) and NormalizeHost, the host normalisation of docs/PROTOCOL.md §2.1
// used for RELAY_URL and for every community host. It also parses the
// operator-listener variables of docs/PROTOCOL.md §15.2 (BUZZ_OPERATOR_LISTENERS,
// BUZZ_OPERATOR_LISTENER_TIMEOUT_MS, RELAY_OPERATOR_API_ORIGIN) into typed
// fields, with the normalized delivery URLs the relay signs and posts to,
// and the filter, subscription and connection caps (filters.go,
// docs/OPERATIONS.md "Filter caps").
//
// It does NOT read the environment by itself (Load receives getenv and environ),
// print anything or exit: the caller prints the error and exits with status 2.
// It does NOT apply the private-cluster rule for AutoMigrate (the caller forces
// it on when it starts its own cluster), and it does NOT deliver to
// listeners or check NIP-98 against the origin: it only validates and
// normalizes the values the delivery worker and the operator routes read.
// Only Load reads variables; nothing else in the module calls os.Getenv for
// relay settings.
package config
