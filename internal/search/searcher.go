package search

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/pg"
)

// StatementTimeout is the default bound of one search statement (docs/PROTOCOL.md §12.4).
const StatementTimeout = 5 * time.Second

// ErrNoCommunity is returned by Search, before any SQL, for a query without
// a community.
var ErrNoCommunity = errors.New("search query has no community")

// Config configures a Searcher.
type Config struct {
	Pool *pgxpool.Pool
	// StatementTimeout bounds each search statement (SET LOCAL
	// statement_timeout). Default StatementTimeout.
	StatementTimeout time.Duration
	// MaxConcurrent caps the search statements running at once. Default:
	// the machine's CPU count, at most half the pool's connections, at
	// least one. A search statement is CPU-bound (it ranks up to RankWindow
	// matches, and a one-letter prefix still probes much of the index), so
	// a burst of expensive searches then neither takes the connections nor
	// all the cores that the relay's other reads and writes need. A search
	// waits for a slot under its caller's context (the WebSocket REQ
	// deadline).
	MaxConcurrent int
	// RankWindow is how many matches a statement ranks: the newest
	// RankWindow matches of the query's predicates (docs/PROTOCOL.md §12.4). 0 means
	// DefaultRankWindow; other values are clamped to
	// MinRankWindow..MaxRankWindow.
	RankWindow int
}

// Searcher runs search statements. It is safe for concurrent use.
type Searcher struct {
	cfg   Config
	slots chan struct{}
	// begin opens a search statement's transaction with its settings.
	begin string
	// density is the planner's view of how common the lexemes are, which
	// sends a word in most rows past the day keys (walkDensity).
	density densities
}

// New returns a Searcher.
func New(cfg Config) *Searcher {
	if cfg.StatementTimeout <= 0 {
		cfg.StatementTimeout = StatementTimeout
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = runtime.NumCPU()
		if cfg.Pool != nil {
			cfg.MaxConcurrent = min(cfg.MaxConcurrent, int(cfg.Pool.Config().MaxConns)/2)
		}
		cfg.MaxConcurrent = max(1, cfg.MaxConcurrent)
	}
	cfg.RankWindow = clampRankWindow(cfg.RankWindow)
	return &Searcher{cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrent),
		begin: fmt.Sprintf("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; %s; SET LOCAL statement_timeout = %d",
			searchSettings, cfg.StatementTimeout.Milliseconds())}
}

// Hit is one candidate (docs/PROTOCOL.md §12.6): no content, no tags.
type Hit struct {
	ID     [32]byte
	Kind   int
	PubKey [32]byte
	// Channel is the channel id, "" when the event has none.
	Channel   string
	CreatedAt int64
	Rank      float32
}

// IDHex returns the event id as lowercase hex.
func (h *Hit) IDHex() string { return hex.EncodeToString(h.ID[:]) }

// Result is one page of hits and the page actually used.
type Result struct {
	Hits []Hit
	Page int64
}

// RankWindow returns the number of matches each statement ranks.
func (s *Searcher) RankWindow() int { return s.cfg.RankWindow }

// Search runs one page of q: the page of the newest RankWindow matches,
// ordered by rank, then newest, then id; a page past the window is empty
// and older matches are reached with Until. Empty text (after NormalizeText) returns no
// hits and issues no SQL; the clamped page is reported either way. The
// statement runs in a read-only transaction with custom plans and the
// statement timeout. Database failures are "database error: {cause}".
func (s *Searcher) Search(ctx context.Context, q Query) (Result, error) {
	return s.search(ctx, q, s.run)
}

