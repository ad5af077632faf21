package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/buzz-relay/buzz/internal/cli"
)

// DefaultRelay is the relay used when neither --relay nor BUZZ_RELAY_URL is set.
const DefaultRelay = "ws://localhost:3000"

// defaultTimeout bounds a whole request unless --timeout says otherwise.
const defaultTimeout = 30 * time.Second

// app is what a command sees of the process: the environment, the streams
// and the global flags. One app serves one command line.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	global globalFlags
	// name is the running command's path without "buzz " (e.g. "messages
	// send"), set once its flags are parsed; errors start with it.
	name string
}

// globalFlags are the persistent flags of the root, accepted anywhere on
// the line.
type globalFlags struct {
	relay   string
	http    bool
	timeout time.Duration
	get     string
}

// bind registers the global flags on fs. The --relay default comes from
// BUZZ_RELAY_URL.
func (g *globalFlags) bind(fs *pflag.FlagSet, getenv func(string) string) {
	def := getenv("BUZZ_RELAY_URL")
	if def == "" {
		def = DefaultRelay
	}
	fs.StringVar(&g.relay, "relay", def, "relay URL, ws(s):// or http(s):// (BUZZ_RELAY_URL when set)")
	fs.BoolVar(&g.http, "http", false, "use the HTTP bridge (POST /events, /query, /count with NIP-98) instead of the WebSocket")
	fs.DurationVar(&g.timeout, "timeout", defaultTimeout, "bound on the whole request")
	fs.StringVar(&g.get, "get", "", "print only this top-level field of each output object (strings unquoted)")
}

const rootLong = `buzz is the agent-first client of a Buzz relay: JSON in, JSON out.

Output: each result is one JSON object per line on stdout; with --get FIELD
only that field's value (strings unquoted, anything else as compact JSON).
An error is one {"error":"…"} line on stderr, sometimes with more fields
("hint" says what to change, "candidates" lists the profiles a name may mean).

Exit status, the same for every command:
  0  ok
  1  refused by the relay: OK false, CLOSED, an HTTP 4xx (401 and 403
     included), a lookup that found nothing, an --author name that does
     not resolve
  2  usage or connection error: bad flags or arguments, a missing key, an
     unreachable relay, an HTTP 5xx

Environment:
  BUZZ_PRIVATE_KEY  64-hex secret key, needed by every command but keygen
                    (make one with: eval "$(buzz keygen --export)")
  BUZZ_RELAY_URL    the relay when --relay is not given (default ` + DefaultRelay + `)

The global flags --relay, --http, --timeout and --get go anywhere on the
line, before or after the command.`

const rootExample = `  eval "$(buzz keygen --export)"
  ch=$(buzz channels create --name general --get channel_id)
  buzz messages send --channel "$ch" --content hello
  buzz messages list --channel "$ch"
  buzz query --kinds 9 --channel "$ch" --limit 20
  buzz --http count --kinds 9`

// newRoot builds the whole command tree for a. Each call returns a fresh
// tree: cobra commands keep their parsed flags.
func newRoot(a *app) *cobra.Command {
	root := cli.Root(&cobra.Command{
		Use:     "buzz",
		Short:   "the agent-first client of a Buzz relay: JSON in, JSON out",
		Long:    rootLong,
		Example: rootExample,
		Args:    unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := c.Help(); err != nil {
				return err
			}
			return cli.Usagef("buzz: missing command (one of: %s; see: buzz --help)", strings.Join(cli.SubcommandNames(c), ", "))
		},
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			a.name = cli.Name(c)
			if a.global.timeout <= 0 {
				return cli.Usagef("%s: --timeout %s must be positive (e.g. 30s)", a.name, a.global.timeout)
			}
			return nil
		},
	}, cli.ShortNames())
	root.SuggestionsMinimumDistance = 2
	a.global.bind(root.PersistentFlags(), a.getenv)
	root.AddCommand(
		newKeygenCmd(a), newWhoamiCmd(a),
		newPublishCmd(a), newQueryCmd(a), newCountCmd(a),
		newChannelsCmd(a), newMessagesCmd(a), newThreadsCmd(a),
	)
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultHelpCmd() // adds it now, so cli.Walk sees it too
	return root
}

// unknownCommand refuses a first argument that names no command.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("buzz: unknown command %q (one of: %s; see: buzz --help)", args[0], strings.Join(cli.SubcommandNames(c), ", "))
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg = fmt.Sprintf("buzz: unknown command %q (did you mean %s? see: buzz --help)", args[0], strings.Join(s, " or "))
	}
	return cli.Usagef("%s", msg)
}

// newHelpCmd is "buzz help [command…]": the command's help on stdout, the
// same text as --help. An unknown command is a usage error.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command…]",
		Short: "print the help of buzz or of a command",
		Long:  "Help prints the help of buzz, or of the command named, on stdout: the same text as --help.",
		Example: `  buzz help
  buzz help messages send`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return cli.Usagef("help: unknown command %q (see: buzz help)", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}

// options are a leaf command's own flags: bind registers them, check
// validates and normalises them (and the positional arguments) before
// anything is sent. Unit tests drive the same two methods.
type options interface {
	bind(fs *pflag.FlagSet)
	check(fs *pflag.FlagSet, args []string) error
}

// leaf finishes c: its flags bind to o, and running it checks o, then
// calls run.
func leaf(c *cobra.Command, o options, run func(c *cobra.Command) error) *cobra.Command {
	o.bind(c.Flags())
	c.Args = cobra.ArbitraryArgs // check decides, with a message that says what to do
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := o.check(c.Flags(), args); err != nil {
			return err
		}
		return run(c)
	}
	return c
}

// noArgs refuses positional arguments of a command that takes only flags.
func noArgs(cmd string, args []string) error {
	if len(args) > 0 {
		return cli.Usagef("%s: unexpected argument %q (it takes only flags; see: buzz %s --help)", cmd, args[0], cmd)
	}
	return nil
}
