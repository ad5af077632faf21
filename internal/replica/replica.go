package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/pg"
	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// The fixed constants of the proof (docs/PROTOCOL.md §16.6: none is
// configurable).
const (
	// Floor is buzz.created_at_floor on the writer pool: more than ingest's
	// ±900 s drift, so no event that passed the drift check is refused
	// unless its commit took a minute.
	Floor = 960 * time.Second
	// Margin covers the truncation of created_at to seconds and commit
	// processing: safe_through = beat_at − (Floor + Margin).
	Margin = 5 * time.Second
	// ProbeInterval is how often the probe rewrites the heartbeat row.
	ProbeInterval = 5 * time.Second
	// Freshness bounds both the age of this process's last successful
	// probe and how far the replica's beat_at may be behind the newest one
	// this process wrote.
	Freshness = 30 * time.Second
	// StatementTimeout bounds every statement on the replica, and the wait
	// for a replica connection.
	StatementTimeout = 2 * time.Second
)

// Route is where a read went (Read's answer).
type Route int

const (
	// RouteWriter means the read is not the replica's to serve — its bound lies
	// above what this process has proved (a head page). Run it on the
	// writer; this is not a doubt.
	RouteWriter Route = iota
	// RouteReplica means the read ran in a proved replica snapshot and succeeded.
	RouteReplica
	// RouteDoubt means the replica was doubted (an error, a slow statement, a
	// failed condition). Run the read on the writer, and keep the rest of
	// the request there.
	RouteDoubt
)

// Config configures a Replica.
type Config struct {
	// Writer is the relay's writer pool, armed with Floor. Required.
	Writer *pgxpool.Pool
	// Pool is the replica pool (OpenPool). Required.
	Pool *pgxpool.Pool
	// Metrics receives the replica metrics. Default metrics.Disabled().
	Metrics *metrics.Metrics
	// Logger; nil discards.
	Logger *slog.Logger
	// Interval between probes. Default ProbeInterval.
	Interval time.Duration
	// NowFunc is the local clock that ages the last successful probe.
	// Default time.Now.
	NowFunc func() time.Time
}

// TestSignals are emitted by the probe loop. Tests only.
type TestSignals struct {
	// Probed carries the beat_at of each successful probe.
	Probed testsignal.Signal[time.Time]
	// Failed carries the error of each failed probe, after it was logged.
	Failed testsignal.Signal[error]
}

// Init initialises every signal.
func (ts *TestSignals) Init() {
	ts.Probed.Init()
	ts.Failed.Init()
}

// Replica is the read replica as one relay process knows it: the probe's
// state and the per-request proof. It is a service (Start, Stop); Read is
// safe for concurrent use.
type Replica struct {
	service.Base
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// probedAt is the local time of the last successful probe.
	probedAt time.Time
	// latestBeat is the newest beat_at this process wrote.
	latestBeat time.Time
	// probeFailed is the error of the last probe when it failed.
	probeFailed error
	// unreachable is the error of the probe's last replica check, nil
	// when the replica answered.
	unreachable error
	// warnedAt limits the doubt warnings to one per Freshness.
	warnedAt time.Time

	TestSignals TestSignals
}

// States of State, as /_status reports them.
const (
	// StateReachable: the last probe succeeded and reached the replica.
	StateReachable = "reachable"
	// StateUnreachable: the last probe failed, or it could not reach the
	// replica; replica reads are doubted until one succeeds.
	StateUnreachable = "unreachable"
	// StateStarting: no probe has finished yet.
	StateStarting = "starting"
)

// State is what the probe last saw: StateReachable, StateUnreachable or
// StateStarting. It says nothing of any one read's proof, which Read
// decides on its own snapshot.
func (r *Replica) State() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.probeFailed != nil || r.unreachable != nil:
		return StateUnreachable
	case r.probedAt.IsZero():
		return StateStarting
	}
	return StateReachable
}

// OpenPool opens the replica pool for url: size connections, dialled on
// first use (a replica that is down at start fails reads, not the start),
// every statement and the connection wait bounded by StatementTimeout.
// The error never contains the URL.
func OpenPool(ctx context.Context, url string, size int, log *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: int32(size), AcquireTimeout: StatementTimeout,
		StatementTimeout: StatementTimeout, Lazy: true, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open read replica pool: %w", err)
	}
	return pool, nil
}

