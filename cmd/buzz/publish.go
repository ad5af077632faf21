package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
)

// publishArgs are the flags of publish that shape the event, and whether
// it comes from stdin.
type publishArgs struct {
	a         *app
	kind      int
	content   string
	createdAt int64
	tags      tagFlags
	set       map[string]bool // the event-shaping flags given on the line
	stdin     io.Reader       // the event to read, or nil
}

// partialEvent is an event read from stdin; absent fields are nil.
type partialEvent struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt *int64     `json:"created_at"`
	Kind      *int       `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   *string    `json:"content"`
	Sig       string     `json:"sig"`
}

func (o *publishArgs) bind(fs *pflag.FlagSet) {
	fs.IntVar(&o.kind, "kind", event.KindNote, "event kind")
	fs.StringVar(&o.content, "content", "", "event content")
	fs.Int64Var(&o.createdAt, "created-at", 0, "created_at, unix seconds (default now)")
	fs.Var(&o.tags, "tag", "a tag as name,value,… (repeatable)")
}

func (o *publishArgs) check(fs *pflag.FlagSet, args []string) error {
	o.set = map[string]bool{}
	for _, name := range []string{"kind", "content", "created-at", "tag"} {
		if fs.Changed(name) {
			o.set[name] = true
		}
	}
	switch {
	case len(args) == 1 && args[0] == "-":
		o.stdin = o.a.stdin
	case len(args) > 0:
		return cli.Usagef("publish: unexpected argument %q (give \"-\" to read the event from stdin)", args[0])
	}
	return nil
}

func newPublishCmd(a *app) *cobra.Command {
	o := &publishArgs{a: a}
	return leaf(&cobra.Command{
		Use:   "publish [--kind N] [--content S] [--tag name,value,…]… [-]",
		Short: "sign and publish an event",
		Long: `Publish signs an event with BUZZ_PRIVATE_KEY, sends it and prints
{"id","accepted","message"}; a refusal (accepted false) exits 1.

With "-" a full or partial event is read from stdin: missing fields are
filled (kind 1, created_at now, empty tags and content) and the flags
given override it. A complete, validly signed event is sent as it is.`,
		Example: `  buzz publish --kind 1 --content hello
  buzz publish --kind 9 --content hi --tag h,<channel-uuid>
  echo '{"kind":7,"content":"+","tags":[["e","<event-id>"]]}' | buzz publish -
  buzz publish --http --kind 1 --content "over the bridge" --get id`,
	}, o, func(c *cobra.Command) error { return o.run(c.Context()) })
}

func (o *publishArgs) run(ctx context.Context) error {
	sk, err := secretKey(o.a.getenv, "publish")
	if err != nil {
		return err
	}
	ev, err := buildEvent(*o, o.stdin, sk, time.Now())
	if err != nil {
		return err
	}
	return o.a.withRelay(ctx, func(ctx context.Context, rc relayClient, _ []byte) error {
		accepted, msg, err := rc.Publish(ctx, ev)
		if err != nil {
			return err
		}
		if err := o.a.write(map[string]any{"id": ev.ID, "accepted": accepted, "message": msg}); err != nil {
			return err
		}
		if !accepted {
			return errRefused
		}
		return nil
	})
}

// buildEvent makes the event to publish: the stdin event when stdin is not
// nil, overridden by the flags that were given, missing fields filled, then
// signed with sk. A complete stdin event with a valid signature and no
// overriding flag is returned unchanged.
func buildEvent(pf publishArgs, stdin io.Reader, sk []byte, now time.Time) (event.Event, error) {
	ev := event.Event{CreatedAt: now.Unix(), Kind: event.KindNote, Tags: event.Tags{}}
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return ev, fmt.Errorf("read stdin: %w", err)
		}
		var p partialEvent
		if err := json.Unmarshal(b, &p); err != nil {
			return ev, cli.Usagef("publish: stdin is not an event object: %v", err)
		}
		if p.CreatedAt != nil {
			ev.CreatedAt = *p.CreatedAt
		}
		if p.Kind != nil {
			ev.Kind = *p.Kind
		}
		if p.Content != nil {
			ev.Content = *p.Content
		}
		for _, t := range p.Tags {
			ev.Tags = append(ev.Tags, event.Tag(t))
		}
		if p.ID != "" && p.Sig != "" && p.PubKey != "" && len(pf.set) == 0 {
			full := ev
			full.ID, full.PubKey, full.Sig = p.ID, p.PubKey, p.Sig
			if _, ok := full.CheckID(); ok && full.VerifySignature() {
				return full, nil
			}
		}
		if p.PubKey != "" && !strings.EqualFold(p.PubKey, event.PubKey(sk)) {
			return ev, cli.Usagef("publish: stdin event pubkey %s is not BUZZ_PRIVATE_KEY's %s", p.PubKey, event.PubKey(sk))
		}
	}
	if pf.set["kind"] {
		ev.Kind = pf.kind
	}
	if pf.set["content"] {
		ev.Content = pf.content
	}
	if pf.set["created-at"] {
		ev.CreatedAt = pf.createdAt
	}
	ev.Tags = append(ev.Tags, pf.tags...)
	if ev.Kind < 0 || ev.Kind > 65535 {
		return ev, cli.Usagef("publish: kind %d is outside 0–65535", ev.Kind)
	}
	if ev.CreatedAt < 0 {
		return ev, cli.Usagef("publish: created_at %d is negative", ev.CreatedAt)
	}
	if err := ev.Sign(sk); err != nil {
		return ev, err
	}
	return ev, nil
}
