package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/buzz-relay/buzz/internal/service"
	"github.com/buzz-relay/buzz/internal/testsignal"
)

// Chainer constants of docs/PROTOCOL.md §13.8.
const (
	// BatchSize bounds the intents one batch transaction chains: at most
	// BatchSize rows of audit_outbox, and groups of audit_intent_groups
	// until their intents reach BatchSize (the last group whole).
	BatchSize = 500
	// PollInterval is how often the chainer looks for work without a wake-up.
	PollInterval = 250 * time.Millisecond
	// GatherDelay is how long a wake-up waits before its pass, so that the
	// commits that follow it are chained in the same batch transaction
	// instead of one each (docs/ARCHITECTURE.md "Audit chain").
	GatherDelay = 50 * time.Millisecond
	// ParallelCommunities is how many communities are chained at once.
	ParallelCommunities = 4
	// FlushLockRetry and FlushLockWait: how often, and for how long
	// without progress, Flush tries again communities whose lock another
	// transaction holds.
	FlushLockRetry = 25 * time.Millisecond
	FlushLockWait  = 2 * time.Second
	// pendingScan is how many communities one pass considers.
	pendingScan = 64
	backoffMin  = time.Second
	backoffMax  = 30 * time.Second
	gaugeEvery  = time.Second
)

// ChainerConfig configures a Chainer.
type ChainerConfig struct {
	// Pool is the audit pool (docs/PROTOCOL.md §13.8: at most 5 connections). Required.
	Pool *pgxpool.Pool
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics receives the audit series; nil (or any nil field) records nothing.
	Metrics *Metrics
	// CommunityHostFunc names a community in log lines (its host). Optional.
	CommunityHostFunc func(communityID string) string
}

// ChainedBatch is one committed batch: the community, the number of
// entries and the new head seq.
type ChainedBatch struct {
	CommunityID string
	N           int
	Head        int64
}

// FailedBatch is one rolled-back batch and its error.
type FailedBatch struct {
	CommunityID string
	Err         error
}

// ChainerTestSignals are emitted by the chainer, whether it runs as a
// service or is flushed. Tests only.
type ChainerTestSignals struct {
	// Chained follows each committed batch.
	Chained testsignal.Signal[ChainedBatch]
	// Failed follows each rolled-back batch.
	Failed testsignal.Signal[FailedBatch]
}

// Init initialises every signal.
func (ts *ChainerTestSignals) Init() {
	ts.Chained.Init()
	ts.Failed.Init()
}

// Chainer moves intents from audit_outbox into each community's chain
// (docs/PROTOCOL.md §13.5). One runs per process; several processes may run against one
// database, the per-community advisory lock keeping each chain single-writer.
type Chainer struct {
	service.Base
	cfg  ChainerConfig
	log  *slog.Logger
	wake chan struct{}

	mu        sync.Mutex
	backoff   map[string]backoffState
	lastGauge time.Time

	TestSignals ChainerTestSignals
}

type backoffState struct {
	delay time.Duration
	until time.Time
}

// NewChainer returns a Chainer; call Start to run it.
func NewChainer(cfg ChainerConfig) *Chainer {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Chainer{cfg: cfg, log: log.With("component", "audit"), wake: make(chan struct{}, 1), backoff: map[string]backoffState{}}
}

// Wake asks the chainer to look for work now. It never blocks and is safe
// to call from any goroutine, any number of times.
func (c *Chainer) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Start chains pending intents GatherDelay after a wake-up and every
// PollInterval until ctx ends or Stop. A batch in flight then commits or
// rolls back; either way nothing is lost. Start and Stop are safe to call
// twice; Stop returns once the loop ended. Shutdown calls Flush after Stop.
func (c *Chainer) Start(ctx context.Context) error {
	return c.StartLoop(ctx, c.loop)
}

// loop is the chainer's service loop. Under load every commit wakes it:
// each pass then takes what committed during the previous pass and the
// gather delay, so batches grow with the rate instead of holding one
// intent each.
func (c *Chainer) loop(ctx context.Context) {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	gather := time.NewTimer(GatherDelay)
	gather.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.wake:
			gather.Reset(GatherDelay)
			select {
			case <-ctx.Done():
				return
			case <-gather.C:
			}
			select { // the wake-ups of the gathered commits
			case <-c.wake:
			default:
			}
		}
		if err := c.runOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("Audit log failed: "+err.Error(), slog.Any("err", err))
		}
	}
}

