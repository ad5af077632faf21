package window

import (
	"context"
	"log/slog"
	"time"
)

// ThreadRequest is one thread window after strict parsing and
// normalisation (docs/NIP-CW.md §5.1): defaults applied, channel
// canonical, ids lowercase, kinds sorted and unique.
type ThreadRequest struct {
	Channel    string
	Root       string
	Limit      int
	Depth      int
	Kinds      []int
	Cursor     *Cursor
	IncludeAux bool
}

// Batch is one /query request's thread windows, 1 to 4, in request order.
type Batch struct {
	CommunityID string
	// Host is the normalised host of the request's community binding.
	Host string
	// Reader is the authenticated pubkey, lowercase hex.
	Reader  string
	Windows []ThreadRequest
}

// Threads serves a thread-window batch (docs/NIP-CW.md §5.2, §5.3): for
// each served window its rows, its aux, its bounds, in request order. The
// reader's accessible channels are read from the writer before and after
// the windows are built (thread_access.go); every page shares one budget
// (budget.go). Any failure is an *Error and nothing of the batch is
// returned.
func (e *Engine) Threads(ctx context.Context, b Batch) ([]Item, error) {
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, e.cfg.Deadline)
	defer cancel()
	run := &batch{e: e, communityID: b.CommunityID, host: b.Host, reader: b.Reader, routes: map[string]int{},
		spend: threadBudget(),
		log:   e.log.With(slog.String("community_id", b.CommunityID), slog.String("pubkey", b.Reader))}
	items, sizes, served, err := run.serve(bctx, b.Windows)
	return run.finish(ctx, bctx, len(b.Windows), served, items, sizes, err, start)
}
