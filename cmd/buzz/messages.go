package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
)

func newMessagesCmd(a *app) *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "messages",
		Short: "send, list, react to, edit, delete and search messages",
		Long:  "Messages are the kind 9 (and 40002) events of a channel.",
		Example: `  buzz messages send --channel <channel-uuid> --content hello
  buzz messages list --channel <channel-uuid> --limit 20
  buzz messages search --query checkout --channel <channel-uuid>`,
	},
		newSendCmd(a), newListCmd(a),
		newTargetCmd(a, "react", kindReaction), newTargetCmd(a, "edit", kindMessageEdit), newTargetCmd(a, "delete", kindDeletion),
		newSearchCmd(a),
	)
}

// --- messages send ---

type sendArgs struct {
	channel string
	content string
	replyTo string
}

func (o *sendArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	fs.StringVar(&o.content, "content", "", "message text (required)")
	fs.StringVar(&o.replyTo, "reply-to", "", "event id of the message replied to")
}

func (o *sendArgs) check(_ *pflag.FlagSet, args []string) error {
	const cmd = "messages send"
	if err := noArgs(cmd, args); err != nil {
		return err
	}
	var err error
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return err
	}
	if o.content == "" {
		return cli.Usagef("%s: --content is required", cmd)
	}
	if o.replyTo != "" {
		if o.replyTo, err = hexID(cmd, "reply-to", o.replyTo); err != nil {
			return err
		}
	}
	return nil
}

// threadRoot returns the root of the thread parent belongs to: its last
// valid NIP-10 "root" marker, else parent itself (docs/PROTOCOL.md §6.1).
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

func newSendCmd(a *app) *cobra.Command {
	o := &sendArgs{}
	return leaf(&cobra.Command{
		Use:   "send --channel UUID --content TEXT [--reply-to EVENT_ID]",
		Short: "post a message or a thread reply (kind 9)",
		Long: `Send publishes a kind 9 in the channel. With --reply-to it looks the parent
up to find the thread root and adds the NIP-10 root and reply e tags.
` + publishedHelp(`"channel_id" (and "root", "reply_to" for a reply)`),
		Example: `  buzz messages send --channel <channel-uuid> --content hello
  buzz messages send --channel <channel-uuid> --content "me too" --reply-to <event-id>`,
	}, o, func(c *cobra.Command) error { return o.run(c.Context(), a) })
}

func (o *sendArgs) run(ctx context.Context, a *app) error {
	return a.withRelay(ctx, func(ctx context.Context, rc relayClient, sk []byte) error {
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
		return a.publishReport(ctx, rc, sk, messageEvent(o.channel, o.content, root, o.replyTo), fields)
	})
}

// --- messages list ---

type listArgs struct {
	channel string
	limit   int
	since   timeFlag
	until   timeFlag
	raw     bool
}

func (o *listArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	fs.IntVar(&o.limit, "limit", 0, "at most N messages, the newest (default: the relay's limit)")
	fs.Var(&o.since, "since", "oldest created_at, unix seconds or RFC 3339")
	fs.Var(&o.until, "until", "newest created_at, unix seconds or RFC 3339")
	fs.BoolVar(&o.raw, "raw", false, "print the events exactly as stored, without applying edits")
}

func (o *listArgs) check(_ *pflag.FlagSet, args []string) error {
	const cmd = "messages list"
	if err := noArgs(cmd, args); err != nil {
		return err
	}
	var err error
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return err
	}
	if o.limit < 0 {
		return cli.Usagef("%s: --limit %d is negative", cmd, o.limit)
	}
	return nil
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

func newListCmd(a *app) *cobra.Command {
	o := &listArgs{}
	return leaf(&cobra.Command{
		Use:   "list --channel UUID [--limit N] [--since T] [--until T] [--raw]",
		Short: "print a channel's messages (kinds 9, 40002), edits applied",
		Long: `List prints the channel's messages, one per line, oldest first (--limit
keeps the newest N; T is unix seconds or RFC 3339).

A message that its author edited (kind 40003) shows its current text: the
newest edit by the message's author wins (ties: the lowest edit id), its
"content" is that edit's text, and an added field says so:
  "edited":{"id":"<edit id>","created_at":N,"original":"<stored text>"}
Such a line is a view, NOT a signed event: its id and sig are those of
the stored message, whose text is in "edited.original". --raw prints the
events exactly as stored.`,
		Example: `  buzz messages list --channel <channel-uuid> --limit 20
  buzz messages list --channel <channel-uuid> --since 2025-01-02T00:00:00Z --get content
  buzz messages list --channel <channel-uuid> --raw`,
	}, o, func(c *cobra.Command) error { return o.run(c.Context(), a) })
}

