package read

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/hot"
	"github.com/buzz-relay/buzz/internal/metrics"
	"github.com/buzz-relay/buzz/internal/replica"
	"github.com/buzz-relay/buzz/internal/search"
	"github.com/buzz-relay/buzz/internal/store"
	"github.com/buzz-relay/buzz/internal/window"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures an Engine.
type Config struct {
	// Pool is the writer. The read door's statements run on it, each on a
	// connection taken within Shares.AcquireTimeout (store.NewReader);
	// search, snapshots and the NIP-CW windows take theirs as they do.
	Pool *pgxpool.Pool
	// Metrics receives the read metrics. Default metrics.Disabled().
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// CacheTTL is the lifetime of accessible-channel entries. Default 10 s.
	CacheTTL time.Duration
	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time
	// QueryHookFunc, when set, runs before each history query and each
	// count statement; an error it returns fails the query. Tests use it to
	// inject database failures and slow statements.
	// For a search filter it runs before each FTS statement and each
	// hydration instead; SearchStage(ctx) tells which.
	QueryHookFunc func(ctx context.Context, f *event.Filter) error
	// Replica, when set, serves the reads docs/PROTOCOL.md §16.6 lets it serve, each
	// in a proved snapshot (route.go); nil keeps every read on the writer.
	Replica *replica.Replica
	// NoReplicaReason is why Replica is nil, in buzz_db_route_decision's
	// terms: "not_configured" (the default) or "floor_unverified".
	NoReplicaReason string
	// RelayKey signs the NIP-CW overlays (39005, 39006, 39007).
	RelayKey []byte
	// Caps are the filter caps Open checks first (caps.go); zero fields
	// take the defaults.
	Caps Caps
	// Shares bounds concurrent reads and sets every read's deadline
	// (share.go, deadline.go). The zero value limits nothing.
	Shares ShareConfig
	// MaxBytes is the byte budget of one REQ history or /query answer
	// across its filters, and of each channel window's aux closure
	// (BUZZ_READ_MAX_BYTES, budget.go). 0 means none.
	MaxBytes int
	// SearchRankWindow is how many matches a search statement ranks
	// (BUZZ_SEARCH_RANK_WINDOW, docs/PROTOCOL.md §12.4). 0 means the search
	// package's default.
	SearchRankWindow int
	// SearchCacheBytes bounds the search page cache
	// (BUZZ_SEARCH_CACHE_MIB, searchcache.go); 0 turns it off. It serves
	// pages only while Hot vouches for their community.
	SearchCacheBytes int64
	// Hot is the hot window REQ history is answered from when it can prove
	// the answer (hot.go); nil reads PostgreSQL only.
	Hot *hot.Window
}

// Engine is the read engine. It is safe for concurrent use.
type Engine struct {
	cfg Config
	// store runs the read door's statements on the writer (Config.Pool).
	store    *store.Store
	searcher *search.Searcher
	mu       sync.Mutex
	cache    map[accessKey]accessEntry
	// forgets counts each community's Forget calls (under mu): a lookup
	// that saw a Forget of its community while it ran stores nothing,
	// since its answer may predate the change that was forgotten.
	forgets map[string]uint64
	// refreshing holds the sets Visible is renewing in the background
	// (under mu; refreshAhead).
	refreshing map[accessKey]bool

	// searchCache keeps recent search pages (searchcache.go); nil when
	// off or without a hot window.
	searchCache *searchCache

	// replicaSearcher runs search statements on the replica pool, with
	// its own slots; nil without a replica.
	replicaSearcher *search.Searcher

	// windows serves the NIP-CW window modes (windows.go).
	windows *window.Engine

	// shares counts the concurrent reads (share.go).
	shares *shares
	// readTime is every reader's read-time budget (readtime.go); nil
	// when off.
	readTime *readTime

	// future is the newest created_at (Unix seconds) of the rows stored
	// above the ceiling when the engine started, 0 when none
	// (LoadCeiling, ceiling.go).
	future atomic.Int64
}

