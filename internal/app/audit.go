package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/audit"
	"github.com/buzz-relay/buzz/internal/config"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/store"
)

// auditPoolSize is the dedicated audit pool's size (docs/PROTOCOL.md §13.8).
const auditPoolSize = 5

// flushTimeout bounds the chaining of what is pending at shutdown.
const flushTimeout = 10 * time.Second

// Audit is the running audit subsystem: its pool, the chainer and the
// observational writer. Nil when BUZZ_AUDIT_ENABLED is false.
type Audit struct {
	Pool     *pgxpool.Pool
	Chainer  *audit.Chainer
	Observer *audit.Observer
}

// startAudit opens the audit pool and builds the chainer and the observer,
// or logs that audit is off (docs/PROTOCOL.md §13.8).
func startAudit(ctx context.Context, cfg config.Config, db *Database, met *metrics.Metrics, log *slog.Logger) (*Audit, error) {
	if !cfg.AuditEnabled {
		met.Audit.Enabled.Set(0)
		log.Info("Audit logging disabled by BUZZ_AUDIT_ENABLED")
		return nil, nil
	}
	met.Audit.Enabled.Set(1)
	pool, err := pg.Open(ctx, db.URL, pg.PoolConfig{MaxConns: auditPoolSize, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("Audit DB connection failed: %w", err)
	}
	am := met.Audit
	m := &audit.Metrics{SendErrors: am.SendErrors, LogErrors: am.LogErrors, LogSeconds: am.LogSeconds, Appended: am.Appended,
		OutboxPending: am.OutboxPending, OutboxLag: am.OutboxLag, Suppressed: am.Suppressed}
	chainer := audit.NewChainer(audit.ChainerConfig{Pool: pool, Logger: log, Metrics: m,
		CommunityHostFunc: db.communityHost})
	observer := audit.NewObserver(audit.ObserverConfig{Pool: pool, Logger: log, Metrics: m, WakeFunc: chainer.Wake})
	log.Info("Audit service ready")
	return &Audit{Pool: pool, Chainer: chainer, Observer: observer}, nil
}

// communityHost names a community in the chainer's log lines.
func (d *Database) communityHost(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := store.New(d.Pool).CommunityGet(ctx, id)
	if err != nil {
		return ""
	}
	return c.Host
}

// run runs the observer and the chainer until ctx ends (the doors are
// closed by then), then stops both — the observer drains its queue — and
// chains what is pending, so a restart finds nothing this process could
// have chained.
func (x *Audit) run(ctx context.Context, log *slog.Logger) error {
	if err := x.Observer.Start(ctx); err != nil {
		return err
	}
	if err := x.Chainer.Start(ctx); err != nil {
		x.Observer.Stop()
		return err
	}
	<-ctx.Done()
	x.Chainer.Stop()
	x.Observer.Stop()
	fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if ferr := x.Chainer.Flush(fctx); ferr != nil {
		log.Error("Audit log failed: "+ferr.Error(), slog.String("during", "shutdown flush"))
	}
	return nil
}

// close releases the audit pool.
func (x *Audit) close() {
	if x != nil {
		x.Pool.Close()
	}
}
