// Package read is the one door for reads, shared by the WebSocket REQ,
// COUNT and NEG-OPEN (NIP-77, records.go) and the HTTP bridge's /query and
// /count. Engine.Open takes every
// decision about a request, in the order its surface defines (door.go): the
// filter caps (caps.go), the "#h" channel cap, the gates (gates.go), the
// reader's scope (its accessible channels, cached per process for 10 s and
// confirmed uncached on a miss, reader.go), the bridge's extension fields
// (options.go) and search routing. The Read it returns runs with Rows or
// Count (rows.go): filter → SQL through the store, the post-filter every row
// passes (rawmatch.go), NIP-50 search through package search (search.go).
//
// It also owns how reads share the database: concurrent-read shares per
// connection and pubkey and a deadline per read (share.go, deadline.go), a
// byte budget per request (budget.go), and, with a read replica
// (Config.Replica), which statements may run in a proved replica snapshot
// (route.go, docs/PROTOCOL.md §16.6; the proof itself is package
// replica's). /query's read-state snapshot is here (snapshot.go), and
// windows.go dispatches the NIP-CW window modes to package window.
//
// It does NOT speak any transport: a refusal is a typed *Refusal (with a
// Code), *StatusError or *SnapshotError, which each door maps through its
// own table into CLOSED frames or HTTP statuses. It does NOT register live
// subscriptions (package wsapi does), but it supplies the per-recipient
// check live delivery uses (Engine.Visible).
package read
