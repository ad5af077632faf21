// Package cli holds the command-line conventions the two binaries share,
// on top of cobra:
//
//   - every command answers -h/--help with its usage, flags and an example
//     on stdout, exit 0, and so does the help command;
//   - flags go anywhere on the line, before or after the subcommand;
//   - a mistake on the command line is a *UsageError (the binaries exit 2);
//   - a group (a command with subcommands) refuses a missing or unknown
//     subcommand instead of printing its help and succeeding.
//
// It does NOT print errors: each binary prints them in its own format
// (buzz as {"error":…} JSON lines, buzz-relay as plain text).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// UsageError is a mistake in the command line or the environment.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is or wraps a *UsageError.
func IsUsage(err error) bool {
	var ue *UsageError
	return errors.As(err, &ue)
}

// Option changes how Root's commands report usage errors.
type Option func(*cobra.Command)

// shortNames is the annotation ShortNames sets on the root.
const shortNames = "cli.short-names"

// ShortNames makes usage errors name a command without the binary's name
// ("query: …" rather than "buzz query: …"), for a binary whose own errors
// are written that way. The help hint keeps the full path.
func ShortNames() Option {
	return func(root *cobra.Command) {
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[shortNames] = "true"
	}
}

// Name is how usage errors name c: its command path, without the binary's
// name under ShortNames (the root itself keeps its name).
func Name(c *cobra.Command) string {
	if c.Root().Annotations[shortNames] != "true" || !c.HasParent() {
		return c.CommandPath()
	}
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

// Root prepares the top command of a binary: cobra prints neither errors
// nor usage on failure, flag errors become *UsageError naming the command
// and pointing at its help, and there is no completion command.
func Root(root *cobra.Command, opts ...Option) *cobra.Command {
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return Usagef("%s: %v (see: %s --help)", Name(c), err, c.CommandPath())
	})
	for _, o := range opts {
		o(root)
	}
	return root
}

// Group adds subs to group and makes group refuse to run without one of
// them: no subcommand, or an unknown one, is a *UsageError listing the
// subcommands. Help (group --help, help group) lists them too.
func Group(group *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	group.AddCommand(subs...)
	group.Args = cobra.ArbitraryArgs
	group.RunE = func(c *cobra.Command, args []string) error {
		names := SubcommandNames(c)
		if len(args) == 0 {
			return Usagef("%s: missing subcommand (one of: %s; see: %s --help)",
				Name(c), strings.Join(names, ", "), c.CommandPath())
		}
		return Usagef("%s: unknown subcommand %q (one of: %s)", Name(c), args[0], strings.Join(names, ", "))
	}
	return group
}

// SubcommandNames returns the names of c's available subcommands, sorted.
func SubcommandNames(c *cobra.Command) []string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Walk calls fn on cmd and every command under it, parents first.
func Walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, s := range cmd.Commands() {
		Walk(s, fn)
	}
}

// Execute runs root on args with the given streams. Help requests return
// nil after printing the help on stdout.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}