type accessKey struct{ community, reader string }

type accessEntry struct {
	acc     *Access
	expires time.Time
}

// New returns an Engine.
func New(cfg Config) *Engine {
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = 10 * time.Second
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Disabled()
	}
	cfg.Caps = cfg.Caps.withDefaults()
	if cfg.NoReplicaReason == "" {
		cfg.NoReplicaReason = "not_configured"
	}
	e := &Engine{cfg: cfg, cache: map[accessKey]accessEntry{}, forgets: map[string]uint64{}, refreshing: map[accessKey]bool{},
		shares:   newShares(cfg.Shares, cfg.Metrics),
		readTime: newReadTime(cfg.Shares.TimePerSecond, cfg.Shares.TimeBurst)}
	if cfg.Pool != nil {
		e.store = store.NewReader(cfg.Pool, cfg.Shares.AcquireTimeout)
		e.searcher = search.New(search.Config{Pool: cfg.Pool, RankWindow: cfg.SearchRankWindow})
	}
	if cfg.Hot != nil {
		e.searchCache = newSearchCache(cfg.SearchCacheBytes, cfg.Metrics.Search)
	}
	if cfg.Replica != nil {
		e.replicaSearcher = search.New(search.Config{Pool: cfg.Replica.Pool(), RankWindow: cfg.SearchRankWindow})
	}
	e.windows = window.New(window.Config{Pool: cfg.Pool, Replica: cfg.Replica,
		NoReplicaReason: cfg.NoReplicaReason, Key: cfg.RelayKey, Metrics: cfg.Metrics, Logger: cfg.Logger,
		MaxBytes: cfg.MaxBytes})
	return e
}

// accessible returns the reader's accessible channels, from a 10 s cache.
func (e *Engine) accessible(ctx context.Context, sc Scope) (*Access, error) {
	ent, err := e.accessEntry(ctx, sc)
	return ent.acc, err
}

// accessEntry is accessible with the set's expiry: the cached entry, or the
// one a lookup just made.
func (e *Engine) accessEntry(ctx context.Context, sc Scope) (accessEntry, error) {
	k := accessKey{sc.CommunityID, sc.Reader}
	now := e.cfg.NowFunc()
	e.mu.Lock()
	ent, ok := e.cache[k]
	e.mu.Unlock()
	if ok && now.Before(ent.expires) {
		e.cfg.Metrics.AccessibleChannelsCacheHits.Inc()
		return ent, nil
	}
	e.cfg.Metrics.AccessibleChannelsCacheMisses.Inc()
	e.mu.Lock()
	gen := e.forgets[sc.CommunityID]
	e.mu.Unlock()
	chans, err := e.store.AccessibleChannels(ctx, sc.CommunityID, sc.Reader)
	if err != nil {
		return accessEntry{}, err
	}
	ent = accessEntry{acc: newAccess(chans), expires: now.Add(e.cfg.CacheTTL)}
	e.mu.Lock()
	e.cacheLocked(k, ent.acc, gen, now)
	e.mu.Unlock()
	return ent, nil
}

// cacheLocked stores a lookup that began at start with its community's
// Forget count then, unless a Forget ran while it did, and reports whether
// it stored it. Call it under mu.
func (e *Engine) cacheLocked(k accessKey, acc *Access, gen uint64, start time.Time) bool {
	if e.forgets[k.community] != gen { // a change was forgotten while it ran
		return false
	}
	if len(e.cache) > 100_000 {
		clear(e.cache) // bound memory; entries are cheap to rebuild
	}
	e.cache[k] = accessEntry{acc: acc, expires: start.Add(e.cfg.CacheTTL)}
	return true
}

// Background renewal of the sets live delivery uses (refreshAhead).
const (
	maxAccessRefreshes   = 4
	accessRefreshTimeout = 5 * time.Second
)

