package main

import (
	"context"
	"fmt"
	"net/url"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// operatorListenersOptions are the flags of maintenance operator-listeners.
type operatorListenersOptions struct {
	report, yes bool
	forget      string
}

func operatorListenersCmd() *cobra.Command {
	var o operatorListenersOptions
	c := &cobra.Command{
		Use:   "operator-listeners --report | --forget HEX [--yes]",
		Short: "report operator-listener registrations and queued notifications, or forget a listener",
		Long: `operator-listeners --report prints, read-only, one JSON object per line
for every listener pubkey found in BUZZ_OPERATOR_LISTENERS (of this
command's environment) or in the registration and outbox tables, by
pubkey (docs/PROTOCOL.md §15.10):
  {"listener":"<hex>","configured":BOOL,"url_host":"<host>"|null,
   "registrations":N,"oldest_registration_age_s":N|null,
   "outbox_pending":N,"outbox_sending":N,"oldest_outbox_age_s":N|null,
   "outbox_past_eligibility":N}
configured tells whether this environment routes the listener; url_host
is the host[:port] of its delivery URL (null when not configured). Give
the command the relay's environment: a listener configured on the relay
but not here is reported as not configured. Ages are whole seconds.
outbox_past_eligibility counts outbox rows created more than 15 minutes
ago: they are never delivered and the outbox reaper deletes them within
5 minutes. Rows of an unconfigured listener are never delivered either;
its registrations keep queueing rows until they expire (30 days).

operator-listeners --forget HEX prints what deleting every registration
and every queued notification of listener HEX removes:
  {"listener":"<hex>","registrations_deleted":N,"outbox_deleted":N,"dry_run":BOOL}
Without --yes nothing is deleted (dry_run true); with --yes the rows are
deleted in one transaction. Use it to retire a listener after removing
it from BUZZ_OPERATOR_LISTENERS on every process: a listener still
configured can register again (a warning says so on stderr).

Exit status: 0 done, 2 cannot run (bad usage, invalid HEX, bad
configuration, database unreachable, migrations pending).`,
		Example: `  buzz-relay maintenance operator-listeners --report
  buzz-relay maintenance operator-listeners --report | jq 'select(.configured | not)'
  buzz-relay maintenance operator-listeners --forget 3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d
  buzz-relay maintenance operator-listeners --forget 3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d --yes`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return operatorListeners(c, o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.report, "report", false, "print one line per listener (read-only)")
	f.StringVar(&o.forget, "forget", "", "the listener pubkey (64 `HEX`) whose registrations and queued notifications to delete")
	f.BoolVar(&o.yes, "yes", false, "with --forget: delete (without it nothing is deleted)")
	return c
}

// operatorListeners runs --report or --forget. Every failure exits 2,
// prefixed with the command's name.
func operatorListeners(c *cobra.Command, o operatorListenersOptions) error {
	name := cli.Name(c)
	forget := c.Flags().Changed("forget")
	if o.report == forget {
		return cli.Usagef("%s: give either --report or --forget HEX [--yes] (see: %s --help)", name, c.CommandPath())
	}
	if o.yes && !forget {
		return cli.Usagef("%s: --yes goes with --forget HEX (see: %s --help)", name, c.CommandPath())
	}
	var listener string
	if forget {
		var err error
		if listener, err = parsePubkey(o.forget); err != nil {
			return cli.Usagef("%s: --forget: %v (see: %s --help)", name, err, c.CommandPath())
		}
	}
	cfg, db, err := openDatabase(c, pg.MigrateCheck, false)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer db.Close()
	if o.report {
		err = listenerReport(c, db, cfg.OperatorListeners)
	} else {
		err = listenerForget(c, db, cfg.OperatorListeners, listener, o.yes)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// listenerReportLine is one line of --report, keys in the order of
// docs/PROTOCOL.md §15.10.
type listenerReportLine struct {
	Listener              string  `json:"listener"`
	Configured            bool    `json:"configured"`
	URLHost               *string `json:"url_host"`
	Registrations         int64   `json:"registrations"`
	OldestRegistrationAge *int64  `json:"oldest_registration_age_s"`
	OutboxPending         int64   `json:"outbox_pending"`
	OutboxSending         int64   `json:"outbox_sending"`
	OldestOutboxAge       *int64  `json:"oldest_outbox_age_s"`
	OutboxPastEligibility int64   `json:"outbox_past_eligibility"`
}

// listenerReport prints one line per listener of the configuration or of
// the tables, by pubkey, from one READ ONLY transaction.
func listenerReport(c *cobra.Command, db *app.Database, configured []config.OperatorListener) error {
	ctx := c.Context()
	tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("listener report: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := store.New(tx).ListenerReport(ctx)
	if err != nil {
		return err
	}
	lines := make(map[string]*listenerReportLine, len(rows)+len(configured))
	for _, r := range rows {
		lines[r.Listener] = &listenerReportLine{
			Listener: r.Listener, Registrations: r.Registrations, OldestRegistrationAge: r.OldestRegistrationAgeSeconds,
			OutboxPending: r.OutboxPending, OutboxSending: r.OutboxSending, OldestOutboxAge: r.OldestOutboxAgeSeconds,
			OutboxPastEligibility: r.OutboxPastEligibility,
		}
	}
	for _, l := range configured {
		line, ok := lines[l.Pubkey]
		if !ok {
			line = &listenerReportLine{Listener: l.Pubkey}
			lines[l.Pubkey] = line
		}
		line.Configured = true
		line.URLHost = urlHost(l.URL)
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		printJSON(c.OutOrStdout(), lines[k])
	}
	return nil
}

// urlHost is the host[:port] of a configured (already normalized) delivery
// URL.
func urlHost(raw string) *string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	return &u.Host
}

// listenerForgetLine is the line of --forget, keys in the order of
// docs/PROTOCOL.md §15.10.
type listenerForgetLine struct {
	Listener             string `json:"listener"`
	RegistrationsDeleted int64  `json:"registrations_deleted"`
	OutboxDeleted        int64  `json:"outbox_deleted"`
	DryRun               bool   `json:"dry_run"`
}

// listenerForget deletes listener's registrations and outbox rows in one
// transaction, committed only with yes, and prints the counts. A listener
// still configured in this environment gets a warning on stderr.
func listenerForget(c *cobra.Command, db *app.Database, configured []config.OperatorListener, listener string, yes bool) error {
	ctx := c.Context()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("forget listener: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	regs, queued, err := store.New(tx).ListenerForget(ctx, listener)
	if err != nil {
		return err
	}
	if yes {
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("forget listener: commit: %w", err)
		}
	}
	printJSON(c.OutOrStdout(), listenerForgetLine{Listener: listener, RegistrationsDeleted: regs, OutboxDeleted: queued, DryRun: !yes})
	for _, l := range configured {
		if l.Pubkey == listener {
			fmt.Fprintf(c.ErrOrStderr(), "%s: warning: listener %s is still in BUZZ_OPERATOR_LISTENERS: it can register again; "+
				"remove it on every process\n", cli.Name(c), listener)
		}
	}
	return nil
}
