package client

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/buzz-relay/buzz/internal/event"
)

// Relay message types (docs/PROTOCOL.md §7.1).
const (
	typeEvent  = "EVENT"
	typeOK     = "OK"
	typeEOSE   = "EOSE"
	typeClosed = "CLOSED"
	typeNotice = "NOTICE"
	typeAuth   = "AUTH"
	typeCount  = "COUNT"
)

// relayMessage is one parsed relay frame. Which fields are set depends on Type.
type relayMessage struct {
	Type    string
	SubID   string      // EVENT, EOSE, CLOSED, COUNT
	Event   event.Event // EVENT
	EventID string      // OK
	OK      bool        // OK
	Message string      // OK, CLOSED, NOTICE; the challenge for AUTH
	Count   int64       // COUNT
}

// parseRelay parses one relay frame. It never panics.
func parseRelay(b []byte) (relayMessage, error) {
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err != nil {
		return relayMessage{}, fmt.Errorf("parse relay frame: %w", err)
	}
	if len(arr) == 0 {
		return relayMessage{}, errors.New("parse relay frame: empty array")
	}
	var m relayMessage
	if err := json.Unmarshal(arr[0], &m.Type); err != nil {
		return m, errors.New("parse relay frame: first element must be a string")
	}
	str := func(i int, dst *string) error {
		if i >= len(arr) {
			return fmt.Errorf("parse relay frame: %s needs %d elements", m.Type, i+1)
		}
		if err := json.Unmarshal(arr[i], dst); err != nil {
			return fmt.Errorf("parse relay frame: %s element %d must be a string", m.Type, i)
		}
		return nil
	}
	switch m.Type {
	case typeEvent:
		if err := str(1, &m.SubID); err != nil {
			return m, err
		}
		if len(arr) < 3 {
			return m, errors.New("parse relay frame: EVENT needs an event")
		}
		ev, err := event.Parse(arr[2])
		if err != nil {
			return m, fmt.Errorf("parse relay frame: invalid event: %w", err)
		}
		m.Event = ev
	case typeOK:
		if err := str(1, &m.EventID); err != nil {
			return m, err
		}
		if len(arr) < 3 || json.Unmarshal(arr[2], &m.OK) != nil {
			return m, errors.New("parse relay frame: OK element 2 must be a boolean")
		}
		if len(arr) > 3 {
			if err := str(3, &m.Message); err != nil {
				return m, err
			}
		}
	case typeEOSE:
		return m, str(1, &m.SubID)
	case typeClosed:
		if err := str(1, &m.SubID); err != nil {
			return m, err
		}
		if len(arr) > 2 {
			return m, str(2, &m.Message)
		}
	case typeNotice, typeAuth:
		return m, str(1, &m.Message)
	case typeCount:
		if err := str(1, &m.SubID); err != nil {
			return m, err
		}
		var body struct {
			Count *int64 `json:"count"`
		}
		if len(arr) < 3 || json.Unmarshal(arr[2], &body) != nil || body.Count == nil {
			return m, errors.New(`parse relay frame: COUNT needs {"count":n}`)
		}
		m.Count = *body.Count
	default:
		return m, fmt.Errorf("parse relay frame: unknown message type %q", m.Type)
	}
	return m, nil
}

// Frames the client sends.

func eventFrame(typ string, ev *event.Event) []byte {
	b := append([]byte(`["`+typ+`",`), ev.AppendJSON(nil)...)
	return append(b, ']')
}

func filtersFrame(typ, sub string, filters []event.Filter) []byte {
	b := append([]byte(`["`+typ+`",`), event.AppendString(nil, sub)...)
	for i := range filters {
		b = append(b, ',')
		b = filters[i].AppendJSON(b)
	}
	return append(b, ']')
}

func closeFrame(sub string) []byte {
	b := append([]byte(`["CLOSE",`), event.AppendString(nil, sub)...)
	return append(b, ']')
}
