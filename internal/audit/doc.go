// Package audit keeps each community's tamper-evident hash chain (docs/PROTOCOL.md §13).
//
// It owns the audit_log and audit_outbox tables' SQL (apart from the one
// statement that stores an event and its event_created intent together, which
// lives with the event insert in package store), the version 2 TLV encoding
// of an entry and its canonical JSON, the eleven action strings, Append
// (an intent inside the caller's transaction), the Chainer that moves
// intents into the chain under a per-community advisory lock, the Observer
// that samples and writes authentication and rate-limit observations,
// Verify with its sanitised errors, and checkpoints: relay-signed kind 48002
// events naming a chain head.
//
// It does NOT decide what gets audited or who the actor is (ingest, relay
// and httpapi do), it does NOT open the transaction an intent joins (Append
// uses the caller's), it does NOT resolve hosts (the caller passes a
// community id), and it does NOT register metrics (the caller passes them
// in). It imports only event and pg from this module.
package audit
