// Package httpapi is the HTTP door on the app listener (docs/PROTOCOL.md §8): the
// NIP-11 document on GET / and GET /info, the hand-off of WebSocket upgrades
// on GET /, GET /health (and /_liveness and /_readiness when Config.Health
// is set), the NIP-98 bridge POST /events, /query and /count with its CORS
// rules, and the operator-listener registration route
// /operator/listener/pubkeys (operator.go).
//
// It owns the order of the bridge's checks: a free bridge slot
// (admission.go; 503 when BUZZ_HTTP_MAX_CONCURRENT requests are in flight) →
// community from Host → body size → NIP-98 → replay → relay membership →
// the signer's bridge quota (quota.go) → body parse → the route. It owns the
// bridge's filter-list checks, /query's read-state snapshot (readstate.go),
// the one table that maps write results and read refusals to HTTP status
// (errors.go), the JSON error bodies, and the NIP-98 audit observations
// (audit.go).
//
// It does NOT decide what may be stored or read: every event goes through
// the ingest pipeline (Config.Submitter) and every read through the read
// engine's door (Config.Reader), and package app wires both. It holds no
// SQL and imports no database package (replay ids and listener
// registrations are stored through the small interfaces ReplayGuard and
// ListenerRegistry), and it never logs Authorization headers, NIP-98 events
// or event contents.
package httpapi
