package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// secretKey reads BUZZ_PRIVATE_KEY; its absence is a usage error of cmd.
func secretKey(getenv func(string) string, cmd string) ([]byte, error) {
	s := strings.TrimSpace(getenv("BUZZ_PRIVATE_KEY"))
	if s == "" {
		return nil, cli.Usagef(`%s: BUZZ_PRIVATE_KEY is not set (64 hex; make one with: eval "$(buzz keygen --export)")`, cmd)
	}
	sk, err := event.ParseSecretKey(s)
	if err != nil {
		return nil, cli.Usagef("%s: BUZZ_PRIVATE_KEY: %v (64 hex; make one with: buzz keygen)", cmd, err)
	}
	return sk, nil
}

// httpBase derives the bridge origin from a relay URL: ws→http, wss→https,
// http(s) kept; the path is dropped.
func httpBase(relay string) (string, error) {
	u, err := url.Parse(relay)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--relay %q is not a URL (e.g. ws://localhost:3000)", relay)
	}
	switch u.Scheme {
	case "ws", "http":
		return "http://" + u.Host, nil
	case "wss", "https":
		return "https://" + u.Host, nil
	}
	return "", fmt.Errorf("--relay %q: scheme must be ws, wss, http or https", relay)
}

// wsURL checks a relay URL for the WebSocket: ws(s) kept, http(s) mapped.
func wsURL(relay string) (string, error) {
	u, err := url.Parse(relay)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--relay %q is not a URL (e.g. ws://localhost:3000)", relay)
	}
	switch u.Scheme {
	case "ws", "wss":
		return relay, nil
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("--relay %q: scheme must be ws, wss, http or https", relay)
	}
	return u.String(), nil
}

// relayClient is what the commands need from either door.
type relayClient interface {
	Publish(ctx context.Context, ev event.Event) (bool, string, error)
	Query(ctx context.Context, filters ...event.Filter) ([]event.Event, error)
	Count(ctx context.Context, filters ...event.Filter) (int64, error)
}

// bridge is the HTTP bridge of the relay a names, whatever --http says.
func (a *app) bridge(sk []byte) (*client.HTTP, error) {
	base, err := httpBase(a.global.relay)
	if err != nil {
		return nil, cli.Usagef("%s: %v", a.name, err)
	}
	return &client.HTTP{BaseURL: base, SK: sk}, nil
}

// connect opens the door --http selects; the returned func releases it.
func (a *app) connect(ctx context.Context, sk []byte) (relayClient, func(), error) {
	if a.global.http {
		h, err := a.bridge(sk)
		if err != nil {
			return nil, nil, err
		}
		return h, func() {}, nil
	}
	u, err := wsURL(a.global.relay)
	if err != nil {
		return nil, nil, cli.Usagef("%s: %v", a.name, err)
	}
	conn, err := client.Dial(ctx, u, sk)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() { _ = conn.Close() }, nil
}

// withRelay reads the key, opens the door --http selects under --timeout
// and runs fn on it.
func (a *app) withRelay(ctx context.Context, fn func(ctx context.Context, rc relayClient, sk []byte) error) error {
	sk, err := secretKey(a.getenv, a.name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.global.timeout)
	defer cancel()
	rc, release, err := a.connect(ctx, sk)
	if err != nil {
		return err
	}
	defer release()
	return fn(ctx, rc, sk)
}

// publishReport signs ev (created now unless set), publishes it and prints
// fields plus event_id, accepted and message; a refusal exits 1.
func (a *app) publishReport(ctx context.Context, rc relayClient, sk []byte, ev event.Event, fields map[string]any) error {
	if ev.CreatedAt == 0 {
		ev.CreatedAt = time.Now().Unix()
	}
	if ev.Tags == nil {
		ev.Tags = event.Tags{}
	}
	if err := ev.Sign(sk); err != nil {
		return err
	}
	accepted, msg, err := rc.Publish(ctx, ev)
	if err != nil {
		return err
	}
	out := map[string]any{"event_id": ev.ID, "accepted": accepted, "message": msg}
	for k, v := range fields {
		out[k] = v
	}
	if err := a.write(out); err != nil {
		return err
	}
	if !accepted {
		return errRefused
	}
	return nil
}

// sendOne is the run of a command that publishes a single event.
func (a *app) sendOne(ctx context.Context, ev event.Event, fields map[string]any) error {
	return a.withRelay(ctx, func(ctx context.Context, rc relayClient, sk []byte) error {
		return a.publishReport(ctx, rc, sk, ev, fields)
	})
}

// writeEvents prints events one per line, in the order given.
func (a *app) writeEvents(events []event.Event) error {
	for _, ev := range events {
		if err := a.write(ev); err != nil {
			return err
		}
	}
	return nil
}

// lookup fetches one event by id; a missing one is a refusal naming what.
func lookup(ctx context.Context, rc relayClient, op, what, id string) (event.Event, error) {
	events, err := rc.Query(ctx, event.Filter{IDs: []string{id}})
	if err != nil {
		return event.Event{}, err
	}
	for _, ev := range events {
		if ev.ID == id {
			return ev, nil
		}
	}
	return event.Event{}, errNotFound(op, what+" "+id)
}

// errNotFound is a lookup that found nothing: a refusal (exit 1).
func errNotFound(op, what string) error {
	return &client.RefusedError{Op: op, Message: what + " not found"}
}

// channelID checks a --channel/--id value: a UUID, returned lowercase.
func channelID(cmd, flagName, v string) (string, error) {
	if v == "" {
		return "", cli.Usagef("%s: --%s is required (a channel UUID; see: buzz channels list)", cmd, flagName)
	}
	u, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		return "", cli.Usagef("%s: --%s %q is not a hyphenated UUID (see: buzz channels list)", cmd, flagName, v)
	}
	return u.String(), nil
}

// hexID checks an event id or pubkey flag: 64 hex, returned lowercase.
func hexID(cmd, flagName, v string) (string, error) {
	if v == "" {
		return "", cli.Usagef("%s: --%s is required (64 hex)", cmd, flagName)
	}
	if !event.IsHexAnyCase64(v) {
		return "", cli.Usagef("%s: --%s %q is not 64 hex characters", cmd, flagName, v)
	}
	return strings.ToLower(v), nil
}
