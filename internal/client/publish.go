package client

import (
	"context"
	"fmt"

	"github.com/buzz-relay/buzz/internal/event"
)

// Publish sends ["EVENT",ev] and waits for the relay's OK for ev.ID. ok and
// msg are the relay's answer; err is set only when no answer came (ctx ended,
// the connection closed, or ev.ID is already in flight on this connection).
// Many Publish calls may be in flight on one Conn.
func (c *Conn) Publish(ctx context.Context, ev event.Event) (ok bool, msg string, err error) {
	ch := make(chan okResult, 1)
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return false, "", c.err
	default:
	}
	if _, dup := c.oks[ev.ID]; dup {
		c.mu.Unlock()
		return false, "", fmt.Errorf("publish %s: already in flight", ev.ID)
	}
	c.oks[ev.ID] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.oks[ev.ID] == ch {
			delete(c.oks, ev.ID)
		}
		c.mu.Unlock()
	}
	if err := c.write(ctx, eventFrame(typeEvent, &ev)); err != nil {
		forget()
		return false, "", fmt.Errorf("publish %s: %w", ev.ID, err)
	}
	select {
	case r := <-ch:
		return r.ok, r.msg, nil
	case <-ctx.Done():
		forget()
		return false, "", fmt.Errorf("publish %s: %w", ev.ID, ctx.Err())
	case <-c.done:
		return false, "", fmt.Errorf("publish %s: %w", ev.ID, c.err)
	}
}
