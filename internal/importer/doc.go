// Package importer loads a file of docs/OPERATIONS.md "Exporting a
// community" into a community, as docs/OPERATIONS.md "Importing a
// community" describes: Verify reads the whole file once (header format
// and version, every event's id and signature, the trailer's count and
// SHA-256) so that nothing is imported from a bad file; Run then submits
// the events in file order through the ingest pipeline as if their
// authors had sent them live, skips the source relay's signed state (this
// relay regenerates it with its own key), counts what the pipeline refuses
// by reason, and records the import in the community's audit chain.
//
// It does NOT hold SQL (the emptiness count is store.EventExportCount, the
// audit intent audit.Append), does NOT resolve hosts, read the
// configuration, open files, decompress or draw progress (the command
// does), and does NOT write to running relays' live subscriptions.
package importer
