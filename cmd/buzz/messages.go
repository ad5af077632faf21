package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
)

// timeFlag is a --since/--until bound: unix seconds or RFC 3339.
type timeFlag struct{ v *int64 }

func (f *timeFlag) String() string {
	if f == nil || f.v == nil {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}

func (f *timeFlag) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return fmt.Errorf("negative time %d", n)
		}
		f.v = &n
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is neither unix seconds nor RFC 3339", s)
	}
	n := t.Unix()
	f.v = &n
	return nil
}

// --- messages send ---

type sendArgs struct {
	common
	channel string
	content string
	replyTo string
}

func parseSend(a *app, args []string) (*sendArgs, error) {
	const cmd = "messages send"
	fs := newFlagSet(cmd)
	var o sendArgs
	o.register(fs, a.getenv)
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	fs.StringVar(&o.content, "content", "", "message text (required)")
	fs.StringVar(&o.replyTo, "reply-to", "", "event id of the message replied to")
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return nil, err
	}
	if o.content == "" {
		return nil, usagef("%s: --content is required", cmd)
	}
	if o.replyTo != "" {
		if o.replyTo, err = hexID(cmd, "reply-to", o.replyTo); err != nil {
			return nil, err
		}
	}
	return &o, nil
}

// threadRoot returns the root of the thread parent belongs to: its last
// valid NIP-10 "root" marker, else parent itself (10-relay-core §6.1).
func threadRoot(parent event.Event) string {
	root := parent.ID
	for _, t := range parent.Tags {
		if len(t) >= 4 && t[0] == "e" && t[3] == "root" && event.IsHexAnyCase64(t[1]) {
			root = strings.ToLower(t[1])
		}
	}
	return root
}

// messageEvent is a kind 9 in channel; a reply (root != "") carries the
// marked tags ["e",root,"","root"] and ["e",parent,"","reply"].
func messageEvent(channel, content, root, parent string) event.Event {
	tags := event.Tags{{"h", channel}}
	if root != "" {
		tags = append(tags, event.Tag{"e", root, "", "root"}, event.Tag{"e", parent, "", "reply"})
	}
	return event.Event{Kind: kindMessage, Content: content, Tags: tags}
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

func runMessagesSend(ctx context.Context, a *app, args []string) error {
	o, err := parseSend(a, args)
	if err != nil {
		return err
	}
	return withRelay(ctx, a, &o.common, func(ctx context.Context, rc relayClient, sk []byte) error {
		fields := map[string]any{"channel_id": o.channel}
		root := ""
		if o.replyTo != "" {
			parent, err := lookup(ctx, rc, "messages send", "reply parent", o.replyTo)
			if err != nil {
				return err
			}
			root = threadRoot(parent)
			fields["root"], fields["reply_to"] = root, o.replyTo
		}
		return publishReport(ctx, a, rc, sk, messageEvent(o.channel, o.content, root, o.replyTo), fields)
	})
}

// --- messages list ---

type listArgs struct {
	common
	channel string
	limit   int
	since   timeFlag
	until   timeFlag
}

func parseList(a *app, args []string) (*listArgs, error) {
	const cmd = "messages list"
	fs := newFlagSet(cmd)
	var o listArgs
	o.register(fs, a.getenv)
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	fs.IntVar(&o.limit, "limit", 0, "at most N messages, the newest (default: the relay's limit)")
	fs.Var(&o.since, "since", "oldest created_at, unix seconds or RFC 3339")
	fs.Var(&o.until, "until", "newest created_at, unix seconds or RFC 3339")
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return nil, err
	}
	if o.limit < 0 {
		return nil, usagef("%s: --limit %d is negative", cmd, o.limit)
	}
	return &o, nil
}

// filter is {"kinds":[9,40002],"#h":[channel]} with the bounds given.
func (o *listArgs) filter() event.Filter {
	f := event.Filter{Kinds: []int{kindMessage, kindMessageV2}, Tags: map[string][]string{"h": {o.channel}},
		Since: o.since.v, Until: o.until.v}
	if o.limit > 0 {
		f.Limit = &o.limit
	}
	return f
}

