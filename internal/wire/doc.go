// Package wire speaks NIP-01 on the wire: it parses client messages into
// typed values, builds every relay message, and alone spells the reason
// prefixes (invalid:, restricted:, …) that clients match on.
//
// It does NOT decide anything: which reason a refusal gets is the caller's
// choice, and it holds no connection state.
package wire
