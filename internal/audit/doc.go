// Package audit keeps each community's tamper-evident hash chain (docs/PROTOCOL.md §13).
//
// It owns the SQL of audit_log and audit_outbox (apart from the one
// statement that stores an event and its event_created intent together,
// which lives with the event insert in package store), the version 2 TLV
// encoding of an entry and its canonical JSON, the twelve action strings and
// their intent constructors (NewEventCreated, NewMemberAdded, …), and:
//
//   - Append: an intent written to audit_outbox inside the caller's
//     transaction, so an action and its intent commit together;
//   - Chainer: the service that moves intents into each community's chain
//     in batches under a per-community advisory lock (Wake, Flush);
//   - Observer: the service that samples authentication and rate-limit
//     observations per window and writes them as intents;
//   - Verify, with its sanitised errors, and checkpoints: relay-signed
//     kind 48002 events naming a chain head (NewCheckpoint,
//     ParseCheckpoint);
//   - Purge: the one delete the append-only guard lets through, for
//     community deletion.
//
// It does NOT decide what gets audited or who the actor is (ingest, wsapi
// and httpapi do), it does NOT open the transaction an intent joins, it does
// NOT resolve hosts (the caller passes a community id), and it does NOT
// register metrics (package metrics registers Metrics and passes it in).
// From this module it imports event, pg, service and testsignal.
package audit