// oldestFirst orders events by created_at, then id.
func oldestFirst(events []event.Event) {
	slices.SortStableFunc(events, func(x, y event.Event) int {
		if x.CreatedAt != y.CreatedAt {
			if x.CreatedAt < y.CreatedAt {
				return -1
			}
			return 1
		}
		return strings.Compare(x.ID, y.ID)
	})
}

// writeEvents prints events one per line.
func writeEvents(a *app, events []event.Event) error {
	var b []byte
	for i := range events {
		b = events[i].AppendJSON(b[:0])
		if _, err := a.stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func runMessagesList(ctx context.Context, a *app, args []string) error {
	o, err := parseList(a, args)
	if err != nil {
		return err
	}
	return withRelay(ctx, a, &o.common, func(ctx context.Context, rc relayClient, _ []byte) error {
		events, err := rc.Query(ctx, o.filter())
		if err != nil {
			return err
		}
		oldestFirst(events)
		return writeEvents(a, events)
	})
}

// --- messages react / edit / delete ---

type targetArgs struct {
	common
	target  string
	emoji   string
	channel string
	content string
}

// parseTarget parses react (--id, --emoji), edit (--id, --channel,
// --content) and delete (--id).
func parseTarget(a *app, cmd string, kind int, args []string) (*targetArgs, error) {
	fs := newFlagSet(cmd)
	var o targetArgs
	o.register(fs, a.getenv)
	fs.StringVar(&o.target, "id", "", "target event id (required)")
	switch kind {
	case kindReaction:
		fs.StringVar(&o.emoji, "emoji", "+", "reaction emoji")
	case kindMessageEdit:
		fs.StringVar(&o.channel, "channel", "", "channel UUID of the message (required)")
		fs.StringVar(&o.content, "content", "", "the new text (required)")
	}
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if o.target, err = hexID(cmd, "id", o.target); err != nil {
		return nil, err
	}
	switch kind {
	case kindReaction:
		if o.emoji == "" {
			return nil, usagef("%s: --emoji is empty", cmd)
		}
	case kindMessageEdit:
		if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
			return nil, err
		}
		if o.content == "" {
			return nil, usagef("%s: --content is required", cmd)
		}
	}
	return &o, nil
}

// reactionEvent is a kind 7: ["e",target], content the emoji.
func reactionEvent(target, emoji string) event.Event {
	return event.Event{Kind: kindReaction, Content: emoji, Tags: event.Tags{{"e", target}}}
}

// editEvent is a kind 40003: ["e",target], ["h",channel], content the new text.
func editEvent(target, channel, content string) event.Event {
	return event.Event{Kind: kindMessageEdit, Content: content, Tags: event.Tags{{"e", target}, {"h", channel}}}
}

// deletionEvent is a kind 5 with exactly one ["e",target].
func deletionEvent(target string) event.Event {
	return event.Event{Kind: kindDeletion, Tags: event.Tags{{"e", target}}}
}

func runMessagesReact(ctx context.Context, a *app, args []string) error {
	o, err := parseTarget(a, "messages react", kindReaction, args)
	if err != nil {
		return err
	}
	return sendOne(ctx, a, &o.common, reactionEvent(o.target, o.emoji), map[string]any{"target": o.target, "emoji": o.emoji})
}

func runMessagesEdit(ctx context.Context, a *app, args []string) error {
	o, err := parseTarget(a, "messages edit", kindMessageEdit, args)
	if err != nil {
		return err
	}
	return sendOne(ctx, a, &o.common, editEvent(o.target, o.channel, o.content), map[string]any{"target": o.target, "channel_id": o.channel})
}

func runMessagesDelete(ctx context.Context, a *app, args []string) error {
	o, err := parseTarget(a, "messages delete", kindDeletion, args)
	if err != nil {
		return err
	}
	return sendOne(ctx, a, &o.common, deletionEvent(o.target), map[string]any{"target": o.target})
}
