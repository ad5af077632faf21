// Package client is the client side of the Buzz wire: a WebSocket connection
// that answers the relay's NIP-42 challenge and multiplexes EVENT, REQ, COUNT
// and CLOSE over one socket, and a small client for the HTTP bridge
// (POST /events, /query, /count) signed with NIP-98. DialHost and HTTP.Host
// reach a community whose host is not the dialled address (several
// communities behind one 127.0.0.1:PORT): they send that Host and sign for it.
//
// It owns one reader goroutine per Conn, which demultiplexes relay frames by
// subscription id and event id; Close stops it and every call waiting on it.
//
// It does NOT verify the signatures of events it receives, retry, reconnect
// or pace requests: callers that need those build them on top.
package client