// Flush chains everything pending now, ignoring backoff, until the outbox
// holds nothing chainable by this process or ctx ends. Shutdown calls it
// after the doors closed; tests call it instead of waiting.
//
// A pass that chains nothing because other transactions hold the pending
// communities' locks is tried again every FlushLockRetry, for up to
// FlushLockWait without progress. At shutdown the holder is often this
// process's own batch that Stop has just canceled (the server releases its
// lock when it notices the dropped connection, a moment later) or another
// process's flush; giving up at once left their intents in the outbox for
// the next start.
func (c *Chainer) Flush(ctx context.Context) error {
	var stalled time.Time // when the passes stopped making progress
	for ctx.Err() == nil {
		ids, err := c.pending(ctx)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		progress := false
		for _, id := range ids {
			n, err := c.chainCommunity(ctx, id)
			if err != nil {
				return err
			}
			progress = progress || n > 0
		}
		switch {
		case progress:
			stalled = time.Time{}
			continue
		case stalled.IsZero():
			stalled = time.Now()
		case time.Since(stalled) >= FlushLockWait:
			return nil // every pending community stays locked by another process
		}
		select {
		case <-ctx.Done():
		case <-time.After(FlushLockRetry):
		}
	}
	c.refreshGauges(context.WithoutCancel(ctx), true)
	return ctx.Err()
}

// runOnce is one pass: the communities with pending intents, oldest first,
// ParallelCommunities at a time.
func (c *Chainer) runOnce(ctx context.Context) error {
	defer c.refreshGauges(ctx, false)
	ids, err := c.pending(ctx)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ParallelCommunities)
	now := time.Now()
	for _, id := range ids {
		if c.inBackoff(id, now) {
			continue
		}
		g.Go(func() error {
			_, err := c.chainCommunity(gctx, id)
			if err != nil && gctx.Err() == nil {
				c.log.Error("Audit log failed: "+err.Error(), slog.String("community", c.host(id)), slog.Any("cause", errors.Unwrap(err)))
			}
			return nil // one community's failure never stops the others
		})
	}
	return g.Wait()
}

// pendingSQL lists the communities with pending intents in either queue
// (audit_outbox and audit_intent_groups), the oldest intent first, without
// reading every pending row: a walk of each primary key's distinct
// community_id values (one index probe each), then the oldest id of each
// (one more). Its cost grows with the number of communities that have
// intents, not with the number of intents or the dead rows a busy queue
// leaves until vacuum.
const pendingSQL = `WITH RECURSIVE c(community_id) AS (
		(SELECT community_id FROM audit_outbox ORDER BY community_id LIMIT 1)
		UNION ALL
		SELECT (SELECT o.community_id FROM audit_outbox o WHERE o.community_id > c.community_id ORDER BY o.community_id LIMIT 1)
		FROM c WHERE c.community_id IS NOT NULL
	), g(community_id) AS (
		(SELECT community_id FROM audit_intent_groups ORDER BY community_id LIMIT 1)
		UNION ALL
		SELECT (SELECT o.community_id FROM audit_intent_groups o WHERE o.community_id > g.community_id ORDER BY o.community_id LIMIT 1)
		FROM g WHERE g.community_id IS NOT NULL
	), p(community_id, oldest) AS (
		SELECT community_id, (SELECT min(o.id) FROM audit_outbox o WHERE o.community_id = c.community_id)
		FROM c WHERE community_id IS NOT NULL
		UNION ALL
		SELECT community_id, (SELECT min(o.id) FROM audit_intent_groups o WHERE o.community_id = g.community_id)
		FROM g WHERE community_id IS NOT NULL)
	SELECT community_id::text FROM p GROUP BY community_id ORDER BY min(oldest) LIMIT $1`

func (c *Chainer) pending(ctx context.Context) ([]string, error) {
	rows, err := c.cfg.Pool.Query(ctx, pendingSQL, pendingScan)
	if err != nil {
		return nil, dbError(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbError(err)
	}
	return ids, nil
}

func (c *Chainer) host(id string) string {
	if c.cfg.CommunityHostFunc != nil {
		if h := c.cfg.CommunityHostFunc(id); h != "" {
			return h
		}
	}
	return "unknown"
}

func (c *Chainer) inBackoff(id string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.backoff[id]
	return ok && now.Before(b.until)
}

func (c *Chainer) noteResult(id string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.backoff, id)
		return
	}
	b := c.backoff[id]
	b.delay = min(max(b.delay*2, backoffMin), backoffMax)
	b.until = time.Now().Add(b.delay)
	c.backoff[id] = b
}

