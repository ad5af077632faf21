package main

import (
	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/soak"
)

func soakCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "a whole deployment under mixed traffic and faults, then a check of every acknowledged write",
		Long: `soak starts a deployment on loopback (its own PostgreSQL cluster, with a
synchronous standby for the failover fault, --relays buzz-relay processes, a Redis server when there are several, an HTTPS
operator-listener endpoint), drives --conns connections of mixed traffic
over three communities for --duration while the --faults are injected,
then checks the database against a ledger of every acknowledged write
(docs/PERFORMANCE.md, "Soak").

It prints one JSON summary on stdout ("lost": 0 when nothing was lost)
and progress on stderr. Exit status 0 when nothing was lost and every
check passed, 1 when not, 2 when the soak could not run. buzz-relay is
taken from --relay-bin, else next to buzz-bench, else PATH.`,
		Example: `  buzz-bench soak --relays 2 --conns 48 --duration 10m --faults all
  buzz-bench soak --duration 30s --faults kill-relay,pg-fast --relay-bin bin/buzz-relay`,
		Args: cobra.NoArgs,
	}
	done := soak.Flags(cmd.Flags())
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		cfg, err := done()
		if err != nil {
			return err
		}
		return exitWith(soak.Run(c.Context(), cfg, c.OutOrStdout(), c.ErrOrStderr()))
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "storm",
		Short: "the storm fault's own process: many connections, each with a forged AUTH",
		Long: `storm is started by the soak's storm fault as a process of its own: 64
goroutines open --conns connections round robin over the --url relays
and --host communities, each answering its challenge with a forged AUTH,
for at most --time. It prints one JSON result.`,
		Example: `  buzz-bench soak storm --url ws://127.0.0.1:3000 --host localhost:3000 --conns 1000 --time 10s`,
		Hidden:  true,
		// RunStorm parses its own flags (and answers --help).
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			return exitWith(soak.RunStorm(c.Context(), args, c.OutOrStdout(), c.ErrOrStderr()))
		},
	})
	return cmd
}
