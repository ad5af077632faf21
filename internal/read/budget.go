package read

import "sync/atomic"

// byteBudget is what one request may hand over, in stored JSON bytes
// across all its filters (Config.MaxBytes, BUZZ_READ_MAX_BYTES): a REQ's
// history or a /query answer. When the next event would take the total
// over it the read stops at that whole event, in the order it sends, and
// ends normally (EOSE, a complete JSON array); a client pages on with
// until, as NIP-01 allows. The first event is always handed over, so an
// event larger than the budget (stored before the event size limit was
// lowered) never blocks paging. used is written by the goroutine that
// emits and read by the history queries, which fetch no more than what
// is left (fetchCap).
type byteBudget struct {
	max  int64 // 0: no budget
	used atomic.Int64
	sent atomic.Int64
	// spent is set once an event was refused: the read is over.
	spent atomic.Bool
}

// admit charges an event of n bytes and reports whether it may be handed
// over.
func (b *byteBudget) admit(n int) bool {
	if b.max <= 0 {
		return true
	}
	if b.sent.Load() > 0 && b.used.Load()+int64(n) > b.max {
		b.spent.Store(true)
		return false
	}
	b.charge(n)
	return true
}

// charge counts n bytes handed over without judging them: the events of
// a NIP-CW window, which is served whole or not at all.
func (b *byteBudget) charge(n int) {
	b.used.Add(int64(n))
	b.sent.Add(1)
}

// fetchCap is the MaxBytes of the next store read: the bytes still left,
// at least 1 so the store always returns the row that tells the budget
// is spent. 0 (no cap) without a budget.
func (b *byteBudget) fetchCap() int {
	if b.max <= 0 {
		return 0
	}
	return int(max(b.max-b.used.Load(), 1))
}

// wrap returns emit behind the budget: an event over it ends the read.
func (b *byteBudget) wrap(emit func(Row) bool) func(Row) bool {
	if b.max <= 0 {
		return emit
	}
	return func(row Row) bool {
		if !b.admit(len(row.JSON)) {
			return false
		}
		return emit(row)
	}
}
