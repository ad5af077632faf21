package abuse

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/client"
)

// session is one attacker socket, dialled on first use and again after
// the relay dropped it.
type session struct {
	e *Env
	c *client.Conn
}

func (s *session) conn(ctx context.Context) (*client.Conn, error) {
	if s.c == nil {
		c, err := s.e.Target.Dial(ctx, s.e.Key)
		if err != nil {
			return nil, err
		}
		s.c = c
	}
	return s.c, nil
}

func (s *session) reset() {
	if s.c != nil {
		_ = s.c.Close()
		s.c = nil
	}
}

// dialPause is the wait after a failed dial before the next try.
const dialPause = 100 * time.Millisecond

// repeat runs f n times in all over conc sockets of the attacker, each
// call bounded by the request timeout and counted. A socket that failed
// otherwise than by a refusal (closed, timed out) is dialled again.
func (e *Env) repeat(ctx context.Context, n, conc int, f func(ctx context.Context, c *client.Conn) (bool, string, error)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(conc, n)) {
		wg.Go(func() {
			s := &session{e: e}
			defer s.reset()
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				c, err := s.conn(ctx)
				if err != nil {
					if ctx.Err() == nil {
						e.Outcomes.Add(ctx, false, "", err)
						pause(ctx, dialPause)
					}
					continue
				}
				if _, err := e.op(ctx, func(octx context.Context) (bool, string, error) { return f(octx, c) }); err != nil && !refused(err) {
					s.reset()
				}
			}
		})
	}
	wg.Wait()
}

// repeatHTTP runs f n times in all with conc requests in flight on the
// bridge, signed by the attacker.
func (e *Env) repeatHTTP(ctx context.Context, n, conc int, f func(ctx context.Context, h *client.HTTP) (bool, string, error)) {
	h := e.bridge()
	defer h.Client.CloseIdleConnections() // no keep-alive outlives the attack
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(conc, n)) {
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				_, _ = e.op(ctx, func(octx context.Context) (bool, string, error) { return f(octx, h) })
			}
		})
	}
	wg.Wait()
}

// bridge is the attacker's bridge client, with the tokens Prepare signed.
func (e *Env) bridge() *client.HTTP {
	h := e.Target.Bridge(e.Key)
	if e.tokens != nil {
		h.Authorize = e.tokens.authorize
	}
	return h
}

// query is one REQ to EOSE as an answer: accepted when it got there.
func query(f func(ctx context.Context, c *client.Conn) error) func(ctx context.Context, c *client.Conn) (bool, string, error) {
	return func(ctx context.Context, c *client.Conn) (bool, string, error) {
		err := f(ctx, c)
		return err == nil, "", err
	}
}

func refused(err error) bool {
	var r *client.RefusedError
	return errors.As(err, &r)
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