// New returns a Replica; call Start to run its probe. It reports the read
// pool's statistics in buzz_db_read_pool_* from now on. The caller closes
// both pools after Stop.
func New(cfg Config) *Replica {
	if cfg.Interval <= 0 {
		cfg.Interval = ProbeInterval
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool := cfg.Pool
	cfg.Metrics.Replica.SetPoolStatsFunc(func() (size, idle, active, max int32) {
		st := pool.Stat()
		return st.TotalConns(), st.IdleConns(), st.AcquiredConns(), st.MaxConns()
	})
	return &Replica{cfg: cfg, log: log.With("component", "replica")}
}

// Pool returns the replica pool.
func (r *Replica) Pool() *pgxpool.Pool { return r.cfg.Pool }

// Session is one proved replica transaction: REPEATABLE READ READ ONLY,
// its snapshot fixed by the heartbeat row it read first. It lives for one
// call of Read's fn and is used by one goroutine.
type Session struct {
	conn *pgxpool.Conn
	// BeatAt and SafeThrough are the heartbeat row of the snapshot: it
	// holds every channel row with created_at ≤ SafeThrough.
	BeatAt, SafeThrough time.Time
}

// Querier is the transaction, for store and search statements that must
// see the proved snapshot.
func (s *Session) Querier() pg.Querier { return s.conn }

// Read serves a read bounded by until (unix seconds) from the replica when
// the proof allows: it opens a Session, checks docs/PROTOCOL.md §16.6's conditions against
// its heartbeat row and runs fn in it. RouteReplica means fn ran there and
// succeeded (buzz_db_replica_reads_total + 1). RouteWriter means until lies
// above the newest safe_through this process wrote (a head page), or no
// probe has succeeded yet; nothing was run. RouteDoubt means the replica
// was doubted — fn may have run and its results must be dropped —
// and buzz_db_read_session_degraded grew: the caller re-runs on the writer.
// The error is non-nil only when ctx ended.
func (r *Replica) Read(ctx context.Context, until int64, fn func(*Session) error) (Route, error) {
	route, _, err := r.ReadWhy(ctx, until, fn)
	return route, err
}

// Reason says why ReadWhy routed a read as it did, in the terms of
// buzz_db_route_decision (docs/PROTOCOL.md §11.2).
type Reason string

// Reasons of ReadWhy.
const (
	// ReasonProved: the replica served the read (RouteReplica).
	ReasonProved Reason = "proved"
	// ReasonBound: until lies above the safe_through this process wrote,
	// or above the one of the replica's snapshot.
	ReasonBound Reason = "bound"
	// ReasonLag: no probe has succeeded yet, the last one is too old, or
	// the replica's heartbeat is more than Freshness behind.
	ReasonLag Reason = "lag"
	// ReasonReplicaError: the probe failed or the replica failed the read.
	ReasonReplicaError Reason = "replica_error"
)

// ReadWhy is Read that also says why it routed as it did. RouteWriter
// comes with ReasonBound or ReasonLag, RouteDoubt with any reason but
// ReasonProved.
func (r *Replica) ReadWhy(ctx context.Context, until int64, fn func(*Session) error) (Route, Reason, error) {
	bound := time.Unix(until, 0)
	r.mu.Lock()
	probedAt, latest, probeFailed, unreachable := r.probedAt, r.latestBeat, r.probeFailed, r.unreachable
	r.mu.Unlock()
	if latest.IsZero() {
		return RouteWriter, ReasonLag, nil
	}
	if bound.After(safeThrough(latest)) {
		return RouteWriter, ReasonBound, nil
	}
	if age := r.cfg.NowFunc().Sub(probedAt); age >= Freshness {
		return r.doubt(ctx, ReasonLag, fmt.Errorf("last successful probe %s ago", age.Round(time.Second)))
	}
	if probeFailed != nil {
		return r.doubt(ctx, ReasonReplicaError, fmt.Errorf("the last probe failed: %w", probeFailed))
	}
	if unreachable != nil {
		return r.doubt(ctx, ReasonReplicaError, fmt.Errorf("replica unreachable at the last probe: %w", unreachable))
	}
	s, err := r.begin(ctx)
	if err != nil {
		return r.doubt(ctx, ReasonReplicaError, err)
	}
	defer s.end(ctx)
	if behind := latest.Sub(s.BeatAt); behind > Freshness {
		return r.doubt(ctx, ReasonLag, fmt.Errorf("replica heartbeat %s behind the newest one written", behind.Round(time.Second)))
	}
	if bound.After(s.SafeThrough) {
		return r.doubt(ctx, ReasonBound, fmt.Errorf("until %d is after the replica's safe_through %s", until, s.SafeThrough.UTC().Format(time.RFC3339)))
	}
	if err := fn(s); err != nil {
		return r.doubt(ctx, ReasonReplicaError, fmt.Errorf("replica read: %w", err))
	}
	r.cfg.Metrics.Replica.Reads.Inc()
	return RouteReplica, ReasonProved, nil
}

// safeThrough is the safe_through of a heartbeat written at beat.
func safeThrough(beat time.Time) time.Time { return beat.Add(-(Floor + Margin)) }

// begin opens a Session: BEGIN and the heartbeat read in one round trip,
// the heartbeat first, so it fixes the snapshot.
func (r *Replica) begin(ctx context.Context) (*Session, error) {
	conn, err := pg.Acquire(ctx, r.cfg.Pool, StatementTimeout)
	if err != nil {
		return nil, fmt.Errorf("replica connection: %w", err)
	}
	s := &Session{conn: conn}
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	b.Queue("SELECT beat_at, safe_through FROM replica_heartbeat")
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&s.BeatAt, &s.SafeThrough)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = errors.New("no heartbeat row on the replica")
	}
	if err != nil {
		s.end(ctx)
		return nil, fmt.Errorf("replica heartbeat: %w", err)
	}
	return s, nil
}

// end rolls the transaction back and returns the connection; one that
// cannot roll back is closed instead of going back to the pool.
func (s *Session) end(ctx context.Context) {
	c := s.conn.Conn()
	if !c.IsClosed() && c.PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StatementTimeout)
		if _, err := c.Exec(rctx, "ROLLBACK"); err != nil {
			_ = c.Close(rctx)
		}
		cancel()
	}
	s.conn.Release()
}

// doubt counts and logs one doubt (a warning at most once per Freshness,
// the others at debug) and answers RouteDoubt; when ctx ended it counts
// nothing and returns its error.
func (r *Replica) doubt(ctx context.Context, reason Reason, why error) (Route, Reason, error) {
	if err := ctx.Err(); err != nil {
		return RouteWriter, reason, err
	}
	r.cfg.Metrics.Replica.Degraded.Inc()
	now := r.cfg.NowFunc()
	r.mu.Lock()
	warn := now.Sub(r.warnedAt) >= Freshness
	if warn {
		r.warnedAt = now
	}
	r.mu.Unlock()
	level := slog.LevelDebug
	if warn {
		level = slog.LevelWarn
	}
	r.log.Log(ctx, level, "read replica doubted; the read runs on the writer", slog.String("err", why.Error()))
	return RouteDoubt, reason, nil
}
