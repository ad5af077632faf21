package config

import "log/slog"

// Defaults of the hot window (docs/OPERATIONS.md "Hot window").
const (
	DefaultHotWindowEvents      = 50000
	DefaultHotWindowMiB         = 64
	DefaultHotWindowCommunities = 4
)

// HotWindow sizes the hot window: the newest events of each community the
// relay answers REQ history from when it can prove the answer.
type HotWindow struct {
	// Events bounds one community's window (BUZZ_HOT_WINDOW_EVENTS),
	// 0–10000000; 0 turns the window off. Default 50,000.
	Events int
	// Bytes bounds one community's window in estimated memory
	// (BUZZ_HOT_WINDOW_MIB, 1–65536 MiB). Default 64 MiB.
	Bytes int64
	// Communities bounds the communities with a window at once
	// (BUZZ_HOT_WINDOW_COMMUNITIES), 1–10000. Default 4: with the other
	// defaults at most 256 MiB.
	Communities int
}

func (l *loader) hotWindow() HotWindow {
	return HotWindow{
		Events:      l.integer("BUZZ_HOT_WINDOW_EVENTS", DefaultHotWindowEvents, 0, 10000000),
		Bytes:       int64(l.integer("BUZZ_HOT_WINDOW_MIB", DefaultHotWindowMiB, 1, 65536)) << 20,
		Communities: l.integer("BUZZ_HOT_WINDOW_COMMUNITIES", DefaultHotWindowCommunities, 1, 10000),
	}
}

// LogValue is the hot window's sizes as logged at start.
func (h HotWindow) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("events", h.Events),
		slog.Int64("mib", h.Bytes>>20),
		slog.Int("communities", h.Communities),
	)
}
