package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/buzz-relay/buzz/internal/app"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/event"
)

// serveCmd runs the relay until SIGINT/SIGTERM. stopSignals releases the
// signal context once the first signal arrived, so that a second one ends
// the process at once.
func serveCmd(stopSignals context.CancelFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "run the relay (the default command)",
		Long: `serve runs the relay until SIGINT or SIGTERM, then drains: readiness turns
503, open sockets are closed with 1012 "relay restarting", pending audit
entries are chained. A second signal ends the process at once.

It listens on BUZZ_BIND_ADDR (app), BUZZ_HEALTH_PORT (health) and
BUZZ_METRICS_PORT (metrics); every setting comes from the environment
(docs/OPERATIONS.md). Logs go to stdout, JSON or text (BUZZ_LOG_FORMAT).
A bad setting stops it before any listener opens, with exit status 2; a
relay that stops on an error exits 1.`,
		Example: `  buzz-relay serve
  DATABASE_URL=postgres://buzz@db/buzz BUZZ_AUTO_MIGRATE=true buzz-relay serve
  BUZZ_BIND_ADDR=127.0.0.1:4000 BUZZ_HEALTH_PORT=8081 BUZZ_METRICS_PORT=9103 buzz-relay serve`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return serve(c.Context(), stopSignals, c.OutOrStdout())
		},
	}
}

// serve loads the configuration, logs it, and runs the relay. A bad
// configuration is returned as it is (exit 2); a relay that stopped on an
// error has logged why and exits 1.
func serve(ctx context.Context, stopSignals context.CancelFunc, stdout io.Writer) error {
	cfg, warnings, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg, stdout)
	log.Info("relay starting", slog.String("version", app.Version), slog.String("signature_verifier", event.SignatureVerifier))
	for _, w := range warnings {
		log.Warn(w)
	}
	log.Info("config loaded", slog.Any("config", cfg))
	tuneGC(log)
	tuneProcs(log, cfg.DatabaseURL == "")
	if !cfg.RequireAuthToken {
		log.Warn("BUZZ_REQUIRE_AUTH_TOKEN=false: the X-Pubkey development shortcut is enabled on the HTTP bridge")
	}
	if err := runRelay(ctx, stopSignals, cfg, log); err != nil {
		log.Error("relay stopped", slog.String("err", err.Error()))
		return exitWith(1, "")
	}
	return nil
}

func runRelay(ctx context.Context, stopSignals context.CancelFunc, cfg config.Config, log *slog.Logger) error {
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
		stopSignals() // a second signal now ends the process at once
	}()
	return a.Run(ctx, app, h, m)
}

// newLogger is the relay's logger on w: JSON, or text when BUZZ_LOG_FORMAT
// says so or (auto) when stdout is a terminal. Durations are written as Go
// duration strings ("1.267s") in both formats, not as nanoseconds.
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: readableDuration}
	format := cfg.LogFormat
	if format == "" || format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// readableDuration is a slog ReplaceAttr: a time.Duration value becomes
// its String form, so `"took":1267450547` reads `"took":"1.267450547s"`.
// It applies inside groups too (a LogValuer's durations included).
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
