package main

import (
	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/pg"
)

// migrateCmd applies pending migrations and reports what it applied, or
// with --status prints one JSON line per migration file.
func migrateCmd() *cobra.Command {
	var status bool
	c := &cobra.Command{
		Use:   "migrate [--status]",
		Short: "apply pending migrations, or list them",
		Long: `migrate applies the migration files embedded in this binary that the
database has not recorded yet, in order, each in its own transaction under
an advisory lock, and prints one JSON line saying what it did:
  {"applied":["0003_audit.sql","0004_partition_statistics.sql"],"status":"applied"}
  {"applied":[],"status":"up to date"}

With --status it changes nothing and prints one line per embedded file:
  {"version":1,"name":"0001_core.sql","applied_at":"<RFC 3339>"|null}

It connects like the server: DATABASE_URL, or the private cluster under
BUZZ_DATA_DIR (which serve always migrates by itself). An applied file
that was edited since is an error (exit 2).`,
		Example: `  buzz-relay migrate
  buzz-relay migrate --status
  DATABASE_URL=postgres://buzz@db/buzz buzz-relay migrate`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if status {
				return migrateStatus(c)
			}
			return migrateApply(c)
		},
	}
	c.Flags().BoolVar(&status, "status", false, "list every migration and when it was applied; change nothing")
	return c
}

// migrateApply applies pending files and prints the report line.
func migrateApply(c *cobra.Command) error {
	_, db, err := openDatabase(c, pg.MigrateApply, false)
	if err != nil {
		return err
	}
	db.Close()
	applied := db.Applied
	status := "applied"
	if len(applied) == 0 {
		applied, status = []string{}, "up to date"
	}
	printJSON(c.OutOrStdout(), map[string]any{"applied": applied, "status": status})
	return nil
}

// migrateStatus prints one JSON line per embedded file, applied or not.
func migrateStatus(c *cobra.Command) error {
	_, db, err := openDatabase(c, pg.MigrateCheck, true)
	if err != nil {
		return err
	}
	defer db.Close()
	states, err := pg.MigrationStatus(c.Context(), db.Pool)
	if err != nil {
		return err
	}
	for _, s := range states {
		printJSON(c.OutOrStdout(), map[string]any{"version": s.Version, "name": s.Name, "applied_at": s.AppliedAt})
	}
	return nil
}
