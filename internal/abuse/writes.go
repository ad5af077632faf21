package abuse

import (
	"context"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// publishFlood publishes small kind 1 notes from the one key on up to 16
// sockets at once, as fast as the relay answers.
func publishFlood(ctx context.Context, e *Env) error {
	e.repeat(ctx, e.Opts.n(100000), min(16, e.Opts.Concurrency), func(ctx context.Context, c *client.Conn) (bool, string, error) {
		ev, err := signed(e.Key, event.KindNote, "flood "+newUUID(), nil)
		if err != nil {
			return false, "", err
		}
		return c.Publish(ctx, ev)
	})
	return nil
}

// channelSpam creates open channels (kind 9007) from the one key, four
// at a time.
func channelSpam(ctx context.Context, e *Env) error {
	e.repeat(ctx, e.Opts.n(2000), 4, func(ctx context.Context, c *client.Conn) (bool, string, error) {
		id := newUUID()
		ev, err := signed(e.Key, event.KindCreateGroup, "", event.Tags{{"h", id}, {"name", "spam-" + id[:8]}})
		if err != nil {
			return false, "", err
		}
		return c.Publish(ctx, ev)
	})
	return nil
}

// pTags posts events with 10,000 p tags to the bridge: at ~720 KB they
// are over the WebSocket frame limit, not over the bridge's 1 MiB body.
// Each would write one mention row per tag.
func pTags(ctx context.Context, e *Env) error {
	ps := randomHex(e.Opts.n(10000))
	tags := make(event.Tags, len(ps))
	for i, p := range ps {
		tags[i] = event.Tag{"p", p}
	}
	e.repeatHTTP(ctx, e.Opts.n(20), 2, func(ctx context.Context, h *client.HTTP) (bool, string, error) {
		ev, err := signed(e.Key, event.KindNote, "mentions", tags)
		if err != nil {
			return false, "", err
		}
		return h.Publish(ctx, ev)
	})
	return nil
}

// roleEscalation has a fresh owner key create an open channel, then the
// attacker adds itself as owner (kind 9000) and deletes the channel
// (kind 9008). Accepted steps are also noted as self-grant-ok and
// delete-ok; a channel the owner could not create is setup-refused.
func roleEscalation(ctx context.Context, e *Env) error {
	me := event.PubKey(e.Key)
	att := &session{e: e}
	defer att.reset()
	for range e.Opts.n(20) {
		if ctx.Err() != nil {
			return nil
		}
		id, ok := ownChannel(ctx, e)
		if !ok {
			e.Outcomes.Note("setup-refused", 1)
			continue
		}
		c, err := att.conn(ctx)
		if err != nil {
			e.Outcomes.Add(ctx, false, "", err)
			continue
		}
		for _, step := range []struct {
			kind int
			tags event.Tags
			note string
		}{
			{event.KindPutUser, event.Tags{{"h", id}, {"p", me}, {"role", "owner"}}, "self-grant-ok"},
			{event.KindDeleteGroup, event.Tags{{"h", id}}, "delete-ok"},
		} {
			ev, err := signed(e.Key, step.kind, "", step.tags)
			if err != nil {
				return err
			}
			ok, err := e.op(ctx, func(ctx context.Context) (bool, string, error) { return c.Publish(ctx, ev) })
			if err != nil && !refused(err) {
				att.reset()
				break
			}
			if ok {
				e.Outcomes.Note(step.note, 1)
			}
		}
	}
	return nil
}

// ownChannel creates an open channel with a key of its own.
func ownChannel(ctx context.Context, e *Env) (string, bool) {
	owner := &Env{Target: e.Target, Key: event.GenerateKey(), Opts: e.Opts}
	s := &session{e: owner}
	defer s.reset()
	c, err := s.conn(ctx)
	if err != nil {
		return "", false
	}
	id := newUUID()
	ev, err := signed(owner.Key, event.KindCreateGroup, "", event.Tags{{"h", id}, {"name", "victim-" + id[:8]}})
	if err != nil {
		return "", false
	}
	octx, cancel := context.WithTimeout(ctx, e.Opts.OpTimeout)
	defer cancel()
	ok, _, err := c.Publish(octx, ev)
	return id, ok && err == nil
}