// chainCommunity runs batches for one community until one is not full.
// It returns how many entries it appended.
func (c *Chainer) chainCommunity(ctx context.Context, id string) (int, error) {
	total := 0
	for {
		n, more, err := c.batch(ctx, id)
		c.noteResult(id, err)
		total += n
		if err != nil {
			c.cfg.Metrics.logError()
			c.TestSignals.Failed.Signal(FailedBatch{CommunityID: id, Err: err})
			return total, err
		}
		if !more {
			return total, nil
		}
	}
}

// claimed is one intent deleted from a queue by the batch that chains it.
// The intents of one audit_intent_groups row share its id and time.
type claimed struct {
	id         int64
	action     string
	actor      []byte
	objectID   *string
	detail     []byte
	occurredAt time.Time
}

// The statements of a batch transaction. Each claim takes the community's
// advisory lock in a one-time subquery, evaluated before any row is
// deleted: without the lock it deletes nothing (the second claim's call
// returns true again when the first one took it: the lock is the
// session's). A claim's snapshot may predate the commit of the lock's
// previous holder; the intents that holder deleted are then skipped by the
// DELETE (READ COMMITTED re-checks a row deleted by a committed
// transaction), and headSQL, a later statement, sees the entries it
// appended. claimGroupsSQL takes groups in id order while the intents
// before each are fewer than $2, so a claim that stops short of $2 took
// every group it could see.
const (
	claimSQL = `DELETE FROM audit_outbox
		WHERE community_id = $1
		  AND id IN (SELECT id FROM audit_outbox WHERE community_id = $1 ORDER BY id LIMIT $2)
		  AND (SELECT pg_try_advisory_xact_lock(hashtextextended('buzz_audit:' || $1::uuid::text, 0)))
		RETURNING id, action, actor_pubkey, object_id, detail, occurred_at`
	claimGroupsSQL = `DELETE FROM audit_intent_groups
		WHERE community_id = $1
		  AND id IN (SELECT id FROM (SELECT id, n, sum(n) OVER (ORDER BY id) AS upto
		                             FROM audit_intent_groups WHERE community_id = $1 ORDER BY id LIMIT $2) s
		             WHERE upto - n < $2)
		  AND (SELECT pg_try_advisory_xact_lock(hashtextextended('buzz_audit:' || $1::uuid::text, 0)))
		RETURNING id, actions, actors, object_ids, details, occurred_at`
	headSQL   = `SELECT seq, hash FROM audit_log WHERE community_id = $1 ORDER BY seq DESC LIMIT 1`
	appendSQL = `INSERT INTO audit_log (community_id, seq, hash, prev_hash, action, actor_pubkey, object_id, detail, created_at, hash_version)
		SELECT $1, s, h, p, a, ac, o, d::jsonb, t, 2
		FROM unnest($2::bigint[], $3::bytea[], $4::bytea[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::timestamptz[])
		  AS u(s, h, p, a, ac, o, d, t)`
)

