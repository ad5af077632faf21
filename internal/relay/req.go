package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/read"
	"github.com/buzz-relay/buzz/internal/wire"
)

// subscription is one REQ of one connection. Its mutable fields are guarded
// by conn.mu; keys also by index.mu.
type subscription struct {
	conn    *conn
	id      string
	filters []event.Filter
	// channels is the scope of a channel subscription; nil for a global one.
	channels map[string]struct{}
	// search marks a one-shot NIP-50 REQ: never registered in the index.
	search     bool
	closed     bool
	registered bool
	keys       []indexKey
}

// handleReq runs steps 1 and 2 of spec 10 §7.5 on the read loop, so that
// a later CLOSE or REQ with the same id supersedes this one, then the rest
// in a handler goroutine.
func (c *conn) handleReq(id string, filters []event.Filter) {
	pubkey, ok := c.identity()
	if !ok {
		c.mu.Lock()
		c.enqueueLocked(wire.Notice(wire.MsgAuthBeforeSub), false)
		c.enqueueLocked(wire.Closed(id, wire.MsgNotAuthenticated), false)
		c.mu.Unlock()
		return
	}
	if !c.srv.acquire() {
		c.auditRateLimited()
		c.reply(wire.Closed(id, wire.MsgRateLimited))
		return
	}
	c.mu.Lock()
	old := c.subs[id]
	if old == nil && len(c.subs) >= MaxSubscriptions {
		c.enqueueLocked(wire.Closed(id, wire.MsgTooManySubs), false)
		c.mu.Unlock()
		c.srv.releasePermit()
		return
	}
	if old != nil {
		c.dropLocked(old) // replaced silently
	}
	sub := &subscription{conn: c, id: id, filters: filters}
	c.subs[id] = sub
	c.mu.Unlock()
	c.goHandler(func() { c.runReq(sub, pubkey) })
}

// current reports whether sub is still the connection's subscription of its
// id and not closed. c.mu must be held.
func (c *conn) currentLocked(sub *subscription) bool {
	return !sub.closed && c.subs[sub.id] == sub
}

// dropLocked removes sub from the connection and the index. c.mu must be held.
func (c *conn) dropLocked(sub *subscription) {
	sub.closed = true
	if c.subs[sub.id] == sub {
		delete(c.subs, sub.id)
	}
	if sub.registered {
		c.srv.idx.remove(sub)
		sub.registered = false
		c.srv.subRemoved()
	}
}

// closeSub ends sub with ["CLOSED",id,msg] unless a CLOSE or a newer REQ
// already replaced it.
func (c *conn) closeSub(sub *subscription, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) {
		return
	}
	c.dropLocked(sub)
	c.enqueueLocked(wire.Closed(sub.id, msg), false)
}

// sendSub queues frame for sub if it is still current; it reports whether
// the frame was queued.
func (c *conn) sendSub(sub *subscription, frame []byte, ephemeral bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) {
		return false
	}
	return c.enqueueLocked(frame, ephemeral)
}

// runReq is steps 3–12 of spec 10 §7.5.
func (c *conn) runReq(sub *subscription, pubkey string) {
	filters := sub.filters
	log := c.log.With(slog.String("pubkey", pubkey), slog.String("sub_id", sub.id))
	if read.ExplicitChannels(filters) > read.MaxExplicitChannels {
		c.closeSub(sub, wire.MsgTooManyChannels)
		return
	}
	sc := read.Scope{CommunityID: c.tenant.CommunityID, Reader: pubkey}
	acc, err := c.srv.cfg.Reader.Accessible(c.ctx, sc)
	if err != nil {
		log.Error("resolve accessible channels", slog.Any("err", err))
		c.closeSub(sub, wire.MsgDatabaseError)
		return
	}
	requested := requestedChannels(filters)
	var confirmed []string
	if len(requested) > 0 {
		confirmed, err = c.srv.cfg.Reader.Confirm(c.ctx, sc, acc, requested)
		if err != nil {
			log.Error("confirm channels", slog.Any("err", err))
			c.closeSub(sub, wire.MsgDatabaseError)
			return
		}
		acc = widen(acc, confirmed)
	}
	var channels map[string]struct{}
	if read.IsChannelSubscription(filters) {
		if len(confirmed) == 0 {
			c.closeSub(sub, wire.MsgNotChannelMember)
			return
		}
		channels = make(map[string]struct{}, len(confirmed))
		for _, ch := range confirmed {
			channels[ch] = struct{}{}
		}
	} else if msg := read.Gate(pubkey, filters, read.SurfaceREQ); msg != "" {
		c.closeSub(sub, msg)
		return
	}
	searches := 0
	for i := range filters {
		if filters[i].Search != nil {
			searches++
		}
	}
	if searches > 0 && searches < len(filters) {
		c.closeSub(sub, wire.MsgMixedSearch)
		return
	}
	search := searches > 0

	// Register before reading history, so an event committed meanwhile is
	// delivered live rather than lost.
	c.mu.Lock()
	if !c.currentLocked(sub) {
		c.mu.Unlock()
		return
	}
	sub.channels = channels
	sub.search = search
	if !search {
		c.srv.idx.add(sub)
		sub.registered = true
		c.srv.subAdded()
	}
	c.mu.Unlock()

	if search {
		if !c.searchHistory(sub, sc, acc, log) {
			return
		}
	} else if !c.history(sub, sc, acc, log) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.currentLocked(sub) {
		return
	}
	c.enqueueLocked(wire.EOSE(sub.id), false)
	if search {
		delete(c.subs, sub.id) // one-shot: done
		sub.closed = true
	}
}

