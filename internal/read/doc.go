// Package read is the read engine shared by WebSocket REQ and COUNT and the
// HTTP bridge's /query and /count: the filter caps (caps.go), the filter
// gates, the reader's accessible channels (with their per-process caches),
// filter → SQL through the store, and the post-filter every returned row
// passes.
//
// It owns who may read what. It does NOT speak any transport (callers turn
// its gate messages into CLOSED frames or HTTP 403s), and it does NOT
// register live subscriptions (package relay does) — but it supplies the
// per-recipient check live delivery uses (Engine.Visible). With a read
// replica (Config.Replica) it decides which filters' statements may run in
// a proved replica snapshot (route.go, docs/PROTOCOL.md §16.6); the proof itself is
// package replica's.
package read
