package pubsub

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// warnInterval is the least time between two warnings of one kind, so a
// Redis outage or a stream of junk logs a line per 10 s, not per message.
const warnInterval = 10 * time.Second

// warner logs a warning at most once per warnInterval and says how many it
// held back in between. Safe for concurrent use.
type warner struct {
	log *slog.Logger
	msg string

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Warn logs msg with attrs unless a warning went out less than
// warnInterval ago; then it only counts.
func (w *warner) Warn(attrs ...slog.Attr) {
	w.mu.Lock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < warnInterval {
		w.suppressed++
		w.mu.Unlock()
		return
	}
	held := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	if held > 0 {
		attrs = append(attrs, slog.Int("suppressed", held))
	}
	w.log.LogAttrs(context.Background(), slog.LevelWarn, w.msg, attrs...)
}