// SearchOn is Search inside the caller's transaction tx (the read
// replica's proved snapshot, REPEATABLE READ): its statements run after
// the search settings (custom plans, no JIT, no parallel plans) are SET
// LOCAL, which lasts until tx ends, and under tx's own statement timeout.
// It waits for a slot as Search does.
func (s *Searcher) SearchOn(ctx context.Context, tx pg.Querier, q Query) (Result, error) {
	return s.search(ctx, q, func(ctx context.Context, fn func(pg.Querier) error) error {
		if err := s.acquire(ctx); err != nil {
			return err
		}
		defer s.release()
		if _, err := tx.Exec(ctx, searchSettings); err != nil {
			return err
		}
		return fn(tx)
	})
}

// searchSettings are the search transaction's settings (docs/PROTOCOL.md §12.4):
// custom plans, so the planner sees how common the word is and the time
// bounds; no JIT, whose compilation costs more than a search statement
// whose estimate crosses jit_above_cost; no parallel plans, so the day-key
// statement's Append runs its branches in order (buildDays).
const searchSettings = "SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL jit = off; " +
	"SET LOCAL max_parallel_workers_per_gather = 0"

func (s *Searcher) search(ctx context.Context, q Query, run func(context.Context, func(pg.Querier) error) error) (Result, error) {
	if q.Community == "" {
		return Result{}, ErrNoCommunity
	}
	page, perPage := ClampPage(q.Page), ClampPerPage(q.PerPage)
	res := Result{Page: page}
	text := NormalizeText(q.Text)
	if text == "" {
		return res, nil
	}
	var hits []Hit
	err := run(ctx, func(db pg.Querier) error {
		var err error
		hits, err = s.page(ctx, db, &q, text, page, perPage)
		return err
	})
	if err != nil {
		var lenErr *columnLengthError
		if errors.As(err, &lenErr) {
			return res, lenErr
		}
		return res, fmt.Errorf("database error: %w", err)
	}
	res.Hits = hits
	return res, nil
}

// page runs the statements of one page of q on db, inside one REPEATABLE
// READ transaction, so the preflight and the statement see one snapshot.
// A FullText query that requires a lexeme walks the day keys back from the
// community's newest searchable event (buildDays), unless the planner's
// statistics put that lexeme in most rows of the anchor's partition
// (walkDensity). Any other query (Prefix mode, an OR, only negated words,
// a community id that is not a UUID, such a common word) tries the recent
// span first: when its window is full it is the window of the whole filter (the
// W newest matches are all at least that recent); otherwise the statement
// runs again without the bound.
func (s *Searcher) page(ctx context.Context, db pg.Querier, q *Query, text string, page, perPage int64) ([]Hit, error) {
	if st, ok, err := s.daysStatement(ctx, db, q, text, page, perPage); err != nil || ok {
		if err != nil || st == nil {
			return []Hit{}, err
		}
		return queryHits(ctx, db, *st)
	}
	if from, ok := recentFrom(q, time.Now()); ok {
		st := build(q, text, page, perPage, s.cfg.RankWindow, &from)
		hits, err := queryHits(ctx, db, st)
		if err != nil || *st.candidates >= int64(s.cfg.RankWindow) {
			return hits, err
		}
	}
	return queryHits(ctx, db, build(q, text, page, perPage, s.cfg.RankWindow, nil))
}

// daysStatement runs the preflight of a FullText query and returns its
// day-key statement with true. A nil statement with true means the
// community has no event within the filter's bounds (the page is empty);
// false means the query takes the other path.
func (s *Searcher) daysStatement(ctx context.Context, db pg.Querier, q *Query, text string, page, perPage int64) (*statement, bool, error) {
	if q.Mode == Prefix {
		return nil, false, nil
	}
	prefix, ok := communityKeyPrefix(q.Community)
	if !ok {
		return nil, false, nil
	}
	sql, args := preflightSQL(q)
	args[1] = text
	var (
		anchor    *int64
		partition *string
		tree      string
	)
	if err := db.QueryRow(ctx, sql, args...).Scan(&anchor, &partition, &tree); err != nil {
		return nil, false, err
	}
	if anchor == nil {
		return nil, true, nil
	}
	lexeme, ok := requiredLexeme(tree)
	if !ok {
		return nil, false, nil
	}
	if f, known, err := s.density.of(ctx, db, *partition, lexeme); err != nil {
		return nil, false, err
	} else if known && f >= walkDensity {
		return nil, false, nil
	}
	st := buildDays(q, text, page, perPage, s.cfg.RankWindow, daysPlan{anchor: *anchor, lexeme: lexeme, prefix: prefix})
	return &st, true, nil
}

