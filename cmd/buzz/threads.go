package main

import (
	"context"

	"github.com/buzz-relay/buzz/internal/event"
)

type threadArgs struct {
	common
	root    string
	channel string
}

func parseThread(a *app, args []string) (*threadArgs, error) {
	const cmd = "threads get"
	fs := newFlagSet(cmd)
	var o threadArgs
	o.register(fs, a.getenv)
	fs.StringVar(&o.root, "root", "", "event id of the thread's root (required)")
	fs.StringVar(&o.channel, "channel", "", "channel UUID (required)")
	if err := parseOnlyFlags(fs, args); err != nil {
		return nil, err
	}
	var err error
	if o.root, err = hexID(cmd, "root", o.root); err != nil {
		return nil, err
	}
	if o.channel, err = channelID(cmd, "channel", o.channel); err != nil {
		return nil, err
	}
	return &o, nil
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

func runThreadsGet(ctx context.Context, a *app, args []string) error {
	o, err := parseThread(a, args)
	if err != nil {
		return err
	}
	return withRelay(ctx, a, &o.common, func(ctx context.Context, rc relayClient, _ []byte) error {
		events, err := rc.Query(ctx, o.filters()...)
		if err != nil {
			return err
		}
		root, replies, ok := splitThread(o.root, events)
		if !ok {
			return errNotFound("threads get", "thread root "+o.root)
		}
		return writeEvents(a, append([]event.Event{root}, replies...))
	})
}
