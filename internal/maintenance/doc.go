// Package maintenance holds the relay's periodic database jobs, each a
// service of the one shape of package service: Start(ctx) error and Stop(),
// a Tick loop around runOnce in which only the loop logs, and a TestSignals
// struct that tests wait on instead of sleeping.
//
//	Partitions   every 24 h   events partitions for this month and the next three
//	                          (Ensure runs it once at start; only a failure for
//	                          the current month stops the start)
//	Analyze      every 10 s   ANALYZE of the tables with at least 1,000 changed rows
//	ReplayPurge  every 60 s   NIP-98 replay ids older than 180 s deleted
//	ExpiredPurge every BUZZ_EXPIRED_PURGE_INTERVAL_MS (60 s)
//	                          events whose NIP-40 expiration has passed deleted,
//	                          500 a transaction, at most 20 transactions a pass
//	                          (docs/PROTOCOL.md §6.6)
//
// It also holds two read-only reports on read state: ReadStateReport, which
// an operator runs by hand (buzz-relay maintenance read-state --report,
// docs/PROTOCOL.md §14.7), and ReadStatePurges, which the relay logs once after the
// read-state purge migration (0007). Their statements are the store's;
// this package opens the report's transaction. It holds no SQL on the
// relay's tables.
//
// Each job runs against the database of its process, and several processes
// may run them against one database (partition creation takes an advisory
// lock; the others are idempotent).
//
// It does NOT own the jobs that need a component's live state (membership
// revalidation is wsapi.MembershipService, the audit chain's work is
// audit.Chainer, with the same shape), it does NOT decide when a process
// runs the jobs (package app starts and stops them), and it does NOT
// register metrics: the counters it updates are passed in.
package maintenance
