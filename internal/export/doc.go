// Package export writes one community as the JSON lines file of
// docs/OPERATIONS.md "Exporting a community": a header (format version,
// host, relay pubkey, counts, the audit chain head and its relay-signed
// checkpoint), every stored event in commit order as its author signed
// it, and a trailer (count and SHA-256 of the body). It reads one
// REPEATABLE READ READ ONLY snapshot and holds one batch of rows at a time.
//
// It does NOT hold SQL (the statements are store.EventExport… and the
// audit package's head reads), does NOT resolve hosts or read the
// configuration (the caller passes the community, the host and the key),
// does NOT open files, compress or draw progress (the command does), and
// does NOT import.
package export
