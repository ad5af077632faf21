package replica

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/buzz-relay/buzz/internal/service"
)

// heartbeatSQL rewrites the one heartbeat row. now() is the start of this
// transaction, which commits later: a snapshot holding this version holds
// every transaction that committed before beat_at.
const heartbeatSQL = `INSERT INTO replica_heartbeat (token, beat_at, safe_through)
	VALUES (1, now(), now() - make_interval(secs => $1))
	ON CONFLICT (token) DO UPDATE SET beat_at = EXCLUDED.beat_at, safe_through = EXCLUDED.safe_through
	RETURNING beat_at`

// Start runs the probe at once and then every Interval until ctx ends or
// Stop. Safe to call twice.
func (r *Replica) Start(ctx context.Context) error {
	return r.StartLoop(ctx, func(ctx context.Context) {
		r.probe(ctx)
		service.Tick(ctx, r.cfg.Interval, nil, r.probe)
	})
}

// probe is one turn of the loop: runOnce, logged here.
func (r *Replica) probe(ctx context.Context) {
	beat, err := r.runOnce(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("replica probe failed; replica reads are doubted until a probe succeeds",
				slog.String("err", err.Error()))
		}
		r.TestSignals.Failed.Signal(err)
		return
	}
	r.TestSignals.Probed.Signal(beat)
}

// runOnce writes the heartbeat row on the writer and records it, then
// checks the replica (reachability and lag). Only the heartbeat write can
// fail it: the replica check is what reads will find out anyway.
func (r *Replica) runOnce(ctx context.Context) (time.Time, error) {
	wctx, cancel := context.WithTimeout(ctx, ProbeInterval)
	defer cancel()
	var beat time.Time
	if err := r.cfg.Writer.QueryRow(wctx, heartbeatSQL, (Floor + Margin).Seconds()).Scan(&beat); err != nil {
		err = fmt.Errorf("write replica heartbeat: %w", err)
		r.mu.Lock()
		r.probeFailed = err
		r.mu.Unlock()
		return time.Time{}, err
	}
	r.mu.Lock()
	r.probeFailed = nil
	r.probedAt = r.cfg.NowFunc()
	if beat.After(r.latestBeat) {
		r.latestBeat = beat
	}
	r.mu.Unlock()
	r.checkReplica(ctx)
	return beat, nil
}

// checkReplica asks the replica for its replay position: an error marks
// it unreachable until the next check answers (reads then go to the
// writer without waiting for a connection), and the position against the
// writer's gives buzz_db_replica_lag_bytes. A server that reports no
// replay position (not a standby, or a managed one that hides it) has no
// lag to report; the heartbeat row is the proof either way. A standby
// promoted since (a failover, docs/OPERATIONS.md "High availability") is no
// longer in recovery: pg_last_wal_replay_lsn() still answers the last
// position it replayed, which would read as a lag growing with every write,
// so only a server in recovery reports one.
func (r *Replica) checkReplica(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, StatementTimeout)
	defer cancel()
	var replayed *string
	err := r.cfg.Pool.QueryRow(ctx, "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END").Scan(&replayed)
	r.setReachable(err)
	if err != nil {
		return
	}
	if replayed == nil {
		r.cfg.Metrics.Replica.LagBytes.Set(0)
		return
	}
	var written string
	var lag int64
	err = r.cfg.Writer.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text, pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint",
		*replayed).Scan(&written, &lag)
	if err != nil {
		r.log.Debug("replica lag not measured", slog.String("err", err.Error()))
		return
	}
	r.cfg.Metrics.Replica.LagBytes.Set(float64(max(lag, 0)))
	r.log.Debug("replica lag", slog.String("writer_lsn", written), slog.String("replica_lsn", *replayed), slog.Int64("bytes", lag))
}

// setReachable records the replica check's outcome, logging each change.
func (r *Replica) setReachable(err error) {
	r.mu.Lock()
	was := r.unreachable
	r.unreachable = err
	r.mu.Unlock()
	switch {
	case err != nil && was == nil:
		r.log.Warn("read replica unreachable; reads go to the writer", slog.String("err", err.Error()))
	case err == nil && was != nil:
		r.log.Info("read replica reachable again")
	}
}
