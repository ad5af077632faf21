package read

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/wire"
)

// Surface is the door a read request came through. Every decision that
// differs between the doors (which refusals apply, in which order, with
// which text) is keyed on it here, never in the doors.
type Surface int

const (
	// SurfaceREQ is a WebSocket REQ: history, then live delivery.
	SurfaceREQ Surface = iota
	// SurfaceCOUNT is a WebSocket COUNT (NIP-45).
	SurfaceCOUNT
	// SurfaceQuery is the HTTP bridge's POST /query.
	SurfaceQuery
	// SurfaceCountHTTP is the HTTP bridge's POST /count.
	SurfaceCountHTTP
	// SurfaceNEG is a WebSocket NEG-OPEN (NIP-77): the set a REQ with the
	// same filters could return, without its limit (records.go).
	SurfaceNEG
)

// Request is one whole read: who reads where, through which door, what.
type Request struct {
	Scope
	Surface Surface
	// Filters are the parsed filters, extension fields in Extra.
	Filters []event.Filter
	// Log carries the door's request attributes (pubkey, sub_id); nil uses
	// the engine's logger.
	Log *slog.Logger
	// Host is the request's normalised host (SurfaceQuery: thread windows
	// bind it into their bounds).
	Host string
	// Threads is the thread-window opt-in scan of a /query body
	// (Engine.ScanThreadWindows), made before its filters were parsed.
	Threads ThreadWindows
	// ContinueFunc, when set, is asked between the pages of a search REQ;
	// false stops it (the subscription was closed or replaced).
	ContinueFunc func() bool
	// Conn names the connection the read came through, for its share of
	// concurrent reads (share.go): one WebSocket, or one HTTP client
	// address. "" shares nothing per connection.
	Conn string
}

// Code classifies a Refusal so each door maps it through one table.
type Code int

// Refusal codes, in no particular order.
const (
	// CodeTooManyChannels: more than MaxExplicitChannels "#h" values.
	CodeTooManyChannels Code = iota + 1
	// CodeGated: the p-gate, the engram gate or the author-only gate.
	CodeGated
	// CodeNotChannelMember: a REQ whose every filter names channels, none
	// of them accessible.
	CodeNotChannelMember
	// CodeMixedSearch: search and non-search filters in one request.
	CodeMixedSearch
	// CodeSearchInCount: a search filter in a count.
	CodeSearchInCount
	// CodeCountTooBroad: the count fallback would exceed its candidate cap.
	CodeCountTooBroad
	// CodeInvalidFilter: a malformed bridge extension field (before_id,
	// thread cursors).
	CodeInvalidFilter
	// CodeFilterCap: a filter array or its tag keys over Config.Caps
	// (caps.go).
	CodeFilterCap
	// CodeTooManyReads: a share of concurrent reads (process, connection,
	// pubkey) stayed full for the acquire timeout.
	CodeTooManyReads
	// CodeReadTimeout: the read passed its deadline.
	CodeReadTimeout
	// CodeReadTime: the reader's read-time budget is spent (readtime.go);
	// RetryAfter says when it is not.
	CodeReadTime
	// CodeSearchInNeg: a search filter in a NEG-OPEN.
	CodeSearchInNeg
	// CodeNegTooManyRecords: a NEG-OPEN matching more events than its
	// maximum (records.go).
	CodeNegTooManyRecords
)

// Refusal is the read door's answer to a request it will not serve. Reason
// is the exact client text with its NIP-01 prefix where it has one; Text is
// the same without the prefix.
type Refusal struct {
	Code   Code
	Reason string
	// RetryAfter is, when above 0, the whole seconds after which the same
	// request may be served (the bridge's Retry-After).
	RetryAfter int
}

func (r *Refusal) Error() string { return r.Reason }

// Text returns the reason without its machine-readable prefix.
func (r *Refusal) Text() string {
	for _, p := range []string{wire.Restricted, wire.Error, wire.Invalid, wire.Blocked, wire.RateLimited} {
		if rest, ok := strings.CutPrefix(r.Reason, p+": "); ok {
			return rest
		}
	}
	return r.Reason
}

func refuse(code Code, reason string) *Refusal { return &Refusal{Code: code, Reason: reason} }