// refreshAhead renews a reader's cached set in the background once it is
// past half its lifetime (canAccess calls it only then): live delivery asks for it with every event, and
// would otherwise wait on a lookup, on the delivering goroutine, each time
// it expires. The renewed set still lives CacheTTL from its own lookup, a
// Forget during the lookup still discards it, and at most
// maxAccessRefreshes run at once; a reader not renewed in time is looked
// up on delivery as before (docs/PROTOCOL.md §5.6).
func (e *Engine) refreshAhead(sc Scope) {
	k := accessKey{sc.CommunityID, sc.Reader}
	start := e.cfg.NowFunc()
	e.mu.Lock()
	ent, ok := e.cache[k]
	if !ok || start.Before(ent.expires.Add(-e.cfg.CacheTTL/2)) || e.refreshing[k] || len(e.refreshing) >= maxAccessRefreshes {
		e.mu.Unlock()
		return
	}
	e.refreshing[k] = true
	gen := e.forgets[k.community]
	e.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), accessRefreshTimeout)
		defer cancel()
		chans, err := e.store.AccessibleChannels(ctx, sc.CommunityID, sc.Reader)
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.refreshing, k)
		outcome := "kept"
		switch {
		case err != nil:
			outcome = "failed"
			e.cfg.Logger.Warn("access refresh failed", slog.String("err", err.Error()))
		case !e.cacheLocked(k, newAccess(chans), gen, start):
			outcome = "overtaken"
		}
		e.cfg.Metrics.AccessibleChannelsRenewals.WithLabelValues(outcome).Inc()
	}()
}

// Forget drops cached accessible sets: one reader's, or with reader "" every
// entry of the community. Call it right after a commit that changes access.
//
// A lookup in flight when Forget runs may hold the set from before the
// change: it answers its own read, which began before the change was
// acknowledged, but is not cached. The count is per community, so the
// map grows with the communities only.
func (e *Engine) Forget(communityID, reader string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forgets[communityID]++
	for k := range e.cache {
		if k.community == communityID && (reader == "" || k.reader == reader) {
			delete(e.cache, k)
		}
	}
}

// confirm returns the requested channels the reader can access. Channels in
// the cached set are taken from it; the rest are confirmed with an uncached
// query, so a member added a moment ago is never refused.
func (e *Engine) confirm(ctx context.Context, sc Scope, acc *Access, requested []string) ([]string, error) {
	var out, misses []string
	seen := map[string]bool{}
	for _, r := range requested {
		r = strings.ToLower(r)
		if seen[r] {
			continue
		}
		seen[r] = true
		if acc.Has(r) {
			out = append(out, r)
		} else {
			misses = append(misses, r)
		}
	}
	// The membership cache of docs/PROTOCOL.md §11.2 is this: a named channel found
	// in the cached set is a hit, one confirmed by the uncached query a miss.
	e.cfg.Metrics.MembershipCacheHits.Add(float64(len(out)))
	e.cfg.Metrics.MembershipCacheMisses.Add(float64(len(misses)))
	if len(misses) > 0 {
		more, err := e.store.ChannelsAccessible(ctx, sc.CommunityID, sc.Reader, misses)
		if err != nil {
			return nil, err
		}
		if len(more) > 0 {
			e.Forget(sc.CommunityID, sc.Reader)
		}
		out = append(out, more...)
	}
	return out, nil
}

// canAccess reports whether the reader may read channel ch now, from the
// cache; any error answers false (fail closed). Live delivery calls it per
// recipient, and it starts the renewal of a set past half its life.
func (e *Engine) canAccess(ctx context.Context, sc Scope, ch string) bool {
	ent, err := e.accessEntry(ctx, sc)
	if err != nil {
		e.cfg.Logger.Warn("access check failed", slog.String("err", err.Error()))
		return false
	}
	if !e.cfg.NowFunc().Before(ent.expires.Add(-e.cfg.CacheTTL / 2)) {
		e.refreshAhead(sc)
	}
	return ent.acc.Has(ch)
}

