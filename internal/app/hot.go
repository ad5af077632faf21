package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/hot"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pubsub"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/store"
)

// The app's side of the hot window (docs/ARCHITECTURE.md "Hot window"):
// the window itself, its warm read, and what keeps it right when another
// program writes to a community's events: the hot-window channel of
// PostgreSQL's LISTEN/NOTIFY.

// HotWindowHold is how long one notification on store.HotWindowChannel
// keeps a window cold. A writer notifies at least once a second while it
// writes, and once after its last commit (store.NotifyHotWindow).
const HotWindowHold = 5 * time.Second

// newHotWindow is the process's hot window, nil when
// BUZZ_HOT_WINDOW_EVENTS is 0. Its warm read runs on the writer under one
// of the process's read shares, which share takes (read.Engine.Background),
// so a flood of REQs that warm windows cannot take the connections kept
// for ingest. With a
// bus (REDIS_URL), each warm window follows its community's window topic,
// which carries the other processes' commits, and a read from it waits
// for the delivery barrier first (docs/ARCHITECTURE.md "Hot window").
func newHotWindow(cfg config.Config, st *store.Store, m *metrics.Metrics, log *slog.Logger, bus *pubsub.Bus,
	share func(context.Context) (func(), error)) *hot.Window {
	h := cfg.HotWindow
	var (
		follow   func(context.Context, string) bool
		unfollow func(string)
		barrier  func(context.Context) error
	)
	if bus != nil {
		follow = func(ctx context.Context, community string) bool {
			t := pubsub.WindowTopic(community)
			select {
			case <-bus.Retain(t):
			case <-ctx.Done():
			}
			if !bus.Subscribed(t) {
				bus.Release(t)
				return false
			}
			return true
		}
		unfollow = func(community string) { bus.Release(pubsub.WindowTopic(community)) }
		barrier = bus.Barrier
	}
	return hot.New(hot.Config{Events: h.Events, Bytes: h.Bytes, Communities: h.Communities,
		WarmTimeout: cfg.Reads.StatementTimeout, Metrics: m, Logger: log,
		Follow: follow, Unfollow: unfollow, Barrier: barrier,
		Older: func(ctx context.Context, community string, before int64, maxRows int) (hot.Older, bool, error) {
			release, err := share(ctx)
			if err != nil {
				return hot.Older{}, false, fmt.Errorf("read share: %w", err)
			}
			defer release()
			e, p, authors, complete, err := st.HotWindowOlder(ctx, community, before, maxRows)
			return hot.Older{E: e, P: p, Authors: authors}, complete, err
		},
		// Read inside a search, under the search's own read share: taking
		// a second one could wait on the searches that hold them all.
		NextExpiry: st.HotWindowNextExpiry,
		Warm: func(ctx context.Context, community string, n int) ([]*hot.Entry, error) {
			release, err := share(ctx)
			if err != nil {
				return nil, fmt.Errorf("read share: %w", err)
			}
			defer release()
			rows, err := st.HotWindowRows(ctx, community, n)
			if err != nil {
				return nil, err
			}
			out := make([]*hot.Entry, len(rows))
			for i := range rows {
				r := &rows[i]
				out[i] = &hot.Entry{Event: r.Event, Channel: r.Channel, JSON: r.JSON, Expires: r.Expires}
			}
			return out, nil
		}})
}

// hotListener holds a connection of its own LISTENing on
// store.HotWindowChannel
// and reconnects after a second when it breaks; while it is down the
// window is off.
type hotListener struct {
	service.Base
	pool *pgxpool.Pool
	w    *hot.Window
	log  *slog.Logger
}

func (l *hotListener) Start(ctx context.Context) error { return l.StartLoop(ctx, l.loop) }

func (l *hotListener) loop(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.session(ctx, func() { l.w.SetEnabled(true, "") })
		l.w.SetEnabled(false, "listen_down")
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("hot window listener down; the window is off until it is back", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// session is one LISTEN connection until it fails.
func (l *hotListener) session(ctx context.Context, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+store.HotWindowChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == store.HotWindowAll {
			l.w.ResetAll("external")
			continue
		}
		l.w.Hold(n.Payload, time.Now().Add(HotWindowHold))
	}
}
