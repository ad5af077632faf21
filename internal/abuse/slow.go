package abuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/buzz-relay/buzz/internal/event"
)

// slowPace is the wait between two REQs of the slow reader.
const slowPace = 20 * time.Millisecond

// slowReader opens a socket with a 4 KiB receive buffer, authenticates,
// then sends REQ {"kinds":[1],"limit":1000} again and again (50
// subscription ids in turn) without ever reading. Its outcome is closed
// when the relay dropped the socket (the write failed), open when it was
// still held at the end; reqs-sent counts the REQs written.
func slowReader(ctx context.Context, e *Env) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := rawAuth(dctx, e.Target, e.Key)
	cancel()
	if err != nil {
		e.Outcomes.Add(ctx, false, "", err)
		return nil
	}
	defer c.CloseNow()
	sent := 0
	defer func() { e.Outcomes.Note("reqs-sent", sent) }()
	for i := range e.Opts.n(5000) {
		frame, _ := json.Marshal([]any{"REQ", "s" + strconv.Itoa(i%50), map[string]any{"kinds": []int{event.KindNote}, "limit": 1000}})
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		werr := c.Write(wctx, websocket.MessageText, frame)
		wcancel()
		switch {
		case ctx.Err() != nil:
			e.Outcomes.Note("open", 1)
			return nil
		case werr == nil:
			sent++
		case errors.Is(werr, context.DeadlineExceeded):
			// Our send buffer is full too: the relay stopped reading the
			// socket without closing it (and the timed-out write closed it
			// on our side).
			e.Outcomes.Note("stalled", 1)
			return nil
		default:
			e.Outcomes.Add(ctx, false, "", werr)
			return nil
		}
		pause(ctx, slowPace)
	}
	e.Outcomes.Note("open", 1)
	return nil
}

// rawAuth dials the community with a 4 KiB receive buffer and answers
// its NIP-42 challenge, reading frames only until the AUTH's OK.
func rawAuth(ctx context.Context, t Target, sk []byte) (*websocket.Conn, error) {
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	relay := t.URL
	opts := &websocket.DialOptions{HTTPClient: hc}
	if t.Host != "" {
		u, err := neturl.Parse(t.URL)
		if err != nil {
			return nil, fmt.Errorf("slow reader: %w", err)
		}
		u.Host = t.Host
		relay = u.String()
		opts.Host = t.Host
	}
	c, _, err := websocket.Dial(ctx, t.URL, opts)
	if err != nil {
		return nil, fmt.Errorf("slow reader: dial: %w", err)
	}
	fail := func(err error) (*websocket.Conn, error) {
		c.CloseNow()
		return nil, fmt.Errorf("slow reader: %w", err)
	}
	var authID string
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return fail(err)
		}
		var msg []json.RawMessage
		if json.Unmarshal(b, &msg) != nil || len(msg) < 2 {
			continue
		}
		var typ, arg string
		_ = json.Unmarshal(msg[0], &typ)
		_ = json.Unmarshal(msg[1], &arg)
		switch {
		case typ == "AUTH" && authID == "":
			ev, err := signed(sk, event.KindAuth, "", event.Tags{{"challenge", arg}, {"relay", relay}})
			if err != nil {
				return fail(err)
			}
			authID = ev.ID
			frame := append(append([]byte(`["AUTH",`), ev.AppendJSON(nil)...), ']')
			if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
				return fail(err)
			}
		case typ == "OK" && arg == authID && len(msg) >= 3:
			var ok bool
			_ = json.Unmarshal(msg[2], &ok)
			if !ok {
				return fail(errors.New("auth refused: " + string(b)))
			}
			return c, nil
		}
	}
}
