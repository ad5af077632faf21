// Command buzz-testdb starts and stops the throwaway PostgreSQL cluster that
// `make test` shares across all test packages.
//
//	buzz-testdb start DIR   start (or reuse) a cluster under DIR, print its
//	                        TEST_DATABASE_URL on stdout and exit, leaving it running
//	buzz-testdb stop DIR    stop the cluster under DIR (no-op when none runs)
//
// The cluster is the same private cluster buzz-relay runs (package
// pgcluster: as the unprivileged buzz-pg user when run as root, unix socket
// only), tuned for tests: fsync, synchronous_commit and full_page_writes are
// off, so its data does not survive a machine crash. It does NOT run tests,
// apply migrations (dbtest does, into a template database) or delete DIR.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/buzz-relay/buzz/internal/pgcluster"
)

const usage = "usage: buzz-testdb start DIR | buzz-testdb stop DIR"

// testSettings trade durability for speed; the data is disposable.
var testSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "500",
	"shared_buffers":     "256MB",
	// PostgreSQL's default WAL reserve (five files) rather than the
	// private cluster's 512MB: Start makes it at a new cluster's first
	// start, and test data is small.
	"min_wal_size": "80MB",
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "buzz-testdb:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) != 2 || args[1] == "" {
		return fmt.Errorf("%s", usage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cfg := pgcluster.Config{
		DataDir:  args[1],
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Settings: testSettings,
	}
	switch args[0] {
	case "start":
		c, err := pgcluster.Start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		// Deliberately no c.Stop: the cluster outlives this command.
		fmt.Println(c.URL())
		return nil
	case "stop":
		if err := pgcluster.StopDataDir(ctx, cfg); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("unknown subcommand %q; %s", args[0], usage)
	}
}
