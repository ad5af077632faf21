// Package negentropy is the relay's side of the Negentropy set
// reconciliation protocol, version 1, that NIP-77 carries
// (docs/PROTOCOL.md §7.13): the message codec (varints, delta-encoded
// timestamps, bounds, the Skip, Fingerprint and IdList modes), the
// fingerprint of a range, and Respond, which answers one client message
// from a sorted set of records within a frame size limit.
//
// It does NOT choose the records (package read does, with the gates of a
// REQ), keep sessions, enforce idle timeouts or speak hex or JSON (package
// wsapi does): it holds no state between messages beyond the Set it is
// given, and it does no I/O.
package negentropy
