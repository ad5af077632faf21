package client

import (
	"errors"
	"strconv"
)

// ErrClosed is returned by calls on a Conn whose connection has ended.
var ErrClosed = errors.New("connection closed")

// RefusedError is a refusal the relay answered on purpose: a CLOSED for a
// REQ or COUNT, a refused AUTH, or a non-2xx answer of the HTTP bridge.
// Callers tell it apart from transport failures with errors.As.
type RefusedError struct {
	// Op names the request, e.g. "auth", "query", "POST /events".
	Op string
	// Status is the HTTP status, or 0 on the WebSocket.
	Status int
	// Message is the relay's text (the CLOSED or OK message, or the JSON "error").
	Message string
}

func (e *RefusedError) Error() string {
	if e.Status != 0 {
		return e.Op + ": " + strconv.Itoa(e.Status) + ": " + e.Message
	}
	return e.Op + ": " + e.Message
}
