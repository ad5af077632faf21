package windowbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/event"
)

// publisher is one authenticated WebSocket of one author, with several
// EVENTs in flight. It speaks just enough NIP-01 and NIP-42 for a burst.
type publisher struct {
	ws     *websocket.Conn
	author author
}

// dialPublisher opens ws://<addr>/ with Host: host and authenticates as a.
func dialPublisher(ctx context.Context, addr, host string, a author) (*publisher, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/", &websocket.DialOptions{Host: host})
	if err != nil {
		return nil, fmt.Errorf("dial relay: %w", err)
	}
	ws.SetReadLimit(16 << 20)
	p := &publisher{ws: ws, author: a}
	if err := p.auth(ctx, host); err != nil {
		ws.CloseNow()
		return nil, err
	}
	return p, nil
}

func (p *publisher) close() { _ = p.ws.Close(websocket.StatusNormalClosure, "") }

// frame is a relay frame: its type and the raw elements.
func readFrame(ctx context.Context, ws *websocket.Conn) (string, []json.RawMessage, error) {
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return "", nil, err
		}
		var arr []json.RawMessage
		var typ string
		if json.Unmarshal(b, &arr) != nil || len(arr) == 0 || json.Unmarshal(arr[0], &typ) != nil {
			continue
		}
		return typ, arr, nil
	}
}

// ok is the id, status and message of an OK frame.
func ok(arr []json.RawMessage) (id string, accepted bool, msg string, err error) {
	if len(arr) < 4 {
		return "", false, "", errors.New("short OK frame")
	}
	if err := errors.Join(json.Unmarshal(arr[1], &id), json.Unmarshal(arr[2], &accepted), json.Unmarshal(arr[3], &msg)); err != nil {
		return "", false, "", fmt.Errorf("OK frame: %w", err)
	}
	return id, accepted, msg, nil
}

// auth answers the relay's challenge (NIP-42) and waits for OK true.
func (p *publisher) auth(ctx context.Context, host string) error {
	challenge := ""
	for challenge == "" {
		typ, arr, err := readFrame(ctx, p.ws)
		if err != nil {
			return fmt.Errorf("wait for auth challenge: %w", err)
		}
		if typ == "AUTH" && len(arr) > 1 {
			_ = json.Unmarshal(arr[1], &challenge)
		}
	}
	ev := event.Event{CreatedAt: time.Now().Unix(), Kind: event.KindAuth,
		Tags: event.Tags{{"relay", "ws://" + host}, {"challenge", challenge}}}
	if err := p.author.signEvent(&ev); err != nil {
		return err
	}
	if err := p.write(ctx, "AUTH", &ev); err != nil {
		return err
	}
	for {
		typ, arr, err := readFrame(ctx, p.ws)
		if err != nil {
			return fmt.Errorf("wait for auth answer: %w", err)
		}
		if typ != "OK" {
			continue
		}
		id, accepted, msg, err := ok(arr)
		if err != nil || id != ev.ID {
			continue
		}
		if !accepted {
			return fmt.Errorf("auth refused: %s", msg)
		}
		return nil
	}
}

func (p *publisher) write(ctx context.Context, typ string, ev *event.Event) error {
	b := append([]byte(`["`+typ+`",`), ev.AppendJSON(nil)...)
	b = append(b, ']')
	return p.ws.Write(ctx, websocket.MessageText, b)
}

// sent is what a burst of one socket got back.
type sent struct {
	accepted int
	refused  []string // the first few refusal messages
	refusals int
	lat      []time.Duration // EVENT → OK of each accepted event
}

// publish signs each of evs as the socket's author with created_at = now,
// just before sending it (so a burst's created_at spreads over its
// seconds as live traffic's does), keeps up to inflight unanswered, and
// returns when every one has its OK. evs are updated in place.
func (p *publisher) publish(ctx context.Context, evs []event.Event, inflight int) (sent, error) {
	var (
		mu     sync.Mutex
		at     = make(map[string]time.Time, len(evs))
		res    sent
		slots  = make(chan struct{}, inflight)
		readEr = make(chan error, 1)
	)
	go func() {
		for n := 0; n < len(evs); {
			typ, arr, err := readFrame(ctx, p.ws)
			if err != nil {
				readEr <- fmt.Errorf("read OK: %w", err)
				return
			}
			if typ != "OK" {
				continue
			}
			id, accepted, msg, err := ok(arr)
			if err != nil {
				continue
			}
			mu.Lock()
			t0, mine := at[id]
			if mine {
				delete(at, id)
				if accepted {
					res.accepted++
					res.lat = append(res.lat, time.Since(t0))
				} else {
					res.refusals++
					if len(res.refused) < 3 {
						res.refused = append(res.refused, msg)
					}
				}
			}
			mu.Unlock()
			if mine {
				n++
				<-slots
			}
		}
		readEr <- nil
	}()
	snapshot := func() sent {
		mu.Lock()
		defer mu.Unlock()
		return res
	}
	for i := range evs {
		select {
		case slots <- struct{}{}:
		case err := <-readEr:
			return snapshot(), err
		}
		evs[i].CreatedAt = time.Now().Unix()
		if err := p.author.signEvent(&evs[i]); err != nil {
			return snapshot(), err
		}
		mu.Lock()
		at[evs[i].ID] = time.Now()
		mu.Unlock()
		if err := p.write(ctx, "EVENT", &evs[i]); err != nil {
			return snapshot(), fmt.Errorf("send EVENT: %w", err)
		}
	}
	err := <-readEr
	return snapshot(), err
}
