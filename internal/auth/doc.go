// Package auth verifies who is speaking: NIP-42 AUTH events on the
// WebSocket (docs/PROTOCOL.md §7.3) and NIP-98 HTTP Authorization headers on the
// bridge (docs/PROTOCOL.md §8.2), and carries the result as an Identity in the
// request context.
//
// It owns the verification rules and their exact client messages, the
// NIP-98 header encoding (NIP98Header, ParseNIP98Header) and the context key
// of Identity.
//
// It does NOT touch storage: the single-use NIP-98 replay store and the
// relay-membership lookup are passed in or run by the caller, so a token that
// fails a check here never burns its id. It does NOT resolve hosts to
// communities (the caller passes the tenant host) and it never logs tokens,
// AUTH events or NIP-98 events.
package auth
