package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// subID is the one subscription id every fanout subscriber uses.
const subID = "f"

// subscriber is one fanout socket: authenticated (NIP-42), holding one REQ
// for the channel, read by one goroutine that stamps every EVENT the moment
// its frame is read. It speaks the wire itself rather than through
// client.Conn so that the stamp is taken before any decoding or channel
// hand-off, and so that EOSE, which says the live subscription is in place,
// can be awaited before publishing starts.
type subscriber struct {
	ws *websocket.Conn
	// recs are the first arrivals of the run's events, in order.
	recs []delivery
	// seen marks the run's events already received, by index.
	seen []bool
	// dups counts EVENTs of an event already received; unknown counts
	// EVENTs of events the run did not publish.
	dups, unknown int
	// ended says why the subscription ended before the phase did: the
	// relay's CLOSED message or the read error. "" while it lasted.
	ended string
}

// delivery is one event's arrival at one subscriber.
type delivery struct {
	idx int32         // the event's index in the run
	at  time.Duration // since the phase's epoch
}

// dialSubscriber connects to url, authenticates as sk, sends the channel's
// REQ and waits for its EOSE. ctx bounds the handshake only.
func dialSubscriber(ctx context.Context, url string, sk []byte, channel string, events int) (*subscriber, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(client.MaxFrameBytes)
	s := &subscriber{ws: ws, seen: make([]bool, events)}
	if err := s.handshake(ctx, url, sk, channel); err != nil {
		ws.CloseNow()
		return nil, err
	}
	return s, nil
}

// handshake answers the AUTH challenge, then subscribes and waits for EOSE.
func (s *subscriber) handshake(ctx context.Context, url string, sk []byte, channel string) error {
	if err := s.authenticate(ctx, url, sk); err != nil {
		return err
	}
	filter := event.Filter{Kinds: []int{event.KindStreamMessage}, Tags: map[string][]string{"h": {channel}}}
	req := append(append([]byte(`["REQ","`+subID+`",`), filter.AppendJSON(nil)...), ']')
	if err := s.ws.Write(ctx, websocket.MessageText, req); err != nil {
		return fmt.Errorf("send REQ: %w", err)
	}
	if err := s.await(ctx, "EOSE", subID); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// authenticate waits for the relay's AUTH challenge and answers it as sk
// (NIP-42), returning once the relay said OK true.
func (s *subscriber) authenticate(ctx context.Context, url string, sk []byte) error {
	challenge := ""
	for challenge == "" {
		f, err := s.frame(ctx)
		if err != nil {
			return fmt.Errorf("wait for auth challenge: %w", err)
		}
		if len(f) == 2 && str(f[0]) == "AUTH" {
			challenge = str(f[1])
		}
	}
	auth := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindAuth,
		Tags: event.Tags{{"relay", url}, {"challenge", challenge}}}
	if err := auth.Sign(sk); err != nil {
		return fmt.Errorf("sign auth: %w", err)
	}
	if err := s.ws.Write(ctx, websocket.MessageText, append(append([]byte(`["AUTH",`), auth.AppendJSON(nil)...), ']')); err != nil {
		return fmt.Errorf("send auth: %w", err)
	}
	if err := s.await(ctx, "OK", auth.ID); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// await reads frames until ["OK",key,true,…] or ["EOSE",key]; an OK false
// or a CLOSED for key is an error carrying the relay's message.
func (s *subscriber) await(ctx context.Context, typ, key string) error {
	for {
		f, err := s.frame(ctx)
		if err != nil {
			return err
		}
		if len(f) < 2 || str(f[1]) != key {
			continue
		}
		switch t := str(f[0]); {
		case t == typ && typ == "OK" && len(f) >= 3:
			if string(f[2]) == "true" {
				return nil
			}
			return fmt.Errorf("refused: %s", message(f, 3))
		case t == typ:
			return nil
		case t == "CLOSED":
			return fmt.Errorf("closed: %s", message(f, 2))
		}
	}
}

// frame reads and decodes one frame as a JSON array.
func (s *subscriber) frame(ctx context.Context) ([]json.RawMessage, error) {
	_, b, err := s.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	var f []json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("relay sent a frame that is not a JSON array: %.80s", b)
	}
	return f, nil
}

// read is the subscriber's one reader: it stamps and records every EVENT
// until ctx ends or the relay ends the subscription. index maps the run's
// event ids to their indexes; received counts first arrivals over every
// subscriber, so the phase can tell when all are in.
func (s *subscriber) read(ctx context.Context, epoch time.Time, index map[string]int32, received *atomic.Int64) {
	var buf bytes.Buffer
	for {
		_, r, err := s.ws.Reader(ctx)
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			if ctx.Err() == nil {
				s.ended = "connection ended: " + err.Error()
			}
			return
		}
		at := time.Since(epoch)
		b := buf.Bytes()
		if id, ok := eventID(b); ok {
			s.record(index, id, at, received)
			continue
		}
		if msg, ok := closedMessage(b); ok {
			s.ended = "CLOSED: " + msg
			return
		}
	}
}

// record files one EVENT of id that arrived at at.
func (s *subscriber) record(index map[string]int32, id []byte, at time.Duration, received *atomic.Int64) {
	i, ok := index[string(id)] // no copy: the conversion is only a map key
	switch {
	case !ok:
		s.unknown++
	case s.seen[i]:
		s.dups++
	default:
		s.seen[i] = true
		s.recs = append(s.recs, delivery{idx: i, at: at})
		received.Add(1)
	}
}

// eventFramePrefix starts every EVENT frame of the subscription as the
// relay encodes it (wire.EventFrame, event.AppendJSON: id first).
var eventFramePrefix = []byte(`["EVENT","` + subID + `",{"id":"`)

// eventID returns the event id of an EVENT frame of the subscription. It
// reads the id in place (a slice of b) when the frame has the relay's field
// order, and decodes the frame otherwise.
func eventID(b []byte) ([]byte, bool) {
	if bytes.HasPrefix(b, eventFramePrefix) && len(b) >= len(eventFramePrefix)+64 {
		return b[len(eventFramePrefix) : len(eventFramePrefix)+64], true
	}
	if !bytes.HasPrefix(b, []byte(`["EVENT"`)) {
		return nil, false
	}
	var f []json.RawMessage
	if json.Unmarshal(b, &f) != nil || len(f) != 3 || str(f[1]) != subID {
		return nil, false
	}
	var ev struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(f[2], &ev) != nil {
		return nil, false
	}
	return []byte(ev.ID), true
}

// closedMessage returns the message of a CLOSED frame for the subscription.
func closedMessage(b []byte) (string, bool) {
	if !bytes.HasPrefix(b, []byte(`["CLOSED"`)) {
		return "", false
	}
	var f []json.RawMessage
	if json.Unmarshal(b, &f) != nil || len(f) < 2 || str(f[1]) != subID {
		return "", false
	}
	return message(f, 2), true
}

// close ends the socket at once; the reader returns.
func (s *subscriber) close() { s.ws.CloseNow() }

// str decodes a JSON string, "" when it is not one.
func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// message is the string at f[i], "" when there is none.
func message(f []json.RawMessage, i int) string {
	if i >= len(f) {
		return ""
	}
	return str(f[i])
}