// batch is the batch transaction of docs/PROTOCOL.md §13.5, in two round trips: BEGIN,
// the lock and both claims, and the head read are sent together; then the
// append and COMMIT. It returns 0 when another process holds the
// community's lock or nothing is pending, and more when a claim stopped at
// BatchSize. A panic is recovered and the transaction rolled back; a
// connection left inside a transaction is closed by the pool on release.
func (c *Chainer) batch(ctx context.Context, id string) (n int, more bool, err error) {
	start := time.Now()
	conn, err := c.cfg.Pool.Acquire(ctx)
	if err != nil {
		return 0, false, dbError(err)
	}
	defer conn.Release()
	open := false
	defer func() {
		if r := recover(); r != nil {
			err = &SerializationError{What: fmt.Sprintf("chainer panic: %v", r)}
			n, more = 0, false
		}
		if open && (err != nil || n == 0) {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()

	first := &pgx.Batch{}
	first.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	first.Queue(claimSQL, id, BatchSize)
	first.Queue(claimGroupsSQL, id, BatchSize)
	first.Queue(headSQL, id)
	br := conn.SendBatch(ctx, first)
	open = true
	batch, more, seq, prev, err := readClaim(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, false, dbError(err)
	}
	if len(batch) == 0 {
		return 0, false, nil
	}
	// A group's intents share its id and stay in their order.
	sort.SliceStable(batch, func(i, j int) bool { return batch[i].id < batch[j].id })
	k := len(batch)
	seqs, hashes, prevs := make([]int64, k), make([][]byte, k), make([][]byte, k)
	actions, actors, objects, details := make([]string, k), make([][]byte, k), make([]*string, k), make([]string, k)
	times := make([]time.Time, k)
	for i, r := range batch {
		seq++
		h, err := Hash(Entry{CommunityID: id, Seq: seq, CreatedAt: r.occurredAt, Action: Action(r.action),
			Actor: r.actor, ObjectID: r.objectID, Detail: r.detail, PrevHash: prev, Version: HashVersion})
		if err != nil {
			return 0, false, err
		}
		seqs[i], hashes[i], prevs[i] = seq, h[:], prev
		actions[i], actors[i], objects[i], details[i], times[i] = r.action, r.actor, r.objectID, string(r.detail), r.occurredAt
		prev = hashes[i]
	}

	second := &pgx.Batch{}
	second.Queue(appendSQL, id, seqs, hashes, prevs, actions, actors, objects, details, times)
	second.Queue("COMMIT")
	br = conn.SendBatch(ctx, second)
	_, err = br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, false, dbError(err)
	}
	open = false
	if tag.String() != "COMMIT" { // a transaction that had failed ends in ROLLBACK
		return 0, false, dbError(fmt.Errorf("commit: the transaction was rolled back (%s)", tag))
	}
	c.cfg.Metrics.batchChained(time.Since(start), k)
	c.TestSignals.Chained.Signal(ChainedBatch{CommunityID: id, N: k, Head: seq})
	return k, more, nil
}

// readClaim reads the results of a batch's first round trip: BEGIN, the
// claimed intents of both queues, each group's in its order, and the chain
// head (seq 0 and no hash for a new chain). more reports a claim that
// stopped at BatchSize.
func readClaim(br pgx.BatchResults) (batch []claimed, more bool, seq int64, prev []byte, err error) {
	if _, err := br.Exec(); err != nil {
		return nil, false, 0, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, 0, nil, err
	}
	for rows.Next() {
		var r claimed
		if err := rows.Scan(&r.id, &r.action, &r.actor, &r.objectID, &r.detail, &r.occurredAt); err != nil {
			rows.Close()
			return nil, false, 0, nil, err
		}
		batch = append(batch, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, 0, nil, err
	}
	more = len(batch) >= BatchSize
	grouped, err := readGroups(br)
	if err != nil {
		return nil, false, 0, nil, err
	}
	more = more || len(grouped) >= BatchSize
	batch = append(batch, grouped...)
	err = br.QueryRow().Scan(&seq, &prev)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	return batch, more, seq, prev, err
}

// readGroups reads claimGroupsSQL's rows, one claimed per intent.
func readGroups(br pgx.BatchResults) ([]claimed, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		var (
			id      int64
			actions []string
			actors  [][]byte
			objects []*string
			details [][]byte
			at      time.Time
		)
		if err := rows.Scan(&id, &actions, &actors, &objects, &details, &at); err != nil {
			return nil, err
		}
		if len(actors) != len(actions) || len(objects) != len(actions) || len(details) != len(actions) {
			return nil, &SerializationError{What: fmt.Sprintf("intent group %d: arrays of %d, %d, %d and %d elements",
				id, len(actions), len(actors), len(objects), len(details))}
		}
		for i := range actions {
			out = append(out, claimed{id: id, action: actions[i], actor: actors[i], objectID: objects[i], detail: details[i], occurredAt: at})
		}
	}
	return out, rows.Err()
}

// refreshGauges sets the outbox gauges at most once a second (force: now).
func (c *Chainer) refreshGauges(ctx context.Context, force bool) {
	m := c.cfg.Metrics
	if !m.wantsGauges() {
		return
	}
	c.mu.Lock()
	if !force && time.Since(c.lastGauge) < gaugeEvery {
		c.mu.Unlock()
		return
	}
	c.lastGauge = time.Now()
	c.mu.Unlock()
	pending, lag, err := OutboxStats(ctx, c.cfg.Pool)
	if err != nil {
		return
	}
	m.setGauges(pending, lag)
}

// OutboxStats returns the number of pending intents (all communities, both
// queues) and the age of the oldest, 0 when none.
func OutboxStats(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (pending int64, lag time.Duration, err error) {
	var secs float64
	err = q.QueryRow(ctx, `SELECT COALESCE(sum(n), 0)::bigint, COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(occurred_at)), 0)::float8
		FROM (SELECT count(*) AS n, min(occurred_at) AS occurred_at FROM audit_outbox
		      UNION ALL SELECT sum(n), min(occurred_at) FROM audit_intent_groups) q`).Scan(&pending, &secs)
	if err != nil {
		return 0, 0, dbError(err)
	}
	return pending, time.Duration(max(secs, 0) * float64(time.Second)), nil
}
