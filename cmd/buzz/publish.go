package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// tagFlags collects repeated --tag name,value,… flags.
type tagFlags []event.Tag

func (t *tagFlags) String() string { return fmt.Sprint([]event.Tag(*t)) }

func (t *tagFlags) Set(s string) error {
	if s == "" {
		return errors.New("empty tag")
	}
	*t = append(*t, strings.Split(s, ","))
	return nil
}

// publishFlags are the flags of publish that shape the event.
type publishFlags struct {
	kind      int
	content   string
	createdAt int64
	tags      tagFlags
	set       map[string]bool // flags given on the line
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

func runPublish(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("publish")
	var c common
	c.register(fs, a.getenv)
	var pf publishFlags
	fs.IntVar(&pf.kind, "kind", event.KindNote, "event kind")
	fs.StringVar(&pf.content, "content", "", "event content")
	fs.Int64Var(&pf.createdAt, "created-at", 0, "created_at (default now)")
	fs.Var(&pf.tags, "tag", "tag as name,value,… (repeatable)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	pf.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { pf.set[f.Name] = true })
	var stdin io.Reader
	switch {
	case len(pos) == 1 && pos[0] == "-":
		stdin = a.stdin
	case len(pos) > 0:
		return usagef("publish: unexpected argument %q (give \"-\" to read the event from stdin)", pos[0])
	}
	sk, err := secretKey(a.getenv)
	if err != nil {
		return err
	}
	ev, err := buildEvent(pf, stdin, sk, time.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rc, release, err := connect(ctx, &c, sk)
	if err != nil {
		return err
	}
	defer release()
	accepted, msg, err := rc.Publish(ctx, ev)
	if err != nil {
		return err
	}
	if err := writeJSON(a.stdout, map[string]any{"id": ev.ID, "accepted": accepted, "message": msg}); err != nil {
		return err
	}
	if !accepted {
		return errRefused
	}
	return nil
}

// buildEvent makes the event to publish: the stdin event when stdin is not
// nil, overridden by the flags that were given, missing fields filled, then
// signed with sk. A complete stdin event with a valid signature and no
// overriding flag is returned unchanged.
func buildEvent(pf publishFlags, stdin io.Reader, sk []byte, now time.Time) (event.Event, error) {
	ev := event.Event{CreatedAt: now.Unix(), Kind: event.KindNote, Tags: event.Tags{}}
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return ev, fmt.Errorf("read stdin: %w", err)
		}
		var p partialEvent
		if err := json.Unmarshal(b, &p); err != nil {
			return ev, usagef("publish: stdin is not an event object: %v", err)
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
			return ev, usagef("publish: stdin event pubkey %s is not BUZZ_PRIVATE_KEY's %s", p.PubKey, event.PubKey(sk))
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
		return ev, usagef("publish: kind %d is outside 0–65535", ev.Kind)
	}
	if ev.CreatedAt < 0 {
		return ev, usagef("publish: created_at %d is negative", ev.CreatedAt)
	}
	if err := ev.Sign(sk); err != nil {
		return ev, err
	}
	return ev, nil
}
