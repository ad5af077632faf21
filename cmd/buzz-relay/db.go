package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/buzz-relay/buzz/internal/config"
)

// loadConfig reads the environment; a bad value is reported as the spec
// wants and the caller exits 2.
func loadConfig() (config.Config, []string, error) {
	return config.Load(os.Getenv, os.Environ())
}

// printJSON writes one JSON object per line on stdout.
func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(os.Stdout, string(b))
}

// fail prints an operator command's error on stderr and returns exit status 2.
func fail(err error) int {
	fmt.Fprintln(os.Stderr, err.Error())
	return 2
}

// quietLogger is the logger of operator commands: warnings and errors only, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

var errUsage = errors.New("usage: see buzz-relay help")
