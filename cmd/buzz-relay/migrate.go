package main

import (
	"context"
	"flag"
	"io"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/pg"
)

// migrateCmd applies pending migrations (exit 0), or with --status prints
// one JSON line per embedded file.
func migrateCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	status := fs.Bool("status", false, "list migrations and whether they are applied")
	if err := fs.Parse(args); err != nil {
		return fail(errUsage)
	}
	cfg, _, err := loadConfig()
	if err != nil {
		return fail(err)
	}
	if *status {
		db, err := app.OpenDatabase(ctx, cfg, quietLogger(), pg.MigrateCheck, true)
		if err != nil {
			return fail(err)
		}
		defer db.Close()
		states, err := pg.MigrationStatus(ctx, db.Pool)
		if err != nil {
			return fail(err)
		}
		for _, s := range states {
			printJSON(map[string]any{"version": s.Version, "name": s.Name, "applied_at": s.AppliedAt})
		}
		return 0
	}
	db, err := app.OpenDatabase(ctx, cfg, quietLogger(), pg.MigrateApply)
	if err != nil {
		return fail(err)
	}
	db.Close()
	return 0
}
