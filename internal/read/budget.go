package read

import "sync"

// byteBudget is what one request may hand over, in stored JSON bytes
// across all its filters (Config.MaxBytes, BUZZ_READ_MAX_BYTES): a REQ's
// history or a /query answer. When the next event would take the total
// over it the read stops at that whole event, in the order it sends, and
// ends normally (EOSE, a complete JSON array); a client pages on with
// until, as NIP-01 allows. The first event is always handed over, so an
// event larger than the budget (stored before the event size limit was
// lowered) never blocks paging.
//
// A store read fetches no more than the budget leaves (fetchCap): for a
// REQ's history, whose filters are read in parallel and handed over in
// filter order, that is the budget less what was handed over and what the
// earlier filters hold fetched but not yet handed over (held). Earlier
// filters' rows are sent first, so the cap never cuts what the budget
// would let through, except by the bytes of rows an earlier filter
// already sent (an overlap of filters): that answer ends before the
// budget, never after it. The fields are shared by the history queries
// and the goroutine that emits, under mu.
type byteBudget struct {
	max int64 // 0: no budget

	mu    sync.Mutex
	used  int64
	sent  int64
	spent bool    // an event was refused: the read is over
	held  []int64 // per history filter: fetched, not yet handed over
}

// admit charges an event of n bytes of history filter i (-1 for none)
// and reports whether it may be handed over.
func (b *byteBudget) admit(n, i int) bool {
	if b.max <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sent > 0 && b.used+int64(n) > b.max {
		b.spent = true
		return false
	}
	b.used += int64(n)
	b.sent++
	if i >= 0 && i < len(b.held) {
		b.held[i] -= int64(n)
	}
	return true
}

// charge counts n bytes handed over without judging them: the events of
// a NIP-CW window, which is served whole or not at all.
func (b *byteBudget) charge(n int) {
	b.mu.Lock()
	b.used += int64(n)
	b.sent++
	b.mu.Unlock()
}

// isSpent reports whether an event was refused.
func (b *byteBudget) isSpent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// fetchCap is the MaxBytes of the next store read of filter i (-1 for a
// read that runs alone): the bytes still left, at least 1 so the store
// always returns the row that tells the budget is spent; 0 (no cap)
// without a budget.
func (b *byteBudget) fetchCap(i int) int {
	if b.max <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	left := b.max - b.used
	for k := 0; k < i && k < len(b.held); k++ {
		left -= b.held[k]
	}
	return int(max(left, 1))
}

// holdFilters makes room for the held bytes of n history filters.
func (b *byteBudget) holdFilters(n int) {
	if b.max > 0 {
		b.held = make([]int64, n)
	}
}

// hold records the rows history filter i fetched.
func (b *byteBudget) hold(i int, rows []Row) {
	if b.max <= 0 {
		return
	}
	var n int64
	for k := range rows {
		n += int64(len(rows[k].JSON))
	}
	b.mu.Lock()
	b.held[i] = n
	b.mu.Unlock()
}

// release forgets what history filter i still holds once it was handed
// over: the rows an earlier filter already sent.
func (b *byteBudget) release(i int) {
	if b.max <= 0 {
		return
	}
	b.mu.Lock()
	b.held[i] = 0
	b.mu.Unlock()
}

// wrap returns emit behind the budget, for the events of history filter
// i (-1 for none): an event over it ends the read.
func (b *byteBudget) wrap(i int, emit func(Row) bool) func(Row) bool {
	if b.max <= 0 {
		return emit
	}
	return func(row Row) bool {
		if !b.admit(len(row.JSON), i) {
			return false
		}
		return emit(row)
	}
}