// Read is a request the door decided to serve: gates passed, scope
// resolved. Rows or Count executes it; a Read is used once, by one goroutine.
type Read struct {
	e   *Engine
	req Request
	log *slog.Logger
	// acc is the reader's accessible channels, widened by the confirmed
	// requested channels a stale cache missed.
	acc *Access
	// confirmed holds the requested "#h" channels the reader may read.
	confirmed map[string]struct{}
	// opts holds each filter's parsed bridge extensions (SurfaceQuery).
	opts []filterOptions
	// Channels is the scope of a channel subscription (a REQ whose every
	// filter has "#h"): the confirmed channels. Nil for a global read.
	Channels []string
	// Search marks a one-shot NIP-50 read: a REQ that is never registered
	// for live delivery.
	Search bool
	// degraded is set at the first replica doubt: the rest of the request
	// reads from the writer (route.go).
	degraded atomic.Bool
	// thread marks a NIP-CW thread-window batch (windows.go).
	thread bool
	// grant is the read's shares of concurrent reads; deadline is when the
	// read times out (zero: never). Both are set by Open (share.go).
	grant    *grant
	deadline time.Time
	// budget is the request's byte budget (budget.go).
	budget byteBudget
}

// Open is the read door: every decision about what the reader may see and
// how the request runs is taken here, in the order each surface defines.
//
//	REQ          caps → cap → scope → channel subscription needs a confirmed channel,
//	             a global REQ passes the gates → no mixed search
//	NEG          as REQ, then no search at all
//	COUNT        caps → cap → gates → no search → scope
//	/count       caps → cap → gates* → no search → scope
//	/query       caps → extension fields → cap → gates* → thread batch, or
//	             no mixed search → scope
//
//	* on the bridge a legacy thread read is judged as naming the thread kinds
//
// where caps are the filter caps of Config.Caps (caps.go), checked before
// anything that grows with a filter, cap is at most MaxExplicitChannels
// "#h" values across filters and
// scope loads the reader's accessible channels and confirms the requested
// ones (a cache miss is confirmed uncached, so a member added a moment ago
// is never refused). It returns a *Refusal for a request it will not serve
// and any other error for a database failure (the door answers that as its
// internal error).
//
// A read that is served holds a share of concurrent reads until Close and
// has a deadline: the caller calls Close once it is done with it, whatever
// happened. A share that stays full for the acquire timeout refuses the
// read (CodeTooManyReads), a deadline that passes ends it
// (CodeReadTimeout), in Open or in Rows and Count.
func (e *Engine) Open(ctx context.Context, req Request) (*Read, error) {
	// The channel cap comes first on every surface but /query (whose
	// extension fields are judged before it): such a request takes no share.
	if explicitChannels(req.Filters) > MaxExplicitChannels && req.Surface != SurfaceQuery {
		return nil, refuse(CodeTooManyChannels, wire.MsgTooManyChannels)
	}
	g, deadline, err := e.admit(ctx, req.Conn, req.Reader)
	if err != nil {
		return nil, err
	}
	octx, cancel := withDeadline(ctx, deadline)
	defer cancel()
	r, err := e.open(octx, req)
	if err != nil {
		g.close()
		return nil, (&Read{e: e, req: req, deadline: deadline}).finish(ctx, err)
	}
	r.grant, r.deadline = g, deadline
	return r, nil
}

// admit is what every read pays before it touches the database: a share
// for (conn, pubkey), then its reader's read time (the pubkey, or the
// connection for an anonymous read), judged when the share is granted: a
// read that waited for its share while the reader's earlier reads ran is
// judged on what they cost, not on the budget it found when it arrived.
// The read's deadline runs from the grant. The caller closes the grant
// once the read is done.
func (e *Engine) admit(ctx context.Context, conn, pubkey string) (*grant, time.Time, error) {
	reader := pubkey
	if reader == "" {
		reader = conn
	}
	if err := e.shares.acquire(ctx, conn, pubkey); err != nil {
		return nil, time.Time{}, err
	}
	reserved, retry, ok := e.readTime.start(reader)
	if !ok {
		e.shares.release(conn, pubkey, 1)
		e.cfg.Metrics.Reads.ShareRejections.WithLabelValues(scopeReadTime).Inc()
		return nil, time.Time{}, &Refusal{Code: CodeReadTime, Reason: wire.QuotaExceeded(retry), RetryAfter: retry}
	}
	g := &grant{s: e.shares, conn: conn, pubkey: pubkey, n: 1,
		rt: e.readTime, reader: reader, reserved: reserved, start: time.Now()}
	var deadline time.Time
	if t := e.cfg.Shares.Timeout; t > 0 {
		deadline = time.Now().Add(t)
	}
	return g, deadline, nil
}

