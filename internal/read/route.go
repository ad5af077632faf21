package read

import (
	"context"
	"maps"

	"github.com/buzz-relay/buzz/internal/event"
	"github.com/buzz-relay/buzz/internal/replica"
)

// The read replica's share of Rows (docs/PROTOCOL.md §16.6). The door (Open) has
// decided what the request reads; this file only decides where one
// filter's statements run. The replica may serve:
//
//	plain REQ history filter, plain /query filter   "#h" and an until
//	search page (REQ, /query: FTS and hydration)     the same
//
// "#h" confines the read to channel rows, which the created_at floor
// covers; replica.Read then proves until ≤ safe_through in the snapshot
// it reads from, with both 30 s freshness rules. Everything else stays on
// the writer: COUNT and /count (Count never routes), head pages (no
// until, or until above what this process has proved), channel-less
// filters, legacy thread reads, and every authorization read of Open
// (accessible channels, channel confirmation). After the first doubt the
// rest of the request stays on the writer too.

// replicaBound reports whether filter f may be read from the replica, and
// its bound.
func (r *Read) replicaBound(f *event.Filter) (until int64, ok bool) {
	if r.e.cfg.Replica == nil || r.degraded.Load() || f.Until == nil || len(f.Tags["h"]) == 0 {
		return 0, false
	}
	return *f.Until, true
}

// onReplica runs run in a proved replica snapshot when f may use one and
// reports whether it did. false means the caller runs the read on the
// writer: f was not the replica's to serve, or the replica was doubted
// (run's results are dropped, and the request stays on the writer from
// now on). The error is non-nil only when ctx ended.
func (r *Read) onReplica(ctx context.Context, f *event.Filter, run func(*replica.Session) error) (bool, error) {
	until, ok := r.replicaBound(f)
	if !ok {
		return false, nil
	}
	route, err := r.e.cfg.Replica.Read(ctx, until, run)
	if err != nil {
		return false, err
	}
	if route == replica.RouteDoubt {
		r.degraded.Store(true)
	}
	return route == replica.RouteReplica, nil
}

// plain is one filter's plain history read in the request's scope, on
// the replica when it may serve it, fetching rows up to maxBytes of JSON
// (0: no cap), what the request's byte budget leaves it.
func (r *Read) plain(ctx context.Context, f *event.Filter, beforeID string, maxBytes int) ([]Row, error) {
	chans, named := r.channelScope(f)
	var rows []Row
	served, err := r.onReplica(ctx, f, func(s *replica.Session) error {
		var err error
		rows, err = r.e.query(ctx, s, r.req.Scope, r.acc, f, chans, named, beforeID, maxBytes)
		return err
	})
	if served || err != nil {
		return rows, err
	}
	return r.e.query(ctx, nil, r.req.Scope, r.acc, f, chans, named, beforeID, maxBytes)
}

// search is one search filter, on the replica when it may serve it. The
// replica's run accepts into a copy of opt.Seen and tallies its hit
// metrics, both kept only when it served, so a doubted run leaves no trace
// in the request's dedupe or in buzz_search_hits_total.
func (r *Read) search(ctx context.Context, f *event.Filter, chans []string, named bool, opt searchOptions) ([]Row, error) {
	var rows []Row
	seen := maps.Clone(opt.Seen)
	var tally map[hitKey]int
	served, err := r.onReplica(ctx, f, func(s *replica.Session) error {
		o := opt
		tally = map[hitKey]int{} // a fresh one per attempt
		o.on, o.Seen, o.tally = s, seen, tally
		var err error
		rows, err = r.e.searchFilter(ctx, r.req.Scope, r.acc, f, chans, named, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	if served {
		maps.Copy(opt.Seen, seen)
		r.e.countHits(tally)
		return rows, nil
	}
	return r.e.searchFilter(ctx, r.req.Scope, r.acc, f, chans, named, opt)
}