// query runs one filter's history read: limit clamped to MaxLimit (absent
// means MaxLimit, 0 means nothing), kinds [] matches nothing, newest first
// with ties by ascending id, the channel scope pushed into SQL, then the
// post-filter on every row (exact NIP-01 match, accessible channel,
// per-event visibility) on the rows' raw tags (rowFilter). Each row's
// JSON is the store's, built without decoding the tags, which stay nil in
// Row.Event unless the post-filter needed them. channels and named are
// the filter's channel scope (Read.channelScope). The statement runs in
// on, a proved replica snapshot, or on the writer when on is nil. The
// caller has skipped a filter that yields nothing (Read.yieldsNothing).
//
// maxBytes above 0 stops the read after the row whose JSON takes the
// total over it (store.EventQueryParams.MaxBytes): a request's byte
// budget is never fetched far beyond.
func (e *Engine) query(ctx context.Context, on *replica.Session, sc Scope, acc *Access, f *event.Filter, channels []string, named bool, beforeID string, maxBytes int) ([]Row, error) {
	limit := MaxLimit
	if f.Limit != nil {
		limit = min(*f.Limit, MaxLimit)
	}
	p := e.params(sc, acc, f, channels, named)
	p.Limit = limit
	p.BeforeID = beforeID
	p.MaxBytes = maxBytes
	if hook := e.cfg.QueryHookFunc; hook != nil {
		if err := hook(ctx, f); err != nil {
			return nil, err
		}
	}
	var rows []store.EventRow
	var err error
	st := e.store
	if on != nil {
		st = store.New(on.Querier())
	}
	rows, err = st.EventRows(ctx, p)
	if err != nil {
		return nil, err
	}
	rf := newRowFilter(f)
	out := make([]Row, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		ok, err := rf.visible(sc, acc, r)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, Row{Event: r.Event, Channel: r.Channel, JSON: r.JSON})
		}
	}
	return out, nil
}

// params builds the store parameters of a filter's channel scope: the named
// channels only, or every accessible channel plus channel-less events,
// read up to the created-at ceiling.
func (e *Engine) params(sc Scope, acc *Access, f *event.Filter, channels []string, named bool) store.EventQueryParams {
	p := store.EventQueryParams{CommunityID: sc.CommunityID, Reader: sc.Reader, Filter: f, Ceiling: e.ceiling()}
	if named {
		p.Channels, p.ChannelOnly = channels, true
	} else {
		p.Channels = acc.List()
	}
	return p
}

// visible is the post-filter every stored row passes: the filter's exact
// NIP-01 match, a channel the reader may read (acc already holds the
// request's confirmed channels), per-event visibility.
func visible(sc Scope, acc *Access, f *event.Filter, ev *event.Event, channel string) bool {
	if !f.Matches(ev, channel) || !visibleTo(sc.Reader, ev) {
		return false
	}
	return channel == "" || acc.Has(channel)
}

// Visible is the per-recipient check of live delivery for an event that
// already matched the subscription's filter: channel access (cached, fail
// closed) and per-event visibility.
func (e *Engine) Visible(ctx context.Context, sc Scope, ev *event.Event, channel string) bool {
	if !visibleTo(sc.Reader, ev) {
		return false
	}
	if channel == "" {
		return true
	}
	return e.canAccess(ctx, sc, channel)
}

// count counts one filter's matches in its channel scope. A filter whose
// every constraint is exact in SQL uses COUNT(*); otherwise at most
// CountFallbackMaximum+1 candidates are fetched without their content and
// post-filtered, and more
// than CountFallbackMaximum answers errCountTooBroad. The caller has
// skipped a filter that matches nothing or names no accessible channel.
func (e *Engine) count(ctx context.Context, sc Scope, acc *Access, f *event.Filter, channels []string, named bool) (int64, error) {
	p := e.params(sc, acc, f, channels, named)
	if hook := e.cfg.QueryHookFunc; hook != nil {
		if err := hook(ctx, f); err != nil {
			return 0, err
		}
	}
	if fastPath(sc, f) {
		return e.store.EventCount(ctx, p)
	}
	p.Limit = CountFallbackMaximum + 1
	rows, err := e.store.EventCountCandidates(ctx, p)
	if err != nil {
		return 0, err
	}
	if len(rows) > CountFallbackMaximum {
		e.cfg.Metrics.CountFallbackRejections.Inc()
		return 0, errCountTooBroad
	}
	var n int64
	for i := range rows {
		if visible(sc, acc, f, &rows[i].Event, rows[i].Channel) {
			n++
		}
	}
	return n, nil
}