// Background takes one of the process's read shares for a read the relay
// makes on its own behalf, the hot window's warm (docs/ARCHITECTURE.md
// "Hot window"): it waits like any read, is judged in the process scope
// only (no connection, no pubkey, no read time), and so can never take a
// connection the shares leave to ingest. release gives the share back.
func (e *Engine) Background(ctx context.Context) (release func(), err error) {
	if err := e.shares.acquire(ctx, "", ""); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { e.shares.release("", "", 1) }) }, nil
}

// Close gives back the read's shares. It may be called more than once, and
// on a nil Read.
func (r *Read) Close() {
	if r != nil {
		r.grant.close()
	}
}

// open is Open once the share is held.
func (e *Engine) open(ctx context.Context, req Request) (*Read, error) {
	r := &Read{e: e, req: req, log: req.Log}
	r.budget.max = int64(e.cfg.MaxBytes)
	if r.log == nil {
		r.log = e.cfg.Logger
	}
	filters := req.Filters
	if ref, which := e.cfg.Caps.checkCaps(filters); ref != nil {
		e.cfg.Metrics.FilterCapRefusals.WithLabelValues(which).Inc()
		return nil, ref
	}
	// The /query modes are recognised here, before any plain-read rule: a
	// NIP-CW thread-window batch was scanned by the caller
	// (ScanThreadWindows) and is opened after the generic gates; channel
	// windows and summary recovery are parsed now, with the plain
	// extension fields of every other filter.
	if req.Surface == SurfaceQuery {
		if err := r.parseQueryOptions(); err != nil {
			return nil, err
		}
	}
	if explicitChannels(filters) > MaxExplicitChannels {
		return nil, refuse(CodeTooManyChannels, wire.MsgTooManyChannels)
	}
	switch req.Surface {
	case SurfaceREQ, SurfaceNEG:
		if err := r.resolveScope(ctx); err != nil {
			return nil, err
		}
		if isChannelSubscription(filters) {
			if len(r.Channels) == 0 {
				return nil, refuse(CodeNotChannelMember, wire.MsgNotChannelMember)
			}
		} else {
			r.Channels = nil
			if msg := gate(req.Reader, filters, SurfaceREQ); msg != "" {
				return nil, refuse(CodeGated, msg)
			}
		}
		if req.Surface == SurfaceNEG {
			for i := range filters {
				if filters[i].Search != nil {
					return nil, refuse(CodeSearchInNeg, wire.MsgSearchInNeg)
				}
			}
		}
		if err := r.searchOnly(); err != nil {
			return nil, err
		}
		return r, nil
	case SurfaceCOUNT, SurfaceCountHTTP:
		judged := filters
		if req.Surface == SurfaceCountHTTP {
			judged = judgedFilters(filters)
		}
		if msg := gate(req.Reader, judged, req.Surface); msg != "" {
			return nil, refuse(CodeGated, msg)
		}
		for i := range filters {
			if filters[i].Search != nil {
				return nil, refuse(CodeSearchInCount, wire.MsgSearchInCount)
			}
		}
		if err := r.resolveScope(ctx); err != nil {
			return nil, err
		}
		r.Channels = nil
		return r, nil
	default: // SurfaceQuery
		if msg := gate(req.Reader, judgedFilters(filters), req.Surface); msg != "" {
			return nil, refuse(CodeGated, msg)
		}
		if req.Threads.opted > 0 {
			return r.openThreadBatch()
		}
		if err := r.searchOnly(); err != nil {
			return nil, err
		}
		if err := r.resolveScope(ctx); err != nil {
			return nil, err
		}
		r.Channels = nil
		return r, nil
	}
}