// queryHits runs one search statement on db and reads its page.
func queryHits(ctx context.Context, db pg.Querier, st statement) ([]Hit, error) {
	rows, err := db.Query(ctx, st.sql, st.args...)
	if err != nil {
		return nil, err
	}
	return scanHits(rows, st.candidates)
}

func (s *Searcher) acquire(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for a search slot: %w", ctx.Err())
	}
}

func (s *Searcher) release() { <-s.slots }

// run runs fn in the search's own read-only REPEATABLE READ transaction on
// a pooled connection: BEGIN and the settings go as one simple-protocol
// message, first, so that the statement timeout also bounds preparing the
// statements (which waits for a lock on events like running them). A
// failure leaves the connection in a transaction, so it is rolled back
// before the connection goes back to the pool.
func (s *Searcher) run(ctx context.Context, fn func(pg.Querier) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	conn, err := s.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	err = s.runOn(ctx, conn.Conn(), fn)
	if err != nil && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	return err
}

func (s *Searcher) runOn(ctx context.Context, conn *pgx.Conn, fn func(pg.Querier) error) error {
	if _, err := conn.PgConn().Exec(ctx, s.begin).ReadAll(); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "COMMIT")
	return err
}

type columnLengthError struct {
	column string
	n      int
}

func (e *columnLengthError) Error() string {
	return fmt.Sprintf("%s column is %d bytes, expected 32", e.column, e.n)
}