// fastPath reports whether COUNT(*) is exact for the filter (docs/PROTOCOL.md §7.8).
func fastPath(sc Scope, f *event.Filter) bool {
	for name, vals := range f.Tags {
		switch {
		case len(vals) == 0, name == "e":
		case name == "h" && allCanonicalChannels(vals):
		case name == "p" && len(vals) == 1:
		case name == "d" && allAddressable(f.Kinds):
		default:
			return false
		}
	}
	if f.CanMatchAny(event.AuthorOnly) && !allEqual(f.Authors, sc.Reader) {
		return false
	}
	if f.CanMatchAny(event.ResultGated) && !allEqual(f.Tags["p"], sc.Reader) {
		return false
	}
	return true
}

// allCanonicalChannels reports whether every value is a lowercase
// hyphenated UUID: only then is the SQL channel scope the exact "#h" match.
func allCanonicalChannels(vals []string) bool {
	for _, v := range vals {
		if id, ok := event.ChannelID(v); !ok || id != v {
			return false
		}
	}
	return true
}

func allAddressable(kinds []int) bool {
	if len(kinds) == 0 {
		return false
	}
	for _, k := range kinds {
		if !event.IsAddressable(k) {
			return false
		}
	}
	return true
}

// threadParams describe a legacy thread read on /query (docs/PROTOCOL.md §8.4).
type threadParams struct {
	Root string
	// DepthLimit above MaxThreadDepth means every depth.
	DepthLimit int
	// Cursor continues after (CursorTime, CursorID); CursorTime -1 (or
	// HasCursor false) reads from the start.
	HasCursor  bool
	CursorTime int64
	CursorID   string
	// Channels restricts the read to these channels (the filter's #h);
	// nil means every accessible channel.
	Channels []string
	Limit    int
	// IncludeAux adds the aux closure of the root and the delivered
	// replies (include_aux: true, docs/NIP-CW.md §6).
	IncludeAux bool
	// MaxBytes, above 0, is what the request's byte budget has left: the
	// read stops soon after it (store.ThreadRepliesParams.MaxBytes).
	MaxBytes int
}

// Legacy thread read limits.
const (
	threadDefaultLimit = 100
	threadMaxLimit     = 500
	maxThreadDepth     = 100
)

// threadReplies serves the legacy thread read: live replies of a root with
// depth 1..DepthLimit, oldest first, at most ThreadMaxLimit, in accessible
// channels only, each passing per-event visibility.
func (e *Engine) threadReplies(ctx context.Context, sc Scope, acc *Access, p threadParams) ([]Row, error) {
	chans := p.Channels
	if chans == nil {
		chans = acc.List()
	}
	if len(chans) == 0 {
		return nil, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = threadDefaultLimit
	}
	limit = min(limit, threadMaxLimit)
	depth := p.DepthLimit
	if depth > maxThreadDepth || depth < 0 {
		depth = maxThreadDepth
	}
	rows, err := e.store.ThreadReplies(ctx, store.ThreadRepliesParams{
		CommunityID: sc.CommunityID, Root: p.Root, MaxDepth: depth,
		HasAfter: p.HasCursor && p.CursorTime >= 0, AfterTime: p.CursorTime, AfterID: p.CursorID,
		Channels: chans, Limit: limit, MaxBytes: p.MaxBytes,
	})
	if err != nil {
		return nil, err
	}
	out := make([]Row, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		if !visibleTo(sc.Reader, &r.Event) {
			continue
		}
		out = append(out, Row{Event: r.Event, Channel: r.Channel, JSON: r.Event.AppendJSON(nil)})
	}
	return out, nil
}
