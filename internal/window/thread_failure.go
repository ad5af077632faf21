package window

import (
	"context"
	"errors"
	"net/http"

	"github.com/buzz-relay/buzz/internal/pg"
)

// The 503 and 500 texts of docs/NIP-CW.md §5.3, docs/NIP-CW.md §5.7 and
// docs/NIP-CW.md §8.
const (
	msgAuthChanged    = "thread authorization changed; retry query"
	msgRowAuthChanged = "thread row authorization changed during selection"
	msgQueryBudget    = "thread window query budget exceeded; reduce window work before retrying"
	msgRawRowBudget   = "thread window raw row budget exceeded; reduce window work before retrying"
	msgPayloadBudget  = "thread window payload byte budget exceeded; reduce window work before retrying"
	msgResponseBudget = "thread window exceeds response byte budget"
	msgDBTimeout      = "thread database timeout; retry window"
	msgDeadline       = "thread window deadline exceeded"
)

// Labels of buzz_thread_window_budget_exhausted_total (docs/OPERATIONS.md).
const (
	budgetQuery    = "query"
	budgetRawRow   = "raw_row"
	budgetPayload  = "payload_byte"
	budgetResponse = "response_byte"
	budgetDeadline = "deadline"
	budgetTimeout  = "db_timeout"
)

// unavailable is a 503 with text.
func unavailable(text string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Text: text}
}

// exhausted is the 503 of a spent thread-mode budget.
func exhausted(budget, text string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Text: text, budget: budget}
}

// corrupt is the 500 of a live aux row that cannot be reconstructed.
func corrupt(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Text: msgInternal, cause: cause}
}

// isFailure reports whether err is a decided failure (a budget, a gate, a
// corrupt row), which a replica doubt must not turn into a retry.
func isFailure(err error) bool {
	var f *Error
	return errors.As(err, &f)
}

// classify turns whatever ended a batch into its failure: a decided one as
// it is; then the batch deadline, the caller going away, a statement or
// lock timeout or an exhausted pool, and last any other database error
// (500). batchCtx is the context under the 8 s deadline, parent the
// caller's.
func classify(err error, batchCtx, parent context.Context) *Error {
	var f *Error
	switch {
	case errors.As(err, &f):
		return f
	case parent.Err() != nil:
		// The caller is gone; nobody reads the answer.
		return &Error{Status: http.StatusServiceUnavailable, Text: msgDeadline, cause: err}
	case errors.Is(batchCtx.Err(), context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Text: msgDeadline, budget: budgetDeadline, cause: err}
	case pg.IsQueryCanceled(err), pg.IsLockNotAvailable(err), errors.Is(err, pg.ErrAcquireTimeout):
		return &Error{Status: http.StatusServiceUnavailable, Text: msgDBTimeout, budget: budgetTimeout, cause: err}
	}
	return &Error{Status: http.StatusInternalServerError, Text: msgInternal, cause: err}
}
