// Package config turns the process environment into a validated Config.
//
// It owns the list of environment variables of the relay (spec 10 §10), their
// defaults and valid ranges, the cross-variable rules, the typo guard for
// unknown BUZZ_ variables, the redacted startup view of the configuration
// (Config.LogValue) and NormalizeHost, the host normalisation of spec 10 §2.1
// used for RELAY_URL and for every community host.
//
// It does NOT read the environment by itself (Load receives getenv and environ),
// print anything or exit: the caller prints the error and exits with status 2.
// It does NOT apply the private-cluster rule for AutoMigrate (the caller forces
// it on when it starts its own cluster), and it does NOT parse
// BUZZ_OPERATOR_LISTENERS, whose format belongs to spec 60 and its package.
// Only Load reads variables; nothing else in the module calls os.Getenv for
// relay settings.
package config
