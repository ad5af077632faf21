package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/config"
)

// serve runs the relay until SIGINT/SIGTERM. stop releases the signal
// context so a second signal ends the process at once.
func serve(ctx context.Context, stop context.CancelFunc, args []string) int {
	if len(args) > 0 {
		return fail(errUsage)
	}
	cfg, warnings, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
		return 2
	}
	log := newLogger(cfg)
	log.Info("relay starting", slog.String("version", app.Version))
	for _, w := range warnings {
		log.Warn(w)
	}
	log.Info("config loaded", slog.Any("config", cfg))
	if !cfg.RequireAuthToken {
		log.Warn("BUZZ_REQUIRE_AUTH_TOKEN=false: the X-Pubkey development shortcut is enabled on the HTTP bridge")
	}
	if err := runRelay(ctx, stop, cfg, log); err != nil {
		log.Error("relay stopped", slog.String("err", err.Error()))
		return 1
	}
	return 0
}

func runRelay(ctx context.Context, stop context.CancelFunc, cfg config.Config, log *slog.Logger) error {
	a, err := app.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	app, h, m, err := a.Listen()
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		stop() // a second signal now ends the process at once
	}()
	return a.Run(ctx, app, h, m)
}

func newLogger(cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	format := cfg.LogFormat
	if format == "" || format == "auto" {
		format = "json"
		if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(os.Stdout, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stdout, opts))
}
