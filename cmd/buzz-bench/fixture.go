package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/benchdata"
)

func fixtureCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fixture",
		Short: "load the 1M-event REQ dataset (P3) into a relay's database",
		Long: `fixture generates the deterministic REQ dataset (docs/PERFORMANCE.md,
"P3 on 1M events"): --communities communities c0.bench.local …, each with
one open channel and --authors authors, and --events really signed kind 9
messages over the 30 days before --end, with h, p and e tags. It loads
them through the store's batch insert, the statement of ingest's group
commit, then runs VACUUM ANALYZE.

It prints one JSON report on stdout, progress on stderr, and writes the
values "buzz-bench req --req-targets" draws from to --targets. It only
loads into a database on a unix socket or a loopback host that is
migrated and does not hold the fixture's communities yet.`,
		Example: `  buzz-bench fixture --database-url "postgres://buzz@/buzz?host=/tmp/pg/run" \
    --alias localhost:3390 --targets /tmp/targets.json
  DATABASE_URL=postgres://buzz@localhost/buzz buzz-bench fixture --events 100000`,
		Args: cobra.NoArgs,
	}
	done := benchdata.Flags(cmd.Flags(), os.Getenv)
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := done()
		if err != nil {
			return err
		}
		return exitWith(benchdata.Run(c.Context(), cfg, c.OutOrStdout(), c.ErrOrStderr()))
	}
	return cmd
}