// scanHits reads a page of hits and stores the size of the statement's
// window (the candidates it ranked; 0 for an empty page) in *candidates.
func scanHits(rows pgx.Rows, candidates *int64) ([]Hit, error) {
	defer rows.Close()
	hits := []Hit{}
	*candidates = 0
	for rows.Next() {
		var (
			id, pub []byte
			channel *string
			h       Hit
		)
		if err := rows.Scan(&id, &h.Kind, &pub, &channel, &h.CreatedAt, &h.Rank, candidates); err != nil {
			return nil, err
		}
		if len(id) != 32 {
			return nil, &columnLengthError{"event id", len(id)}
		}
		if len(pub) != 32 {
			return nil, &columnLengthError{"pubkey", len(pub)}
		}
		copy(h.ID[:], id)
		copy(h.PubKey[:], pub)
		if channel != nil {
			h.Channel = *channel
		}
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// Stored is a hydrated hit: the full stored event and its channel.
type Stored struct {
	Event event.Event
	// Channel is the stored channel_id, "" for none.
	Channel string
}

// Hydrate loads the live (not deleted, not expired: docs/PROTOCOL.md §6.6)
// events of hits in community, in one statement, keyed by lowercase hex id.
// Hits missing from the result (deleted, expired or gone since the FTS
// statement) are absent from the map. Each hit is
// looked up by its full primary key (community, created_at, id), so the
// statement probes one partition per hit instead of every partition per id.
func (s *Searcher) Hydrate(ctx context.Context, community string, hits []Hit) (map[string]Stored, error) {
	return s.HydrateOn(ctx, s.cfg.Pool, community, hits)
}

// HydrateOn is Hydrate on q: inside the caller's transaction, such as the
// read replica's proved snapshot.
func (s *Searcher) HydrateOn(ctx context.Context, q pg.Querier, community string, hits []Hit) (map[string]Stored, error) {
	out := make(map[string]Stored, len(hits))
	if community == "" {
		return nil, ErrNoCommunity
	}
	if len(hits) == 0 {
		return out, nil
	}
	ids := make([][]byte, len(hits))
	at := make([]time.Time, len(hits))
	for i := range hits {
		ids[i] = hits[i].ID[:]
		at[i] = time.Unix(hits[i].CreatedAt, 0).UTC()
	}
	// search_hydrate (migration 0013) runs the key lookup with one cached
	// generic plan; as a plain statement it was planned anew at every call
	// (docs/PERFORMANCE.md "Search hydration planned once").
	rows, err := q.Query(ctx, `SELECT * FROM search_hydrate($1, $2::timestamptz[], $3::bytea[])`, community, at, ids)
	if err != nil {
		return nil, fmt.Errorf("database error: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, pub, sig []byte
			tags         []byte
			channel      *string
			st           Stored
		)
		if err := rows.Scan(&id, &pub, &st.Event.CreatedAt, &st.Event.Kind, &tags, &st.Event.Content, &sig, &channel); err != nil {
			return nil, fmt.Errorf("database error: %w", err)
		}
		st.Event.ID = hex.EncodeToString(id)
		st.Event.PubKey = hex.EncodeToString(pub)
		st.Event.Sig = hex.EncodeToString(sig)
		if err := json.Unmarshal(tags, &st.Event.Tags); err != nil {
			return nil, fmt.Errorf("decode tags of %s: %w", st.Event.ID, err)
		}
		if channel != nil {
			st.Channel = *channel
		}
		out[st.Event.ID] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("database error: %w", err)
	}
	return out, nil
}

// LiveIDs returns which of ids are live (stored, not deleted, not expired) in
// community, as lowercase hex. The read engine uses it for the edit-target
// check of kind 40003.
func (s *Searcher) LiveIDs(ctx context.Context, community string, ids [][]byte) (map[string]bool, error) {
	return s.LiveIDsOn(ctx, s.cfg.Pool, community, ids)
}

// LiveIDsOn is LiveIDs on q: inside the caller's transaction, such as the
// read replica's proved snapshot.
func (s *Searcher) LiveIDsOn(ctx context.Context, q pg.Querier, community string, ids [][]byte) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if community == "" {
		return nil, ErrNoCommunity
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `
		SELECT id FROM events WHERE community_id = $1 AND id = ANY($2::bytea[]) AND deleted_at IS NULL
		  AND (expires_at IS NULL OR expires_at > now())`, community, ids)
	if err != nil {
		return nil, fmt.Errorf("database error: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("database error: %w", err)
		}
		out[hex.EncodeToString(id)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("database error: %w", err)
	}
	return out, nil
}

// Explain returns the EXPLAIN (ANALYZE, BUFFERS) output of the first
// search statement Search runs for q (after the day-key preflight, which
// it also runs), in the same transaction and settings as Search. For plan
// checks and operators; an empty string when the page needs no statement.
func (s *Searcher) Explain(ctx context.Context, q Query) (string, error) {
	text := NormalizeText(q.Text)
	if q.Community == "" || text == "" {
		return "", ErrNoCommunity
	}
	page, perPage := ClampPage(q.Page), ClampPerPage(q.PerPage)
	var out []string
	err := s.run(ctx, func(db pg.Querier) error {
		ds, ok, err := s.daysStatement(ctx, db, &q, text, page, perPage)
		if err != nil || (ok && ds == nil) {
			return err
		}
		st := build(&q, text, page, perPage, s.cfg.RankWindow, nil)
		if ok {
			st = *ds
		} else if from, recent := recentFrom(&q, time.Now()); recent {
			st = build(&q, text, page, perPage, s.cfg.RankWindow, &from)
		}
		rows, err := db.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+st.sql, st.args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return "", fmt.Errorf("database error: %w", err)
	}
	return strings.Join(out, "\n"), nil
}

// IsTimeout reports whether err is a search statement that ran out of its
// statement_timeout.
func IsTimeout(err error) bool { return pg.IsQueryCanceled(err) }