// parseQueryOptions parses each /query filter's extension fields by its
// route, the summary-recovery id total first (docs/NIP-CW.md §4).
// A thread batch has none: its filters were parsed by the scan.
func (r *Read) parseQueryOptions() error {
	filters := r.req.Filters
	r.opts = make([]filterOptions, len(filters))
	if r.req.Threads.opted > 0 {
		return nil
	}
	if err := r.e.checkResolveTotal(filters); err != nil {
		return err
	}
	for i := range filters {
		f := &filters[i]
		switch routeOf(f) {
		case routeResolveRoots, routeChannelWindow:
			w, err := r.e.parseWindow(f)
			if err != nil {
				return err
			}
			r.opts[i].window = w
		default:
			opt, err := parsePlainOptions(f)
			if err != nil {
				return err
			}
			r.opts[i] = opt
		}
	}
	return nil
}

// searchOnly sets Search when every filter is a search filter and refuses
// a mix of search and non-search filters.
func (r *Read) searchOnly() error {
	searches := 0
	for i := range r.req.Filters {
		if r.req.Filters[i].Search != nil {
			searches++
		}
	}
	if searches > 0 && searches < len(r.req.Filters) {
		return refuse(CodeMixedSearch, wire.MsgMixedSearch)
	}
	r.Search = searches > 0
	return nil
}

// resolveScope loads the reader's accessible channels and confirms every
// distinct "#h" value of the request once.
func (r *Read) resolveScope(ctx context.Context) error {
	acc, err := r.e.accessible(ctx, r.req.Scope)
	if err != nil {
		return fmt.Errorf("resolve accessible channels: %w", err)
	}
	r.acc, r.confirmed = acc, map[string]struct{}{}
	var requested []string
	seen := map[string]struct{}{}
	for i := range r.req.Filters {
		for _, ch := range r.req.Filters[i].Tags["h"] {
			if _, dup := seen[ch]; !dup {
				seen[ch] = struct{}{}
				requested = append(requested, ch)
			}
		}
	}
	if len(requested) == 0 {
		return nil
	}
	ok, err := r.e.confirm(ctx, r.req.Scope, acc, requested)
	if err != nil {
		return fmt.Errorf("confirm requested channels: %w", err)
	}
	for _, ch := range ok {
		r.confirmed[ch] = struct{}{}
	}
	r.Channels = ok
	r.acc = widen(acc, ok)
	return nil
}

// channelScope is the one narrowing decision of every surface: the
// channels a filter's "#h" names that the reader may read. named is false
// for a filter without "#h" (every accessible channel, and channel-less
// events); a named filter with no channel left yields nothing and issues
// no SQL.
func (r *Read) channelScope(f *event.Filter) (channels []string, named bool) {
	hs := f.Tags["h"]
	if len(hs) == 0 {
		return nil, false
	}
	seen := make(map[string]struct{}, len(hs))
	for _, h := range hs {
		ch := strings.ToLower(h)
		if _, ok := r.confirmed[ch]; !ok {
			continue
		}
		if _, dup := seen[ch]; !dup {
			seen[ch] = struct{}{}
			channels = append(channels, ch)
		}
	}
	return channels, true
}

// yieldsNothing reports filters that run no query: kinds [], limit 0, a
// blank search, or named channels none of which is accessible.
func (r *Read) yieldsNothing(f *event.Filter) bool {
	if f.MatchesNothing() || (f.Limit != nil && *f.Limit == 0) {
		return true
	}
	if f.Search != nil && searchText(*f.Search) == "" {
		return true
	}
	chans, named := r.channelScope(f)
	return named && len(chans) == 0
}

// judgedFilters returns the filters as the gates judge them on /query: a
// legacy thread read without kinds returns replies from thread_metadata,
// which only thread kinds have, so it is judged as naming them (like a
// search filter without kinds, it is then not gated).
func judgedFilters(filters []event.Filter) []event.Filter {
	judged := filters
	for i := range filters {
		if routeOf(&filters[i]) == routeLegacyThread && filters[i].Kinds == nil {
			if &judged[0] == &filters[0] {
				judged = append([]event.Filter(nil), filters...)
			}
			judged[i].Kinds = threadKinds
		}
	}
	return judged
}

// threadKinds are the kinds that have thread rows.
var threadKinds = []int{event.KindStreamMessage, event.KindStreamMessage2, event.KindForumPost, event.KindForumComment}

// widen returns acc plus the confirmed channels a stale cache missed.
func widen(acc *Access, confirmed []string) *Access {
	for _, ch := range confirmed {
		if !acc.Has(ch) {
			return newAccess(append(acc.List(), confirmed...))
		}
	}
	return acc
}
