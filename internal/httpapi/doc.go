// Package httpapi is the app listener's HTTP surface (docs/PROTOCOL.md §8): the
// NIP-11 document on GET / and GET /info, the WebSocket upgrade hand-off on
// GET /, GET /health, and the NIP-98 bridge POST /events, /query and /count
// with its CORS rules.
//
// It owns the order of the bridge's checks (host → body size → NIP-98 →
// replay → relay membership → the signer's bridge quota → body parse →
// route logic), the filter-list
// checks of the bridge, the one ingest.Code → HTTP status table
// (errors.go) and the JSON error bodies.
//
// It does NOT decide what may be stored or read: events go through the
// ingest pipeline (Submitter) and reads through the read engine (Reader),
// both declared here as small interfaces and filled in by cmd. It holds no
// SQL, imports no database package, and never logs Authorization headers,
// NIP-98 events or event contents.
package httpapi
