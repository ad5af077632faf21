package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/maintenance"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/tenant"
)

// readStateOptions are the flags of maintenance read-state.
type readStateOptions struct {
	report, text bool
	community    string
	timeout      time.Duration
}

func readStateCmd() *cobra.Command {
	var o readStateOptions
	c := &cobra.Command{
		Use:   "read-state --report [--community HOST] [--text]",
		Short: "report NIP-RS read-state retention and the space it freed",
		Long: `read-state --report prints what read-state retention (NIP-RS, kind 30078)
holds and what the purge of superseded versions freed (docs/PROTOCOL.md §14.7). It is
read-only: one read-only transaction that takes only ordinary read locks,
each statement bounded by a 60 s statement_timeout, so it can run beside
relay traffic.

It prints one JSON object per line: first one per community, primary host
ascending (only the community of --community HOST, a primary host or an
alias, when given):
  {"community":"<host>","coordinates":N,"live_rows":N,"watermarks":N,
   "retained_deleted":N,"purged_rows":N,"purged_bytes":N,
   "est_reclaimable_bytes":N}
then one per partition of events:
  {"storage":"<partition>","heap_bytes":N,"toast_bytes":N,
   "est_free_bytes":N,"method":"pgstattuple_approx|statistics"}
--text prints the same as two aligned tables.

coordinates counts conforming coordinates with a watermark or a live row;
retained_deleted counts NIP-09-deleted rows kept because no newer version
exists. est_reclaimable_bytes is the part of purged_bytes whose partition
has not been rewritten since the purge: the space stays inside the table
files until VACUUM FULL (or an online repack) rewrites that partition.
Pages are shared by all communities, so it is an attribution, not a
measurement. est_free_bytes estimates the free space inside a partition's
heap: with pgstattuple_approx when the pgstattuple extension is installed
and may be called, otherwise from statistics (heap size - reltuples x
(average row width + 28), floored at 0; as stale as the last ANALYZE).

Exit status: 0 done, 2 cannot run (bad usage, unknown --community host,
database unreachable, migrations pending).`,
		Example: `  buzz-relay maintenance read-state --report
  buzz-relay maintenance read-state --report --community team.example
  buzz-relay maintenance read-state --report --text
  buzz-relay maintenance read-state --report | jq 'select(.community) | .est_reclaimable_bytes'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return readState(c, o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.report, "report", false, "print the report (required)")
	f.StringVar(&o.community, "community", "", "only the community of this host or alias")
	f.BoolVar(&o.text, "text", false, "print aligned tables instead of JSON lines")
	f.DurationVar(&o.timeout, "statement-timeout", maintenance.ReadStateStatementTimeout, "bound on each statement of the report")
	return c
}

// readState runs --report. Every failure exits 2, prefixed with the
// command's name.
func readState(c *cobra.Command, o readStateOptions) error {
	name := cli.Name(c)
	if !o.report {
		return cli.Usagef("%s: missing --report (see: %s --help)", name, c.CommandPath())
	}
	var host string
	if c.Flags().Changed("community") {
		if host = tenant.Normalize(o.community); host == "" {
			return cli.Usagef("%s: --community: %v (see: %s --help)", name, errInvalidHost, c.CommandPath())
		}
	}
	if o.timeout < time.Millisecond {
		return cli.Usagef("%s: --statement-timeout: must be at least 1ms (see: %s --help)", name, c.CommandPath())
	}
	_, db, err := openDatabase(c, pg.MigrateCheck, false)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer db.Close()
	rep, err := maintenance.ReadStateReport(c.Context(), db.Pool, maintenance.ReadStateReportParams{Host: host}, o.timeout)
	if errors.Is(err, pg.ErrNotFound) {
		return fmt.Errorf("%s: %w", name, noCommunity(host))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if o.text {
		printReadStateText(c.OutOrStdout(), rep)
		return nil
	}
	for _, com := range rep.Communities {
		printJSON(c.OutOrStdout(), com)
	}
	for _, st := range rep.Storage {
		printJSON(c.OutOrStdout(), st)
	}
	return nil
}

// printReadStateText prints the report as two tables with the JSON keys as
// headers and the same values.
func printReadStateText(w io.Writer, rep *maintenance.ReadStateReportResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "community\tcoordinates\tlive_rows\twatermarks\tretained_deleted\tpurged_rows\tpurged_bytes\test_reclaimable_bytes")
	for _, c := range rep.Communities {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Community, c.Coordinates, c.LiveRows, c.Watermarks,
			c.RetainedDeleted, c.PurgedRows, c.PurgedBytes, c.EstReclaimableBytes)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "storage\theap_bytes\ttoast_bytes\test_free_bytes\tmethod")
	for _, s := range rep.Storage {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", s.Storage, s.HeapBytes, s.TOASTBytes, s.EstFreeBytes, s.Method)
	}
	_ = tw.Flush()
}
