package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/event"
)

func newThreadsCmd(a *app) *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:     "threads",
		Short:   "print threads",
		Long:    "A thread is a message (its root) and the NIP-10 replies to it.",
		Example: "  buzz threads get --root <event-id> --channel <channel-uuid>",
	}, newThreadsGetCmd(a))
}

type threadArgs struct {
	root    string
	channel string
}

func (o *threadArgs) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.root, "root", "", "event id of the thread's root (required)")
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
}

func (o *threadArgs) check(_ *pflag.FlagSet, args []string) error {
	const cmd = "threads get"
	if err := noArgs(cmd, args); err != nil {
		return err
	}
	var err error
	if o.root, err = hexID(cmd, "root", o.root); err != nil {
		return err
	}
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return err
	}
	return nil
}

// filters are the replies {"#e":[root],"#h":[channel],"kinds":[9,40002]}
// and the root itself {"ids":[root]}.
func (o *threadArgs) filters() []event.Filter {
	return []event.Filter{
		{Kinds: []int{kindMessage, kindMessageV2}, Tags: map[string][]string{"e": {o.root}, "h": {o.channel}}},
		{IDs: []string{o.root}},
	}
}

// splitThread returns the root and its replies oldest first; ok is false
// when the root is not among events.
func splitThread(rootID string, events []event.Event) (root event.Event, replies []event.Event, ok bool) {
	seen := map[string]bool{}
	for _, ev := range events {
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		if ev.ID == rootID {
			root, ok = ev, true
			continue
		}
		replies = append(replies, ev)
	}
	oldestFirst(replies)
	return root, replies, ok
}

func newThreadsGetCmd(a *app) *cobra.Command {
	o := &threadArgs{}
	return leaf(&cobra.Command{
		Use:   "get --root EVENT_ID --channel UUID",
		Short: "print a thread: the root, then its replies oldest first",
		Long: `Get prints the thread's root event, then its replies oldest first, one per
line. A root the relay does not have (or does not show you) is a refusal:
exit 1.`,
		Example: "  buzz threads get --root <event-id> --channel <channel-uuid>",
	}, o, func(c *cobra.Command) error { return o.run(c.Context(), a) })
}

func (o *threadArgs) run(ctx context.Context, a *app) error {
	return a.withRelay(ctx, func(ctx context.Context, rc relayClient, _ []byte) error {
		events, err := rc.Query(ctx, o.filters()...)
		if err != nil {
			return err
		}
		root, replies, ok := splitThread(o.root, events)
		if !ok {
			return errNotFound("threads get", "thread root "+o.root)
		}
		return a.writeEvents(append([]event.Event{root}, replies...))
	})
}
