// Package ingest is the one door for writes: every event a client submits,
// over WebSocket EVENT or HTTP POST /events, passes through Pipeline.Submit,
// whose numbered steps are those of docs/PROTOCOL.md §1.2 and docs/ARCHITECTURE.md.
//
// It owns the order of the checks, the reason each refusal gets, the p-tag
// cap, the charge of each event to its author's messages quota and of each
// channel creation to its quota (admission.go), the write transaction, and
// the dispatch to subscribers after commit. It does NOT
// speak any transport (the doors turn a Result into an OK frame or an HTTP
// answer), does NOT hold SQL (the store does), and does NOT resolve hosts.
package ingest
