// Package wsapi is the WebSocket door of the relay (docs/PROTOCOL.md §7, §9): the
// upgrade handler, one loop per connection (AUTH challenge, frame reader, one
// writer goroutine draining a bounded FIFO queue, heartbeat), one file per
// client message, and the in-process subscription index used for live
// fan-out.
//
// It owns the NIP-42 handshake state of a connection, the WebSocket door's
// checks W1–W3 (docs/PROTOCOL.md §1.1), the REQ steps of docs/PROTOCOL.md §7.5, COUNT, CLOSE,
// the NIP-77 sessions of docs/PROTOCOL.md §7.13 (neg.go: their caps and idle
// timeout; the reconciliation itself is package negentropy's), the per-connection limits of docs/PROTOCOL.md §7.11, the charge of each authenticated EVENT,
// REQ and COUNT frame to its pubkey's WebSocket quota (quota.go), the
// subscription and connection caps on live index keys and retained filter
// bytes (budget.go), checked before registration, and the transport
// metrics of docs/PROTOCOL.md §11.2.
//
// It does NOT store or validate events beyond W1–W3: every EVENT goes to the
// Submitter (the ingest pipeline), which fans committed and ephemeral events
// back out through Server.Broadcast. It does NOT decide what a reader may
// see, nor cap filter arrays: every REQ, COUNT and NEG-OPEN goes whole to the read
// door (read.Engine.Open),
// and live delivery asks read.Engine.Visible per recipient. It holds no SQL:
// host resolution goes through the tenant resolver and relay membership
// through tenant.MemberChecker, filled by package app.
//
// Origins: ServeHTTP accepts an upgrade from any Origin. A browser page on
// another site can open a socket, but it cannot read or write anything
// without a NIP-42 signature of a key it holds, and the challenge is bound to
// the tenant host; cookies carry no authority here.
package wsapi
