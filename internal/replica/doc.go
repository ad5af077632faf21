// Package replica is the read replica of docs/PROTOCOL.md §16.6: the proof that lets a
// streaming replica serve a read, and nothing else.
//
// It owns the proof's three parts (docs/PROTOCOL.md §16.6). The probe
// (Replica.Start, every 5 s on the writer) rewrites the single
// replica_heartbeat row with beat_at = the writer's now() and
// safe_through = beat_at − 965 s, and remembers when it last succeeded and
// the newest beat_at it wrote; it also measures the replay lag
// (buzz_db_replica_lag_bytes, a diagnostic) and whether the replica
// answers. Verify is the start-time fence check: the writer pool is armed
// with the 960 s created_at floor and the floor trigger is on events and
// every partition. Read is the per-request proof: a REPEATABLE READ READ
// ONLY transaction on the replica whose first statement reads the
// heartbeat row, then the conditions of docs/PROTOCOL.md §16.6 (until ≤ safe_through, a
// probe less than 30 s old, beat_at at most 30 s behind the newest one
// written), then the caller's statements in that same snapshot.
//
// Doubt means the writer: any replica error, a statement over 2 s
// (StatementTimeout on every replica connection) or a failed condition
// makes Read answer RouteDoubt and count buzz_db_read_session_degraded;
// the caller re-runs on the writer. A bound above what this process has
// proved is a head page (RouteWriter), not a doubt.
//
// It does NOT decide which reads may use the replica (package read holds
// the routing table of docs/PROTOCOL.md §16.6), it does NOT hold any query of the data
// (store and search do; they run on Session.Querier), and nothing here
// touches readiness: a replica that is down only sends reads to the
// writer.
package replica
