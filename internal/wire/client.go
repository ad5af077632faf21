package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/buzz-relay/buzz/internal/event"
)

// Limits of the parser (docs/PROTOCOL.md §7.11).
const (
	MaxFilters     = 10
	MaxSubIDLength = 256
)

// Client message types.
const (
	TypeEvent = "EVENT"
	TypeReq   = "REQ"
	TypeCount = "COUNT"
	TypeClose = "CLOSE"
	TypeAuth  = "AUTH"
	// The NIP-77 negentropy messages (docs/PROTOCOL.md §7.13).
	TypeNegOpen  = "NEG-OPEN"
	TypeNegMsg   = "NEG-MSG"
	TypeNegClose = "NEG-CLOSE"
)

// ClientMessage is one parsed client frame.
type ClientMessage struct {
	Type    string
	Event   event.Event    // EVENT, AUTH
	SubID   string         // REQ, COUNT, CLOSE, NEG-*
	Filters []event.Filter // REQ, COUNT, NEG-OPEN (exactly one)
	// NegMessage is the hex negentropy message of NEG-OPEN and NEG-MSG, as
	// sent: its hex and its size are judged by the session (package wsapi).
	NegMessage string
}

// ParseError is a frame that cannot be parsed. Notice() is the NOTICE text.
type ParseError struct{ Detail string }

func (e *ParseError) Error() string { return "invalid message format: " + e.Detail }

// Notice returns the exact NOTICE message of docs/PROTOCOL.md §7.2.
func (e *ParseError) Notice() string { return "invalid message: Invalid message format: " + e.Detail }

func perr(format string, args ...any) *ParseError {
	return &ParseError{Detail: fmt.Sprintf(format, args...)}
}

// ParseClient parses one client frame. It never panics; every failure is a
// *ParseError whose Notice is the answer the client gets.
func ParseClient(b []byte) (ClientMessage, error) {
	if msg, ok := parseEvent(b); ok {
		return msg, nil
	}
	return parseClient(b)
}

// parseEvent is ParseClient's path for the frame most clients send most,
// ["EVENT",{…}]: the event object goes to event.Parse as it lies in the
// frame, without decoding the array around it first, so the frame is
// scanned once less and the object is not copied. ok is false for any
// other shape, and for an object event.Parse refuses: parseClient then
// reads the frame and gives the same message, or the error text the client
// must get (docs/PROTOCOL.md §7.2).
func parseEvent(b []byte) (msg ClientMessage, ok bool) {
	const head = `"` + TypeEvent + `"`
	b = trimJSONSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return msg, false
	}
	rest := trimJSONSpace(b[1 : len(b)-1])
	if !bytes.HasPrefix(rest, []byte(head)) {
		return msg, false
	}
	rest = trimJSONSpace(rest[len(head):])
	if len(rest) == 0 || rest[0] != ',' {
		return msg, false
	}
	obj := trimJSONSpace(rest[1:])
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return msg, false
	}
	ev, err := event.Parse(obj)
	if err != nil {
		return msg, false
	}
	return ClientMessage{Type: TypeEvent, Event: ev}, true
}

// trimJSONSpace trims what JSON counts as white space: space, tab, line
// feed and carriage return, and nothing else.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// parseClient is ParseClient's general path: the frame decoded as a JSON
// array, then each element by the message's type.
func parseClient(b []byte) (ClientMessage, error) {
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err != nil {
		if !json.Valid(b) {
			return ClientMessage{}, perr("JSON parse error: %s", err.Error())
		}
		return ClientMessage{}, perr("expected JSON array")
	}
	if arr == nil {
		return ClientMessage{}, perr("expected JSON array")
	}
	if len(arr) == 0 {
		return ClientMessage{}, perr("empty array")
	}
	var typ string
	if json.Unmarshal(arr[0], &typ) != nil {
		return ClientMessage{}, perr("first element must be a string")
	}
	msg := ClientMessage{Type: typ}
	switch typ {
	case TypeEvent:
		if len(arr) < 2 || !isObject(arr[1]) {
			return ClientMessage{}, perr("EVENT requires event object")
		}
		ev, err := event.Parse(arr[1])
		if err != nil {
			return ClientMessage{}, perr("invalid event: %s", err.Error())
		}
		msg.Event = ev
	case TypeAuth:
		if len(arr) < 2 || !isObject(arr[1]) {
			return ClientMessage{}, perr("AUTH requires event object")
		}
		ev, err := event.Parse(arr[1])
		if err != nil {
			return ClientMessage{}, perr("invalid auth event: %s", err.Error())
		}
		msg.Event = ev
	case TypeReq, TypeCount:
		sub, err := parseSubID(typ, arr)
		if err != nil {
			return ClientMessage{}, err
		}
		msg.SubID = sub
		if n := len(arr) - 2; n > MaxFilters {
			return ClientMessage{}, perr("%s contains %d filters, maximum is %d", typ, n, MaxFilters)
		}
		msg.Filters = make([]event.Filter, 0, len(arr)-2)
		for _, raw := range arr[2:] {
			f, err := event.ParseFilter(raw)
			if err != nil {
				return ClientMessage{}, perr("invalid filter: %s", err.Error())
			}
			msg.Filters = append(msg.Filters, f)
		}
	case TypeClose:
		if len(arr) < 2 {
			return ClientMessage{}, perr("CLOSE requires sub_id")
		}
		if json.Unmarshal(arr[1], &msg.SubID) != nil {
			return ClientMessage{}, perr("CLOSE sub_id must be a string")
		}
	case TypeNegOpen, TypeNegMsg, TypeNegClose:
		if err := parseNeg(&msg, arr); err != nil {
			return ClientMessage{}, err
		}
	default:
		return ClientMessage{}, perr("unknown message type: %s", typ)
	}
	return msg, nil
}

