package main

import (
	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/windowbench"
)

func windowsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "windows",
		Short: "newest-first thread windows on a 100k-reply thread (P7), on its own cluster and relay",
		Long: `windows is the thread-window benchmark (docs/PERFORMANCE.md, "Conversation
windows"). It starts a private PostgreSQL cluster (in a temporary
directory unless --data-dir names one) and a relay in this process, loads
the fixture through the store's batch insert, then measures the warm case
(NIP-98 POST /query pages at deep cursors, with EXPLAIN of the engine's
statements), the stale-statistics case (a burst of replies through the
relay's WebSocket EVENT path, no ANALYZE) and the plan shape.

It prints one JSON report on stdout and a table and progress lines on
stderr. Exit status 0 when every pass rule holds, 1 when one fails, 2 on
an error. --small runs smoke sizes in about a minute.`,
		Example: `  buzz-bench windows --small
  buzz-bench windows --timeout 90m > windows.json`,
		Args: cobra.NoArgs,
	}
	done := windowbench.Flags(cmd.Flags())
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := done()
		if err != nil {
			return err
		}
		return exitWith(windowbench.Run(c.Context(), cfg, c.OutOrStdout(), c.ErrOrStderr()))
	}
	return cmd
}
