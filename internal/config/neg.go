package config

import (
	"log/slog"
	"time"
)

// Defaults of the NIP-77 negentropy sessions (docs/OPERATIONS.md
// "Negentropy sync").
const (
	DefaultNegMaxRecords      = 500_000
	DefaultNegMaxSessions     = 4
	DefaultNegIdleTimeout     = 60 * time.Second
	DefaultNegMaxMessageBytes = 128 << 10
)

// NegLimits bound the NIP-77 negentropy sessions of one connection
// (docs/PROTOCOL.md §7.13).
type NegLimits struct {
	// MaxRecords is the most events one session may reconcile
	// (BUZZ_NEG_MAX_RECORDS, 1–10000000): a NEG-OPEN whose filter matches
	// more is refused before they are held. Default 500,000. A session
	// holds 40 bytes per record.
	MaxRecords int
	// MaxSessions is how many sessions one connection may hold open
	// (BUZZ_NEG_MAX_SESSIONS, 1–64). Default 4.
	MaxSessions int
	// IdleTimeout closes a session without a NEG-MSG for that long
	// (BUZZ_NEG_IDLE_TIMEOUT_MS, 1000–3600000 ms). Default 60 s.
	IdleTimeout time.Duration
	// MaxMessageBytes bounds a negentropy message, decoded, in both
	// directions: the client's are refused over it, the relay's answers
	// keep to it (BUZZ_NEG_MAX_MESSAGE_BYTES, 4096 to a third of
	// BUZZ_MAX_FRAME_BYTES). Default 128 KiB, at most a third of
	// BUZZ_MAX_FRAME_BYTES.
	MaxMessageBytes int
}

// negLimits loads NegLimits; maxFrame is BUZZ_MAX_FRAME_BYTES, already
// loaded: a message travels as hex, twice its size, inside a frame.
func (l *loader) negLimits(maxFrame int) NegLimits {
	var n NegLimits
	n.MaxRecords = l.integer("BUZZ_NEG_MAX_RECORDS", DefaultNegMaxRecords, 1, 10_000_000)
	n.MaxSessions = l.integer("BUZZ_NEG_MAX_SESSIONS", DefaultNegMaxSessions, 1, 64)
	n.IdleTimeout = l.millis("BUZZ_NEG_IDLE_TIMEOUT_MS", DefaultNegIdleTimeout, 1000, 3600000)
	hi := max(4096, maxFrame/3)
	n.MaxMessageBytes = l.integer("BUZZ_NEG_MAX_MESSAGE_BYTES", min(DefaultNegMaxMessageBytes, hi), 4096, hi)
	return n
}

// LogValue is the negentropy limits as logged at start.
func (n NegLimits) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("max_records", n.MaxRecords),
		slog.Int("max_sessions", n.MaxSessions),
		slog.Int64("idle_timeout_ms", n.IdleTimeout.Milliseconds()),
		slog.Int("max_message_bytes", n.MaxMessageBytes),
	)
}
