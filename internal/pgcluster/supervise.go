package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
)

// The bounds of Supervise: how often the postmaster is looked at, how many
// restarts in a row it tries, and the backoff before each of them (0.5 s,
// doubling, at most 10 s).
const (
	watchInterval    = time.Second
	restartAttempts  = 5
	restartBaseDelay = 500 * time.Millisecond
	restartMaxDelay  = 10 * time.Second
)

// ErrRestartsExhausted is returned (wrapped) by Supervise when the
// postmaster died and every restart attempt in a row failed.
var ErrRestartsExhausted = errors.New("private cluster restart attempts exhausted")

// errStopped is what restart reports once Stop was called: the cluster is
// going away on purpose and must not be brought back.
var errStopped = errors.New("private cluster stopped")

// Supervise watches the postmaster every second until ctx ends, and brings
// it back when it is gone (killed, out of memory, stopped by someone else):
// up to 5 restarts in a row, 0.5 s before the first, doubling up to 10 s,
// each logged with its attempt number, delay and error. A restart runs the
// start logic of Start (stale postmaster.pid removed, pg_ctl start), or
// adopts a postmaster another process started meanwhile; it never runs
// initdb. The postmaster is watched whether Start started it or reused it;
// once restarted here, Stop stops it.
//
// It returns nil when ctx ends or Stop was called (no restart happens
// after Stop), and an error wrapping ErrRestartsExhausted when every
// attempt failed: the postmaster stays down. It keeps no connection: the
// caller's pool reconnects by itself once the server is back. Call it once
// per Cluster.
func (c *Cluster) Supervise(ctx context.Context) error {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pid, _, _, alive := c.runningPostmaster()
		if alive {
			continue
		}
		if c.isStopped() {
			return nil
		}
		c.log.Error("postmaster gone, restarting it", slog.Int("pid", pid), slog.String("data_dir", c.dataDir))
		if err := c.restartWithBackoff(ctx); err != nil {
			if errors.Is(err, errStopped) || ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// restartWithBackoff runs restart up to restartAttempts times, waiting
// the backoff before each, and logs every attempt and the outcome.
func (c *Cluster) restartWithBackoff(ctx context.Context) error {
	delay := restartBaseDelay
	var err error
	for attempt := 1; attempt <= restartAttempts; attempt++ {
		c.log.Warn("restarting postmaster", slog.Int("attempt", attempt), slog.Int("max_attempts", restartAttempts),
			slog.Duration("delay", delay))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		began := time.Now()
		if err = c.restart(ctx); err == nil {
			c.log.Info("postmaster restarted", slog.Int("attempt", attempt), slog.Duration("took", time.Since(began)))
			return nil
		}
		if errors.Is(err, errStopped) || ctx.Err() != nil {
			return err
		}
		c.log.Warn("postmaster restart failed", slog.Int("attempt", attempt), slog.Int("max_attempts", restartAttempts),
			slog.Duration("delay", delay), slog.String("err", err.Error()))
		delay = min(2*delay, restartMaxDelay)
	}
	c.log.Error("postmaster restart attempts exhausted; the database stays down until the relay is restarted",
		slog.Int("attempts", restartAttempts), slog.String("log", c.logFile()), slog.String("err", err.Error()))
	return fmt.Errorf("%w after %d attempts: %w", ErrRestartsExhausted, restartAttempts, err)
}

// restart starts the postmaster again after it died, under the same lock
// as Start, unless Stop was called. A postmaster that is running again by
// then (another process's Start) is adopted instead.
func (c *Cluster) restart(ctx context.Context) error {
	unlock, err := lockFile(filepath.Join(filepath.Dir(filepath.Dir(c.dataDir)), ".pgcluster.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errStopped
	}
	sock, port, reused, err := c.reuse(ctx)
	if err != nil {
		return err
	}
	if reused {
		if sock != c.sockDir || port != c.port {
			// The relay's pool keeps dialling c's socket.
			return fmt.Errorf("postmaster started by another process listens on %s port %d, not %s port %d",
				sock, port, c.sockDir, c.port)
		}
		return nil
	}
	if out, err := c.startOnce(ctx); err != nil {
		return c.startError(err, out)
	}
	c.started = true
	return nil
}

// isStopped reports whether Stop was called.
func (c *Cluster) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}