// parseNeg parses ["NEG-OPEN",sub,<filter>,<hex>], ["NEG-MSG",sub,<hex>]
// and ["NEG-CLOSE",sub], each with exactly those elements.
func parseNeg(msg *ClientMessage, arr []json.RawMessage) error {
	typ := msg.Type
	sub, err := parseSubID(typ, arr)
	if err != nil {
		return err
	}
	msg.SubID = sub
	want := map[string]int{TypeNegOpen: 4, TypeNegMsg: 3, TypeNegClose: 2}[typ]
	if len(arr) != want {
		return perr("%s takes %d elements, got %d", typ, want, len(arr))
	}
	if typ == TypeNegOpen {
		if !isObject(arr[2]) {
			return perr("NEG-OPEN requires a filter object")
		}
		f, err := event.ParseFilter(arr[2])
		if err != nil {
			return perr("invalid filter: %s", err.Error())
		}
		msg.Filters = []event.Filter{f}
	}
	if typ != TypeNegClose {
		raw := bytes.TrimSpace(arr[len(arr)-1])
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &msg.NegMessage) != nil {
			return perr("%s message must be a string", typ)
		}
	}
	return nil
}

func parseSubID(typ string, arr []json.RawMessage) (string, error) {
	if len(arr) < 2 {
		return "", perr("%s requires sub_id", typ)
	}
	var sub string
	if json.Unmarshal(arr[1], &sub) != nil {
		return "", perr("%s sub_id must be a string", typ)
	}
	if sub == "" {
		return "", perr("%s sub_id must not be empty", typ)
	}
	if len(sub) > MaxSubIDLength {
		return "", perr("%s sub_id exceeds maximum length of %d bytes", typ, MaxSubIDLength)
	}
	return sub, nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// AppendJSON re-encodes the message; ParseClient of the output yields an equal message.
func (m *ClientMessage) AppendJSON(b []byte) []byte {
	b = append(b, '[')
	b = event.AppendString(b, m.Type)
	switch m.Type {
	case TypeEvent, TypeAuth:
		b = append(b, ',')
		b = m.Event.AppendJSON(b)
	case TypeReq, TypeCount:
		b = append(b, ',')
		b = event.AppendString(b, m.SubID)
		for i := range m.Filters {
			b = append(b, ',')
			b = m.Filters[i].AppendJSON(b)
		}
	case TypeClose, TypeNegClose:
		b = append(b, ',')
		b = event.AppendString(b, m.SubID)
	case TypeNegOpen, TypeNegMsg:
		b = append(b, ',')
		b = event.AppendString(b, m.SubID)
		for i := range m.Filters {
			b = append(b, ',')
			b = m.Filters[i].AppendJSON(b)
		}
		b = append(b, ',')
		b = event.AppendString(b, m.NegMessage)
	}
	return append(b, ']')
}

// PeekEventID returns the id of an EVENT frame that is too large to parse in
// full, or "" when the frame is not an EVENT or its id cannot be found in the
// first bytes. It never fails.
func PeekEventID(b []byte) string {
	head := b[:min(len(b), 4096)]
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte("[")) {
		return ""
	}
	rest := bytes.TrimLeft(trimmed[1:], " \t\r\n")
	if !bytes.HasPrefix(rest, []byte(`"EVENT"`)) {
		return ""
	}
	i := bytes.Index(rest, []byte(`"id"`))
	if i < 0 {
		return ""
	}
	r := bytes.TrimLeft(rest[i+4:], " \t\r\n")
	if len(r) == 0 || r[0] != ':' {
		return ""
	}
	r = bytes.TrimLeft(r[1:], " \t\r\n")
	if len(r) < 66 || r[0] != '"' || r[65] != '"' {
		return ""
	}
	id := string(r[1:65])
	if !event.IsHex64(id) {
		return ""
	}
	return id
}

// ValidUTF8 reports whether a binary frame can be handled as text.
func ValidUTF8(b []byte) bool { return utf8.Valid(b) }