// history sends the stored events of every filter in filter order, with up
// to historyParallelism queries in flight, de-duplicated by id. It reports
// whether the REQ should go on to EOSE; on a database error it has already
// closed the subscription.
func (c *conn) history(sub *subscription, sc read.Scope, acc *read.Access, log *slog.Logger) bool {
	type result struct {
		rows []read.Row
		err  error
		done chan struct{}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	filters := sub.filters
	results := make([]result, len(filters))
	slots := make(chan struct{}, historyParallelism)
	for i := range filters {
		results[i].done = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(results[i].done)
			f := &filters[i]
			if yieldsNothing(f) {
				return
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				results[i].err = ctx.Err()
				return
			}
			defer func() { <-slots }()
			results[i].rows, results[i].err = c.srv.cfg.Reader.Query(ctx, sc, acc, f, read.QueryOptions{})
		}()
	}
	seen := make(map[string]struct{})
	for i := range results {
		r := &results[i]
		select {
		case <-r.done:
		case <-c.ctx.Done():
			return false
		}
		if r.err != nil {
			if c.ctx.Err() != nil {
				return false
			}
			if sub.search {
				// A relevance search never promises a complete page: end
				// this filter and still answer EOSE (spec 20 §7).
				log.Warn("search history failed", slog.Any("err", r.err))
				continue
			}
			log.Error("read history", slog.Any("err", r.err))
			c.closeSub(sub, wire.MsgDatabaseError)
			return false
		}
		for j := range r.rows {
			row := &r.rows[j]
			if _, dup := seen[row.Event.ID]; dup {
				continue
			}
			js := row.JSON
			if js == nil {
				js = row.Event.AppendJSON(nil)
			}
			if !c.sendSub(sub, wire.EventFrame(sub.id, js), false) {
				return false
			}
			seen[row.Event.ID] = struct{}{}
		}
	}
	return true
}

// SearchDeadline bounds a whole search REQ, the statement in flight
// included; when it passes the REQ ends with EOSE (20-search.md §4.2).
const SearchDeadline = 15 * time.Second

// searchReader is the read engine's NIP-50 branch. A Reader without it
// serves search filters through Query.
type searchReader interface {
	Search(ctx context.Context, sc read.Scope, acc *read.Access, f *event.Filter, opt read.SearchOptions) ([]read.Row, error)
}

// searchHistory runs the filters of a one-shot search REQ in order
// (20-search.md §4): each filter's accepted hits in rank order, an id sent
// for an earlier filter neither sent again nor counted, and a failure —
// logged without the search text — ends only that filter. It reports
// whether the REQ should go on to EOSE.
func (c *conn) searchHistory(sub *subscription, sc read.Scope, acc *read.Access, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(c.ctx, SearchDeadline)
	defer cancel()
	seen := make(map[string]struct{})
	current := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.currentLocked(sub)
	}
	sr, native := c.srv.cfg.Reader.(searchReader)
	for i := range sub.filters {
		f := &sub.filters[i]
		if yieldsNothing(f) {
			continue
		}
		var (
			rows []read.Row
			err  error
		)
		if native {
			// Search de-duplicates after acceptance through seen.
			rows, err = sr.Search(ctx, sc, acc, f, read.SearchOptions{Seen: seen, ContinueFunc: current})
		} else {
			rows, err = c.srv.cfg.Reader.Query(ctx, sc, acc, f, read.QueryOptions{})
		}
		for j := range rows {
			if !native {
				if _, dup := seen[rows[j].Event.ID]; dup {
					continue
				}
				seen[rows[j].Event.ID] = struct{}{}
			}
			js := rows[j].JSON
			if js == nil {
				js = rows[j].Event.AppendJSON(nil)
			}
			if !c.sendSub(sub, wire.EventFrame(sub.id, js), false) {
				return false
			}
		}
		if err != nil {
			if c.ctx.Err() != nil {
				return false
			}
			attrs := []any{slog.String("transport", "ws"), slog.Int("filter", i), slog.Int("text_len", len(*f.Search))}
			var se *read.SearchError
			if errors.As(err, &se) {
				attrs = append(attrs, slog.Int64("page", se.Page))
			}
			log.Warn(err.Error(), attrs...)
			if ctx.Err() != nil {
				break // the REQ deadline passed: EOSE with what was sent
			}
		}
		if !current() {
			return false
		}
	}
	return true
}

// yieldsNothing reports filters that run no query: kinds [], limit 0, or a
// blank search.
func yieldsNothing(f *event.Filter) bool {
	if f.MatchesNothing() || (f.Limit != nil && *f.Limit == 0) {
		return true
	}
	return f.Search != nil && read.SearchText(*f.Search) == ""
}

// requestedChannels returns the distinct "#h" values of all filters.
func requestedChannels(filters []event.Filter) []string {
	var out []string
	seen := make(map[string]struct{})
	for i := range filters {
		for _, ch := range filters[i].Tags["h"] {
			if _, ok := seen[ch]; !ok {
				seen[ch] = struct{}{}
				out = append(out, ch)
			}
		}
	}
	return out
}

// widen returns acc plus the confirmed channels a stale cache missed.
func widen(acc *read.Access, confirmed []string) *read.Access {
	missing := false
	for _, ch := range confirmed {
		if !acc.Has(ch) {
			missing = true
			break
		}
	}
	if !missing {
		return acc
	}
	return read.NewAccess(append(acc.List(), confirmed...))
}
