package window

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// decide counts one page's routing in buzz_db_route_decision.
func (b *batch) decide(path, route, reason string) { b.e.decide(path, route, reason) }

// finish counts and logs a batch's end and turns a failure into the
// *Error the caller answers with; nothing of a failed batch is returned.
func (b *batch) finish(parent, batchCtx context.Context, windows, served int, items []Item, sizes []int, err error, start time.Time) ([]Item, error) {
	m := b.e.cfg.Metrics.Window
	attrs := []any{slog.Int("windows", windows), slog.Int("served", served), slog.String("route", b.route()),
		slog.Duration("took", time.Since(start))}
	if err == nil {
		m.Requests.WithLabelValues("thread", "ok").Inc()
		for _, n := range sizes {
			m.ThreadResponseBytes.Observe(float64(n))
		}
		b.log.Info("thread window batch", append(attrs, slog.String("outcome", "ok"))...)
		return items, nil
	}
	f := classify(err, batchCtx, parent)
	outcome := "unavailable"
	switch f.Status {
	case http.StatusBadRequest:
		outcome = "bad_request"
	case http.StatusInternalServerError:
		outcome = "internal"
	}
	m.Requests.WithLabelValues("thread", outcome).Inc()
	if f.budget != "" {
		m.BudgetExhausted.WithLabelValues(f.budget).Inc()
	}
	if f.authChanged {
		m.AuthorizationChanged.Inc()
	}
	detail := ""
	if f.cause != nil {
		detail = f.cause.Error()
	}
	switch outcome {
	case "unavailable":
		b.log.Warn("thread window batch unavailable", slog.String("reason", f.Text), slog.String("budget", f.budget),
			slog.String("detail", detail))
	case "internal":
		b.log.Error("thread window batch failed", slog.String("err", detail))
	}
	b.log.Info("thread window batch", append(attrs, slog.String("outcome", outcome))...)
	return nil, &Error{Status: f.Status, Text: f.Text}
}

// route names where the batch's pages were read: "writer", "replica",
// both joined by "+", or "none".
func (b *batch) route() string {
	if len(b.routes) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(b.routes)), "+")
}