func (o *listArgs) run(ctx context.Context, a *app) error {
	return a.withRelay(ctx, func(ctx context.Context, rc relayClient, _ []byte) error {
		events, err := rc.Query(ctx, o.filter())
		if err != nil {
			return err
		}
		oldestFirst(events)
		if o.raw || len(events) == 0 {
			return a.writeEvents(events)
		}
		edits, err := rc.Query(ctx, editsFilter(o.channel, events))
		if err != nil {
			return err
		}
		newest := newestEdits(events, edits)
		for _, ev := range events {
			if err := a.write(showEdited(ev, newest[ev.ID])); err != nil {
				return err
			}
		}
		return nil
	})
}

// --- messages react / edit / delete ---

type targetArgs struct {
	cmd     string
	kind    int
	target  string
	emoji   string
	channel string
	content string
}

// bind registers --id, plus --emoji for react and --channel, --content
// for edit.
func (o *targetArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.target, "id", "", "target event id (required)")
	switch o.kind {
	case kindReaction:
		fs.StringVar(&o.emoji, "emoji", "+", "reaction emoji")
	case kindMessageEdit:
		fs.StringVar(&o.channel, "channel", "", "channel UUID of the message (required)")
		fs.StringVar(&o.content, "content", "", "the new text (required)")
	}
}

func (o *targetArgs) check(_ *pflag.FlagSet, args []string) error {
	if err := noArgs(o.cmd, args); err != nil {
		return err
	}
	var err error
	if o.target, err = hexID(o.cmd, "id", o.target); err != nil {
		return err
	}
	switch o.kind {
	case kindReaction:
		if o.emoji == "" {
			return cli.Usagef("%s: --emoji is empty", o.cmd)
		}
	case kindMessageEdit:
		if o.channel, err = channelID(o.cmd, "channel", o.channel); err != nil {
			return err
		}
		if o.content == "" {
			return cli.Usagef("%s: --content is required", o.cmd)
		}
	}
	return nil
}

// event is the react, edit or delete event for the target.
func (o *targetArgs) event() event.Event {
	switch o.kind {
	case kindReaction:
		return reactionEvent(o.target, o.emoji)
	case kindMessageEdit:
		return editEvent(o.target, o.channel, o.content)
	}
	return deletionEvent(o.target)
}

// fields are the command's output fields beyond the event's.
func (o *targetArgs) fields() map[string]any {
	f := map[string]any{"target": o.target}
	switch o.kind {
	case kindReaction:
		f["emoji"] = o.emoji
	case kindMessageEdit:
		f["channel_id"] = o.channel
	}
	return f
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

// targetCommands describe react, edit and delete.
var targetCommands = map[int]struct{ use, short, long, fields, example string }{
	kindReaction: {"react --id EVENT_ID [--emoji E]", "react to an event (kind 7)",
		`React publishes a kind 7 on the event; the emoji defaults to "+".`, `"target" and "emoji"`,
		"  buzz messages react --id <event-id>\n  buzz messages react --id <event-id> --emoji 🎉"},
	kindMessageEdit: {"edit --id EVENT_ID --channel UUID --content TEXT", "edit one of your messages (kind 40003)",
		"Edit publishes a kind 40003 with the new text; the relay keeps the original,\nand messages list shows the newest edit.",
		`"target" and "channel_id"`,
		`  buzz messages edit --id <event-id> --channel <channel-uuid> --content "fixed typo"`},
	kindDeletion: {"delete --id EVENT_ID", "delete one of your events (kind 5)",
		"Delete publishes a kind 5 for one of your events.", `"target"`,
		"  buzz messages delete --id <event-id>"},
}

func newTargetCmd(a *app, name string, kind int) *cobra.Command {
	o := &targetArgs{cmd: "messages " + name, kind: kind}
	d := targetCommands[kind]
	return leaf(&cobra.Command{
		Use:     d.use,
		Short:   d.short,
		Long:    d.long + "\n" + publishedHelp(d.fields),
		Example: d.example,
	}, o, func(c *cobra.Command) error { return a.sendOne(c.Context(), o.event(), o.fields()) })
}
