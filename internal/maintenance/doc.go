// Package maintenance holds the relay's periodic database jobs, each a
// small service of the one shape of package service: Start(ctx) error and
// Stop(), a ticker loop around runOnce that only the loop logs, and a
// TestSignals struct that tests wait on instead of sleeping.
//
//	Partitions   every 24 h   events partitions for this month and the next three
//	Analyze      every 10 s   ANALYZE of the partitions and side tables that changed
//	ReplayPurge  every 60 s   NIP-98 replay ids older than 180 s deleted
//
// It also holds the read-only report an operator runs by hand,
// ReadStateReport (buzz-relay maintenance read-state --report, docs/PROTOCOL.md §14.7),
// and ReadStatePurges, which the relay logs right after the read-state
// purge migration.
//
// Each service runs against the database of the process; several processes
// may run them against one database (partition creation takes an advisory
// lock, the others are idempotent).
//
// It does NOT own the work that needs a component's live state (relay
// membership revalidation lives in package relay, the audit chainer in
// package audit, with the same shape), it does NOT decide when a process
// runs the jobs (package app starts and stops them), and it does NOT
// register metrics: counters are passed in.
package maintenance
