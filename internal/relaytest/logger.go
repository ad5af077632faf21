package relaytest

import (
	"io"
	"log/slog"
	"testing"

	"github.com/buzz-relay/buzz/internal/app"
)

// StartWithLogger is Start with the relay's logs written to w, as JSON, at
// the level of BUZZ_LOG_LEVEL (default warn), so a test can inspect what
// the relay logs. w must be safe for concurrent writes. It stops when the
// test ends; call Stop first to be sure every line has been written.
func StartWithLogger(t testing.TB, env map[string]string, w io.Writer, hooks ...app.Hooks) *Relay {
	t.Helper()
	return start(t, env, func(level slog.Level) slog.Handler {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	}, hooks...)
}
