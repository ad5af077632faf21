// Command buzz-relay is the Buzz relay server and its operator commands.
//
//	buzz-relay [serve]                     run the relay (default)
//	buzz-relay migrate [--status]          apply pending migrations, or list them
//	buzz-relay community add|add-host|list manage communities (tenants)
//	buzz-relay community export            write one community as JSON lines
//	buzz-relay member add|remove|list      manage relay members
//	buzz-relay audit head|verify           export a checkpoint, verify a chain
//	buzz-relay maintenance search-kinds    show or change what is searchable
//	buzz-relay maintenance read-state      report NIP-RS read-state retention and space
//	buzz-relay maintenance operator-listeners  report or forget operator-listener registrations and queued notifications
//	buzz-relay version                     print the build version
//
// Configuration comes from the environment (docs/OPERATIONS.md). Operator
// commands print one JSON object per line on stdout; errors go to stderr
// as plain text, with exit status 2 when the command cannot run and 1 only
// for a negative answer. Every command answers -h/--help.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the process's exit status.
func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := cli.Execute(ctx, newRoot(stop), args, os.Stdin, os.Stdout, os.Stderr)
	return exitCode(err, os.Stderr)
}

// exitStatus is an error that carries the process's exit status. A
// non-empty msg is printed on stderr; an empty one means the command has
// already said what it had to (a failed verify, a stopped relay).
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

// exitWith returns an *exitStatus that prints msg (when non-empty) and
// exits with code.
func exitWith(code int, msg string) error {
	return &exitStatus{code: code, msg: msg}
}

// exitCode prints err on stderr as plain text and maps it to an exit
// status: an *exitStatus carries its own, anything else (a usage error, a
// bad configuration, an unreachable database) is 2, "the command cannot run".
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var st *exitStatus
	if errors.As(err, &st) {
		if st.msg != "" {
			fmt.Fprintln(stderr, st.msg)
		}
		return st.code
	}
	fmt.Fprintln(stderr, err.Error())
	return 2
}

// rootLong is the root help: where configuration comes from, the three
// listeners, and the output and exit convention of every command.
const rootLong = `buzz-relay runs the Buzz relay (the default command, serve) and the
operator commands that manage its database: migrations, communities,
relay members, the audit chain and search maintenance.

Configuration comes from the environment, never from flags; every variable
and its default is listed in docs/OPERATIONS.md. Without DATABASE_URL the
relay runs a private PostgreSQL cluster under BUZZ_DATA_DIR, and operator
commands use it too. serve opens three listeners, each with its own
setting; a second relay on the same machine must move all three:
  BUZZ_BIND_ADDR     app: WebSocket and HTTP bridge (default 0.0.0.0:3000)
  BUZZ_HEALTH_PORT   health: /_liveness, /_readiness, /_status (default 8080)
  BUZZ_METRICS_PORT  metrics: Prometheus /metrics (default 9102)

Output and exit status: operator commands print one JSON object per line
on stdout (audit verify and search-kinds print text unless --json); errors
go to stderr as plain text. Exit status is 0 on success, 1 only when the
answer is negative (a failed verification, a refused change), 2 when the
command cannot run (bad usage, bad configuration, unknown host, database
unreachable); audit head and audit verify also use 3 for "nothing to
check".`

// newRoot builds the command tree. stopSignals releases the signal context
// of run, so that a second SIGINT/SIGTERM during a graceful shutdown ends
// the process at once.
func newRoot(stopSignals context.CancelFunc) *cobra.Command {
	srv := serveCmd(stopSignals)
	root := cli.Root(&cobra.Command{
		Use:     "buzz-relay",
		Short:   "the Buzz relay server and its operator commands",
		Long:    rootLong,
		Version: app.Version,
		Example: `  buzz-relay                      # run the relay on ws://localhost:3000
  BUZZ_BIND_ADDR=127.0.0.1:4000 BUZZ_HEALTH_PORT=8081 BUZZ_METRICS_PORT=9103 buzz-relay serve
  buzz-relay migrate --status
  buzz-relay community add --host team.example
  buzz-relay help audit verify`,
		Args: unknownCommand,
		RunE: srv.RunE, // no subcommand: serve
	})
	root.SetVersionTemplate("{{.Version}}\n")
	help := helpCmd()
	root.SetHelpCommand(help)
	root.AddCommand(srv, migrateCmd(), communityCmd(), memberCmd(), auditCmd(), maintenanceCmd(), versionCmd(), help)
	cli.Walk(root, func(c *cobra.Command) {
		// A Use that spells out its flags needs no "[flags]" after them.
		c.DisableFlagsInUseLine = strings.Contains(c.Use, "--")
	})
	return root
}

// unknownCommand refuses arguments to the root: they are a misspelled
// command, not arguments of serve.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return cli.Usagef("%s: unknown command %q (one of: %s; see: %s --help)",
		c.CommandPath(), args[0], joinNames(cli.SubcommandNames(c)), c.CommandPath())
}

// versionCmd prints the build version, the same as --version.
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print the build version",
		Long:    "version prints the build version of this binary, as NIP-11 and /_status report it. It is the same as buzz-relay --version.",
		Example: "  buzz-relay version",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), app.Version)
			return nil
		},
	}
}

// helpCmd is `help [command…]`: the help of any command on stdout. Unlike
// cobra's own, an unknown topic is a usage error (exit 2), not a success.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command...]",
		Short: "show the help of any command",
		Long:  "help prints the usage, flags and examples of a command on stdout. It is the same as adding --help to the command.",
		Example: `  buzz-relay help
  buzz-relay help audit verify
  buzz-relay help | less`,
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return cli.Usagef("%s: no such command %q (see: %s --help)", c.CommandPath(),
					joinArgs(args), c.Root().CommandPath())
			}
			target.InitDefaultHelpFlag()
			target.InitDefaultVersionFlag()
			return target.Help()
		},
	}
}
