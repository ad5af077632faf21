package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/cli"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/pg"
)

// loadConfig reads the environment. A bad value comes back as the error
// config.Load words it ("invalid VAR: …"), and the command exits 2.
func loadConfig() (config.Config, []string, error) {
	return config.Load(os.Getenv, os.Environ())
}

// openDatabase loads the configuration and opens the database like openDB.
func openDatabase(c *cobra.Command, mode pg.MigrateMode, skipMigrations bool) (config.Config, *app.Database, error) {
	cfg, _, err := loadConfig()
	if err != nil {
		return cfg, nil, err
	}
	db, err := openDB(c, cfg, mode, skipMigrations)
	return cfg, db, err
}

// openDB connects to the database an operator command works on, like the
// server would: DATABASE_URL, or the private cluster under BUZZ_DATA_DIR
// (started for the command when no server runs on it). skipMigrations
// opens an external database as it is (see app.OpenDatabase). The caller
// closes it.
func openDB(c *cobra.Command, cfg config.Config, mode pg.MigrateMode, skipMigrations bool) (*app.Database, error) {
	return app.OpenDatabase(c.Context(), cfg, quietLogger(c.ErrOrStderr()), mode, skipMigrations)
}

// printJSON writes v as one JSON object on one line.
func printJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(w, string(b))
}

// quietLogger is the logger of operator commands: warnings and errors
// only, on stderr, so that stdout holds nothing but the command's answer.
func quietLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// noArgs refuses positional arguments: every operator command takes flags only.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cli.Usagef("%s: unexpected argument %q (see: %s --help)", c.CommandPath(), args[0], c.CommandPath())
	}
	return nil
}

// requireFlag returns a usage error naming the flag when it was not given
// at all. An empty value (--host "") is left to the command's own check.
func requireFlag(c *cobra.Command, name, value string) error {
	if c.Flags().Changed(name) {
		return nil
	}
	return cli.Usagef("%s: missing --%s %s (see: %s --help)", c.CommandPath(), name, value, c.CommandPath())
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

func joinArgs(args []string) string { return strings.Join(args, " ") }

// isTerminal reports whether w is a terminal: the progress bar and the
// audit head summary appear only there, and auto log format picks text.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
