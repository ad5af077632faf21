package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/client"
	"github.com/buzz-relay/buzz/internal/event"
)

// filterArgs are the arguments of query and count: filters as JSON
// arguments or on stdin, completed by --kinds, --limit and --channel.
type filterArgs struct {
	a       *app
	cmd     string // "query" or "count"
	flags   filterFlags
	filters []event.Filter // set by check
}

func (o *filterArgs) bind(fs *pflag.FlagSet) { o.flags.bind(fs) }

// check reads and validates the filters before anything is sent: every
// key must be known (bridge fields only with --http). With no filter
// argument and a filter flag given, the one filter comes from the flags
// alone and stdin is not read.
func (o *filterArgs) check(fs *pflag.FlagSet, args []string) error {
	if err := o.flags.check(o.cmd, fs); err != nil {
		return err
	}
	filters := []event.Filter{{}}
	if len(args) > 0 || !o.flags.given(fs) {
		var err error
		if filters, err = readFilters(o.cmd, args, o.a.stdin); err != nil {
			return err
		}
		if err := checkFilterKeys(o.cmd, filters, o.a.global.http); err != nil {
			return err
		}
	}
	o.flags.fill(fs, filters)
	o.filters = filters
	return nil
}

// refusal adds the p-gate hint to a refusal that names the p-gate.
func (o *filterArgs) refusal(err error, sk []byte) error {
	var refused *client.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "p-gated") {
		return err
	}
	hint := pgateHint(o.filters, event.PubKey(sk))
	if hint == "" {
		return err
	}
	return &detailError{err: err, fields: map[string]any{"hint": hint}}
}

// filterHelp explains the filters of query and count; flags names the
// filter flags the command has.
func filterHelp(flags string) string {
	return `Filters are JSON objects, or arrays of them, given as arguments or on
stdin (no argument, or "-"). Keys: ids, authors, kinds, since, until,
limit, search and "#<tag>"; with --http also the bridge's extension
fields (before_id, depth_limit, thread_window, …). Any other key is
refused before anything is sent.

` + flags + ` fill their field ("#h" for --channel) in every
filter that lacks it; given without a filter argument, they make the one
filter and stdin is not read.

The relay refuses a filter without "kinds" that could match p-gated kinds
(1059, …); the error then carries a "hint" saying what to add.`
}

func newQueryCmd(a *app) *cobra.Command {
	o := &filterArgs{a: a, cmd: "query", flags: filterFlags{withLimit: true}}
	return leaf(&cobra.Command{
		Use:   "query [FILTER_JSON…] [-]",
		Short: "print the events matching filters, one per line",
		Long: "Query sends the filters as one REQ (or POST /query with --http) and prints\n" +
			"each stored event that matches, one JSON object per line.\n\n" + filterHelp("--kinds, --limit and --channel"),
		Example: `  buzz query '{"kinds":[9],"#h":["<channel-uuid>"],"limit":20}'
  buzz query --kinds 9,45001 --channel <channel-uuid> --limit 20
  buzz query --http '{"kinds":[9],"until":1700000000,"before_id":"<event-id>"}'
  echo '[{"kinds":[0]},{"kinds":[1],"limit":5}]' | buzz query --get id`,
	}, o, func(c *cobra.Command) error { return o.runQuery(c.Context()) })
}

func (o *filterArgs) runQuery(ctx context.Context) error {
	return o.a.withRelay(ctx, func(ctx context.Context, rc relayClient, sk []byte) error {
		events, err := rc.Query(ctx, o.filters...)
		if err != nil {
			return o.refusal(err, sk)
		}
		return o.a.writeEvents(events)
	})
}

func newCountCmd(a *app) *cobra.Command {
	o := &filterArgs{a: a, cmd: "count"}
	return leaf(&cobra.Command{
		Use:   "count [FILTER_JSON…] [-]",
		Short: "print the number of events matching filters",
		Long: "Count sends the filters as one NIP-45 COUNT (or POST /count with --http)\n" +
			"and prints {\"count\":n}, the sum over the filters.\n\n" + filterHelp("--kinds and --channel"),
		Example: `  buzz count '{"kinds":[9],"#h":["<channel-uuid>"]}'
  buzz count --kinds 9 --channel <channel-uuid> --get count`,
	}, o, func(c *cobra.Command) error { return o.runCount(c.Context()) })
}

func (o *filterArgs) runCount(ctx context.Context) error {
	return o.a.withRelay(ctx, func(ctx context.Context, rc relayClient, sk []byte) error {
		n, err := rc.Count(ctx, o.filters...)
		if err != nil {
			return o.refusal(err, sk)
		}
		return o.a.write(map[string]int64{"count": n})
	})
}
