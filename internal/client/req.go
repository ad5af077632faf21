package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/buzz-relay/buzz/internal/event"
)

// Query sends a REQ, collects the stored events until EOSE, then sends CLOSE.
// Events are returned in the order the relay sent them. A CLOSED before EOSE
// is a *RefusedError with its message.
func (c *Conn) Query(ctx context.Context, filters ...event.Filter) ([]event.Event, error) {
	var (
		mu     sync.Mutex
		events []event.Event
	)
	s := newSub(func(ev event.Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	})
	id, err := c.register("", s)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer c.unregister(ctx, id, s)
	if err := c.write(ctx, filtersFrame("REQ", id, filters)); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	select {
	case <-s.eose:
	case <-s.closed:
		return nil, c.endErr("query", s)
	case <-ctx.Done():
		return nil, fmt.Errorf("query: %w", ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	return events, nil
}

// QueryCount sends a REQ and returns how many stored events the relay sent
// before EOSE, without decoding them: a load generator's reader that must
// not spend its machine's CPU on what it reads. A CLOSED before EOSE is a
// *RefusedError with its message.
func (c *Conn) QueryCount(ctx context.Context, filters ...event.Filter) (int64, error) {
	s := newSub(nil)
	s.frames = new(atomic.Int64)
	id, err := c.register("", s)
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	defer c.unregister(ctx, id, s)
	if err := c.write(ctx, filtersFrame("REQ", id, filters)); err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	select {
	case <-s.eose:
	case <-s.closed:
		return 0, c.endErr("query", s)
	case <-ctx.Done():
		return 0, fmt.Errorf("query: %w", ctx.Err())
	}
	return s.frames.Load(), nil
}

// Count sends a NIP-45 COUNT and returns the relay's sum over the filters.
// A CLOSED is a *RefusedError with its message.
func (c *Conn) Count(ctx context.Context, filters ...event.Filter) (int64, error) {
	s := newSub(nil)
	id, err := c.register("", s)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	defer func() { // COUNT registers nothing on the relay: nothing to CLOSE
		c.mu.Lock()
		if c.subs[id] == s {
			delete(c.subs, id)
		}
		c.mu.Unlock()
	}()
	if err := c.write(ctx, filtersFrame("COUNT", id, filters)); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	select {
	case n := <-s.result:
		return n, nil
	case <-s.closed:
		return 0, c.endErr("count", s)
	case <-ctx.Done():
		return 0, fmt.Errorf("count: %w", ctx.Err())
	}
}

// endErr explains why s ended: a CLOSED from the relay, or the connection.
func (c *Conn) endErr(op string, s *sub) error {
	select {
	case <-c.done:
		if s.msg == "" {
			return fmt.Errorf("%s: %w", op, c.err)
		}
	default:
	}
	return &RefusedError{Op: op, Message: s.msg}
}

// SubscriptionBuffer is the capacity of the channel Subscribe returns.
const SubscriptionBuffer = 256

// Subscribe opens a live subscription under id and returns its events:
// stored ones first, then live ones as the relay sends them. The channel is
// closed when the relay sends CLOSED, when ctx ends (a CLOSE is sent), or when
// the connection closes. The caller must keep draining it: while it is full
// the connection's reader waits, which stalls every other call on the Conn.
// Subscribe returns once the REQ is sent, not at EOSE.
func (c *Conn) Subscribe(ctx context.Context, id string, filters ...event.Filter) (<-chan event.Event, error) {
	if id == "" {
		return nil, fmt.Errorf("subscribe: empty subscription id")
	}
	out := make(chan event.Event, SubscriptionBuffer)
	stop := make(chan struct{})
	var outMu sync.Mutex // held while the reader sends, so out is never closed under it
	outClosed := false
	s := newSub(func(ev event.Event) {
		outMu.Lock()
		defer outMu.Unlock()
		if outClosed {
			return
		}
		select {
		case out <- ev:
		case <-stop:
		}
	})
	if _, err := c.register(id, s); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", id, err)
	}
	if err := c.write(ctx, filtersFrame("REQ", id, filters)); err != nil {
		c.unregister(ctx, id, s)
		return nil, fmt.Errorf("subscribe %s: %w", id, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			c.unregister(ctx, id, s)
		case <-s.closed:
		}
		close(stop)
		outMu.Lock()
		outClosed = true
		close(out)
		outMu.Unlock()
	}()
	return out, nil
}
